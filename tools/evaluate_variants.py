#!/usr/bin/env python3
"""Accuracy and speed of every precision variant of a model against its FP32 original.

Reads the variants from ``<model-dir>/model.yaml`` (written by tools/quantize_model.py),
runs each with onnxruntime's Python API the way the server does (HF ``tokenizers``,
truncation 256, right padding to the longest in the batch, the graph mean-pools, L2
normalisation here), and compares with the FP32 variant on real text:

* cosine similarity to the FP32 embedding of the same text: mean / 1st percentile / min over
  every evaluated text (~20k QQP questions), and separately over the golden texts
  (tests/data/golden_minilm.json: edge cases, 14 languages, 256-token truncation) and over
  medium passages (64..128 tokens, QQP questions joined);
* nearest-neighbour agreement: recall@10 of the FP32 top-10 for 500 held-out QQP questions
  over a corpus of the other ~19k distinct questions (exact cosine search, numpy), with the
  corpus and the queries both embedded by the variant, and with variant queries against the
  FP32 index (what a rolling switch of the served variant sees); also how many of the FP32
  top-10 are still in the variant's top-20 (QQP has many near-ties around rank 10, so
  recall@10 alone overstates the damage: even FP16 swaps a few);
* duplicate detection on QQP: ROC-AUC of the cosine over ``--pairs`` labelled pairs (seeded
  sample, none touching the calibration pool), plus accuracy / F1 at the best threshold
  (chosen on the same pairs, so optimistic; the FP32 - variant difference is the point);
* batch invariance: cosine between a text embedded alone and inside a padded batch
  (dynamic quantization computes activation ranges per batch, so it is not 1.0 there;
  int8-per-token's ranges are per token, so it is); next to it the quantize-time
  ``batch_invariant`` / ``fidelity_*`` that model.yaml carries (doc-corpus check set);
* speed, 2 intra-op threads, inter-op 1, no spinning (like ``tailcut bench-engine``), the
  variants interleaved in rounds on a shared machine: sequences/s (median of rounds, with
  min..max) and CPU milliseconds per sequence (process CPU time, far less sensitive to other
  load) for short QQP questions (16 tokens) and medium passages (~128 tokens) at batch 1 and
  32. Preliminary: ``tailcut bench-engine`` is the engine's authoritative number; ``--cpp``
  also runs it per variant (a temporary model folder whose model.yaml defaults to it).

Writes bench/results/quantization-<date>.json (and .md), prints the Markdown table, and
draws a Pareto plot (accuracy vs CPU cost) with .venv-bench's matplotlib when it exists.

Usage::

    .venv/bin/python tools/evaluate_variants.py                       # everything, ~5-10 min on 2 busy cores
    .venv/bin/python tools/evaluate_variants.py --pairs 2000 --no-speed   # quick accuracy check
    .venv/bin/python tools/evaluate_variants.py --extra static-all=/tmp/c/static-percentile-all-matmuls.onnx

QQP comes from the shared data folder: $TAILCUT_SHARED_DATA/qqp/pairs.jsonl.gz (default
<repo>/../shared/data/qqp/pairs.jsonl.gz), or ``--qqp PATH``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import variant_data as vd  # noqa: E402

RESULTS_DIR = vd.REPO_ROOT / "bench" / "results"
PLOT_PYTHON = vd.REPO_ROOT / ".venv-bench" / "bin" / "python"
TAILCUT = vd.REPO_ROOT / "build" / "tailcut"

# The source's claim we put our numbers next to (issue #6).
SOURCE_CLAIM = {
    "text": "DistilBERT on CPU: 42.1 ms -> 18.7 ms per sequence, FP32 -> INT8 (2.25x)",
    "fp32_ms": 42.1,
    "int8_ms": 18.7,
    "speedup": round(42.1 / 18.7, 2),
}


# --------------------------------------------------------------------------- model.yaml


def yaml_scalar(value: str):
    """true/false -> bool, a number -> float, anything else stays a string."""
    if value in ("true", "false"):
        return value == "true"
    try:
        return float(value)
    except ValueError:
        return value


def read_variants(model_yaml: Path) -> tuple[list[dict], str]:
    """The ``variants:`` list and ``default_variant`` of a model.yaml (no YAML dependency).

    name/file/precision are strings; the other keys quantize_model.py writes (batch_invariant,
    fidelity_min_cosine, fidelity_recall_at_10) come back as bool / float.
    """
    variants: list[dict[str, str]] = []
    default = ""
    in_block = False
    for raw in model_yaml.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        top = not raw[0].isspace() and not raw.startswith("-")
        if top:
            key, _, value = line.partition(":")
            in_block = key.strip() == "variants"
            if key.strip() == "default_variant":
                default = value.strip()
            continue
        if in_block:
            item = line.strip()
            if item.startswith("- "):
                variants.append({})
                item = item[2:]
            key, _, value = item.partition(":")
            key, value = key.strip(), value.strip()
            variants[-1][key] = value if key in ("name", "file", "precision") else yaml_scalar(value)
    if not variants:
        variants = [{"name": "fp32", "file": "model.onnx", "precision": "fp32"}]
    return variants, default or variants[0]["name"]


# --------------------------------------------------------------------------- metrics


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve = P(score_pos > score_neg), ties counted half (Mann-Whitney U)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    order = np.argsort(scores, kind="mergesort")
    _, inverse, counts = np.unique(scores[order], return_inverse=True, return_counts=True)
    avg_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based average rank of each tie group
    ranks = np.empty(len(scores))
    ranks[order] = avg_rank[inverse]
    n_pos, n_neg = labels.sum(), (~labels).sum()
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy- and F1-maximising thresholds (predict duplicate when score >= threshold)."""
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order].astype(np.int64)
    tp = np.cumsum(y)
    fp = np.cumsum(1 - y)
    n_pos = y.sum()
    n = len(y)
    last = np.r_[s[1:] != s[:-1], True]  # only cut between distinct scores
    tn = (n - n_pos) - fp
    acc = (tp + tn) / n
    f1 = 2 * tp / (tp + fp + n_pos)
    ia = np.flatnonzero(last)[np.argmax(acc[last])]
    i_f = np.flatnonzero(last)[np.argmax(f1[last])]
    return {
        "accuracy": round(float(acc[ia]), 5),
        "accuracy_threshold": round(float(s[ia]), 4),
        "f1": round(float(f1[i_f]), 5),
        "f1_threshold": round(float(s[i_f]), 4),
    }


def cos_stats(cos: np.ndarray) -> dict[str, float]:
    return {
        "n": int(len(cos)),
        "mean": round(float(cos.mean()), 6),
        "p01": round(float(np.percentile(cos, 1)), 6),
        "min": round(float(cos.min()), 6),
    }


def topk(queries: np.ndarray, corpus: np.ndarray, k: int) -> np.ndarray:
    sims = queries @ corpus.T
    part = np.argpartition(-sims, k, axis=1)[:, :k]
    rows = np.arange(len(queries))[:, None]
    return part[rows, np.argsort(-sims[rows, part], axis=1)]


def recall_at_k(reference: np.ndarray, got: np.ndarray) -> float:
    k = reference.shape[1]
    return float(np.mean([len(set(r) & set(g)) / k for r, g in zip(reference, got)]))


# --------------------------------------------------------------------------- speed


def speed_session(path: Path, threads: int):
    import onnxruntime as ort  # noqa: PLC0415

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def measure_speed(paths: dict[str, Path], tok, shapes: dict[str, list[str]], threads: int, rounds: int,
                  seconds: float) -> dict[str, dict[str, dict]]:
    sessions = {name: speed_session(p, threads) for name, p in paths.items()}
    wall: dict[tuple[str, str], list[float]] = {(n, s): [] for n in sessions for s in shapes}
    cpu: dict[tuple[str, str], list[float]] = {(n, s): [] for n in sessions for s in shapes}
    feeds = {s: vd.encode(tok, texts) for s, texts in shapes.items()}
    for _ in range(rounds):
        for shape, feed in feeds.items():
            batch = len(shapes[shape])
            for name, sess in sessions.items():
                sess.run(None, feed)  # warm-up
                runs = 0
                w0, c0 = time.perf_counter(), time.process_time()
                while True:
                    sess.run(None, feed)
                    runs += 1
                    dw = time.perf_counter() - w0
                    if dw >= seconds and runs >= 2:
                        break
                dc = time.process_time() - c0
                wall[(name, shape)].append(runs * batch / dw)
                cpu[(name, shape)].append(dc * 1000.0 / (runs * batch))
    out: dict[str, dict[str, dict]] = {}
    for name in sessions:
        out[name] = {}
        for shape in shapes:
            w, c = wall[(name, shape)], cpu[(name, shape)]
            out[name][shape] = {
                "seq_per_s": round(float(np.median(w)), 1),
                "seq_per_s_min": round(float(min(w)), 1),
                "seq_per_s_max": round(float(max(w)), 1),
                "ms_per_seq": round(1000.0 / float(np.median(w)), 3),
                "cpu_ms_per_seq": round(float(np.median(c)), 3),
            }
    return out


def cpp_bench(model_dir: Path, variants: list[dict[str, str]], seconds: float) -> dict[str, Any]:
    """`tailcut bench-engine --json` per variant: a temp folder whose model.yaml defaults to it."""
    if not TAILCUT.exists():
        return {"skipped": f"{TAILCUT} not built"}
    results: dict[str, Any] = {}
    for v in variants:
        with tempfile.TemporaryDirectory(prefix="tailcut-variant-") as tmp:
            tmpdir = Path(tmp)
            for f in model_dir.iterdir():
                if f.name != "model.yaml":
                    (tmpdir / f.name).symlink_to(f)
            yaml = (model_dir / "model.yaml").read_text()
            lines = [ln for ln in yaml.splitlines() if not ln.startswith("default_variant:")]
            (tmpdir / "model.yaml").write_text("\n".join(lines) + f"\ndefault_variant: {v['name']}\n")
            cmd = [str(TAILCUT), "bench-engine", "--json", "--model-dir", str(tmpdir), "--threads", "2",
                   "--batch-sizes", "1", "32", "--seq-lens", "16", "128", "--seconds", str(seconds)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired:
                results[v["name"]] = {"error": "timeout"}
                continue
            if proc.returncode != 0:
                results[v["name"]] = {"error": (proc.stderr or proc.stdout).strip()[-500:]}
                continue
            try:
                results[v["name"]] = json.loads(proc.stdout)
            except json.JSONDecodeError:
                results[v["name"]] = {"error": "unparseable output", "stdout": proc.stdout[-500:]}
    return results


# --------------------------------------------------------------------------- report


def precision_of(report: dict[str, Any], name: str) -> str:
    return report["variants"].get(name, {}).get("precision", "")


def markdown(report: dict[str, Any]) -> str:
    v = report["variants"]
    names = list(v)
    lines = [
        f"### Precision variants of {report['model']} vs FP32 ({report['created_utc'][:10]})",
        "",
        f"Texts: {report['data']['qqp_texts']} QQP questions, {report['data']['golden_texts']} golden, "
        f"{report['data']['medium_texts']} medium passages; NN: {report['data']['queries']} queries over "
        f"{report['data']['corpus']} questions; ROC-AUC on {report['data']['pairs']} QQP pairs "
        f"({report['data']['pairs_duplicate']} duplicates), seed {report['data']['seed']}.",
        "",
        "| variant | file MB | cos mean | cos p01 | cos min | golden min | medium min | recall@10 | "
        "FP32 top-10 in top-20 | recall@10 vs FP32 index | top-1 | ROC-AUC | best acc | best F1 | "
        "batch-invariance min | model.yaml: batch_invariant, fidelity min cos, recall@10 (doc check set) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        r = v[n]
        a = r["accuracy"]
        lines.append(
            f"| {n} | {r['file_mb']} | {a['cosine_all']['mean']:.5f} | {a['cosine_all']['p01']:.4f} | "
            f"{a['cosine_all']['min']:.4f} | {a['cosine_golden']['min']:.4f} | {a['cosine_medium']['min']:.4f} | "
            f"{a['recall_at_10']:.4f} | {a['recall_10_at_20']:.4f} | {a['recall_at_10_vs_fp32_index']:.4f} | {a['top1_agreement']:.4f} | "
            f"{a['roc_auc']:.5f} | {a['best_threshold']['accuracy']:.4f} | {a['best_threshold']['f1']:.4f} | "
            f"{a['batch_invariance']['min']:.7f} | {r.get('model_yaml', {}).get('batch_invariant', '')}, "
            f"{r.get('model_yaml', {}).get('fidelity_min_cosine', '')}, {r.get('model_yaml', {}).get('fidelity_recall_at_10', '')} |"
        )
    speed = report.get("speed")
    if speed:
        shapes = list(next(iter(speed["results"].values())))
        lines += [
            "",
            f"Speed, onnxruntime {report['tools']['onnxruntime']} Python, {speed['threads']} threads, no spinning, "
            f"median of {speed['rounds']} interleaved rounds (machine busy: load average at start "
            f"{speed['loadavg_start']}, end {speed['loadavg_end']}). seq/s (min..max) and CPU ms per sequence:",
            "",
            "| variant | " + " | ".join(f"{s} seq/s | {s} CPU ms" for s in shapes) + " | load s |",
            "|---|" + "---|---|" * len(shapes) + "---|",
        ]
        for n in speed["results"]:
            cells = []
            for s in shapes:
                c = speed["results"][n][s]
                cells.append(f"{c['seq_per_s']:.0f} ({c['seq_per_s_min']:.0f}..{c['seq_per_s_max']:.0f}) | "
                             f"{c['cpu_ms_per_seq']:.2f}")
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {v[n]['session_load_s']:.2f} |")
        if speed.get("speedup_vs_fp32"):
            lines += ["", "FP32 / variant, CPU ms per sequence (wall-clock ratio in brackets):", ""]
            for n, per in speed["speedup_vs_fp32"].items():
                lines.append(f"- {n}: " + ", ".join(f"{s} {x['cpu']:.2f}x ({x['wall']:.2f}x)" for s, x in per.items()))
        lines += ["", f"Source's claim: {SOURCE_CLAIM['text']}. Ours, batch 1 (wall-clock median, busy machine):"]
        res = speed["results"]
        for n in res:
            if n == "fp32" or precision_of(report, n) != "int8":
                continue
            parts = []
            for s, label in (("b1_short", "16 tokens"), ("b1_medium", "~128 tokens")):
                a, b = res["fp32"][s]["ms_per_seq"], res[n][s]["ms_per_seq"]
                parts.append(f"{label} {a:.1f} -> {b:.1f} ms ({a / b:.2f}x; CPU time "
                             f"{res['fp32'][s]['cpu_ms_per_seq'] / res[n][s]['cpu_ms_per_seq']:.2f}x)")
            lines.append(f"- FP32 -> {n}: " + "; ".join(parts))
    cpp = report.get("cpp_bench")
    if cpp and not cpp.get("skipped"):
        lines += ["", "`tailcut bench-engine` (C++, 2 threads, the authoritative engine number; one run per "
                  "variant, same busy machine), sequences/s:", ""]
        header = None
        for n, r in cpp.items():
            if "cells" not in r:
                lines.append(f"- {n}: {r.get('error', 'no result')}")
                continue
            cells = {f"b{c['batch']}_t{c['seq_len']}": c["sequences_per_s"] for c in r["cells"]}
            if header is None:
                header = list(cells)
                lines += ["| variant | " + " | ".join(header) + " |", "|---|" + "---|" * len(header)]
            lines.append(f"| {n} | " + " | ".join(f"{cells.get(h, float('nan')):.0f}" for h in header) + " |")
    return "\n".join(lines) + "\n"


def plot(json_path: Path, png_path: Path) -> str:
    if not PLOT_PYTHON.exists():
        return f"skipped: {PLOT_PYTHON} not found (no matplotlib)"
    script = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rep = json.load(open(sys.argv[1]))
speed = rep["speed"]["results"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for ax, (metric, label) in zip(axes, [("roc_auc", "QQP duplicate ROC-AUC"), ("recall_at_10", "recall@10 of FP32 top-10")]):
    pts = []
    for name, r in rep["variants"].items():
        if name not in speed:
            continue
        x = speed[name]["b32_short"]["cpu_ms_per_seq"]
        y = r["accuracy"][metric]
        pts.append((x, y, name))
        ax.scatter([x], [y], s=40)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    pts.sort()
    front, best = [], -1.0
    for x, y, n in pts:
        if y > best:
            front.append((x, y)); best = y
    ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="grey", linewidth=1)
    ax.set_xlabel("CPU ms per sequence (batch 32, 16 tokens; lower is better)")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
fig.suptitle(rep["model"] + ": accuracy vs cost per precision variant (onnxruntime, 2 threads)")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
"""
    proc = subprocess.run([str(PLOT_PYTHON), "-c", script, str(json_path), str(png_path)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return "failed: " + proc.stderr.strip()[-300:]
    return str(png_path)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=vd.DEFAULT_MODEL_DIR)
    parser.add_argument("--qqp", type=Path, default=vd.DEFAULT_QQP,
                        help="QQP pairs.jsonl.gz (default $TAILCUT_SHARED_DATA/qqp/pairs.jsonl.gz, "
                             "else <repo>/../shared/data/qqp/pairs.jsonl.gz)")
    parser.add_argument("--pairs", type=int, default=10000, help="QQP pairs for ROC-AUC (their questions are the texts)")
    parser.add_argument("--queries", type=int, default=500, help="NN queries held out of the corpus")
    parser.add_argument("--medium", type=int, default=500, help="medium passages (64..128 tokens) for cosine")
    parser.add_argument("--batch-invariance", type=int, default=200, help="texts embedded alone vs batched")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64, help="batch size for the accuracy embeddings")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--speed-rounds", type=int, default=5)
    parser.add_argument("--speed-seconds", type=float, default=0.5, help="per variant, shape and round")
    parser.add_argument("--cpp", action="store_true", help="also run `tailcut bench-engine` per variant")
    parser.add_argument("--cpp-seconds", type=float, default=2.0, help="bench-engine --seconds per cell")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=PATH",
                        help="also evaluate another ONNX file (e.g. a rejected candidate)")
    parser.add_argument("--out", type=Path, default=None, help="results JSON (default bench/results/quantization-<date>.json)")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()

    import onnxruntime as ort  # noqa: PLC0415

    ort.set_default_logger_severity(3)
    model_dir = args.model_dir.resolve()
    variants, default = read_variants(model_dir / "model.yaml")
    paths = {v["name"]: model_dir / v["file"] for v in variants}
    precision = {v["name"]: v.get("precision", "") for v in variants}
    yaml_fields = {v["name"]: {k: v[k] for k in ("batch_invariant", "fidelity_min_cosine", "fidelity_recall_at_10")
                               if k in v} for v in variants}
    if "fp32" not in paths:
        raise SystemExit("evaluate_variants: model.yaml lists no fp32 variant to compare with")
    for spec in args.extra:
        name, _, p = spec.partition("=")
        paths[name] = Path(p).resolve()
        precision[name] = "extra"
    for name, p in paths.items():
        if not p.exists():
            raise SystemExit(f"evaluate_variants: {name}: {p} missing (run tools/quantize_model.py)")
    print(f"evaluate_variants: {', '.join(paths)} in {model_dir}", flush=True)

    # ---- data -----------------------------------------------------------------------------
    tok = vd.load_tokenizer(model_dir / "tokenizer.json")
    pairs = vd.evaluation_pairs(vd.load_qqp(args.qqp))
    rng = np.random.default_rng(args.seed)
    chosen = [pairs[i] for i in sorted(rng.choice(len(pairs), size=min(args.pairs, len(pairs)), replace=False))]
    questions = vd.distinct_questions(chosen)
    query_idx = np.sort(rng.choice(len(questions), size=args.queries, replace=False))
    is_query = np.zeros(len(questions), dtype=bool)
    is_query[query_idx] = True
    corpus_idx = np.flatnonzero(~is_query)
    chosen_set = set(questions)
    others = [q for q in vd.distinct_questions(pairs) if q not in chosen_set]
    medium = vd.passages(others, tok, 64, 128, args.medium, seed=args.seed)
    golden = vd.golden_texts()
    texts = questions + golden + medium
    n_q, n_g = len(questions), len(golden)
    sl_q, sl_g, sl_m = slice(0, n_q), slice(n_q, n_q + n_g), slice(n_q + n_g, len(texts))
    index = {q: i for i, q in enumerate(questions)}
    ia = np.array([index[p.a] for p in chosen])
    ib = np.array([index[p.b] for p in chosen])
    labels = np.array([p.duplicate for p in chosen])
    inv_idx = rng.choice(n_q, size=min(args.batch_invariance, n_q), replace=False)
    lengths = vd.token_lengths(tok, texts)
    data_info = {
        "qqp": str(args.qqp),
        "qqp_sha256": vd.sha256_file(args.qqp),
        "seed": args.seed,
        "pairs": len(chosen),
        "pairs_duplicate": int(labels.sum()),
        "pairs_pool": f"{len(pairs)} QQP pairs with neither question in the calibration buckets",
        "qqp_texts": n_q,
        "queries": int(len(query_idx)),
        "corpus": int(len(corpus_idx)),
        "golden_texts": n_g,
        "medium_texts": len(medium),
        "tokens_mean": {"qqp": round(float(lengths[sl_q].mean()), 1), "golden": round(float(lengths[sl_g].mean()), 1),
                        "medium": round(float(lengths[sl_m].mean()), 1)},
        "texts_sha256": vd.sha256_texts(texts),
    }
    print(f"evaluate_variants: {n_q} QQP questions ({len(chosen)} pairs), {n_g} golden, {len(medium)} medium; "
          f"{len(query_idx)} queries over {len(corpus_idx)}", flush=True)

    # ---- embeddings -------------------------------------------------------------------------
    emb: dict[str, np.ndarray] = {}
    info: dict[str, dict] = {}
    for name, p in paths.items():
        t = time.perf_counter()
        sess = vd.make_session(p, threads=args.threads)
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        e = vd.embed(sess, tok, texts, batch_size=args.batch)
        embed_s = time.perf_counter() - t
        singles = np.concatenate([vd.embed(sess, tok, [texts[i]], batch_size=1) for i in inv_idx])
        emb[name] = e.astype(np.float32)
        info[name] = {
            "file": str(p.relative_to(model_dir)) if p.is_relative_to(model_dir) else str(p),
            "precision": precision[name],
            "file_mb": round(p.stat().st_size / 1e6, 1),
            "session_load_s": round(load_s, 2),
            "embed_all_s": round(embed_s, 1),
            "batch_invariance": cos_stats((singles * e[inv_idx]).sum(1)),
        }
        print(f"evaluate_variants: {name}: embedded {len(texts)} texts in {embed_s:.1f}s (load {load_s:.2f}s)",
              flush=True)

    # ---- accuracy -----------------------------------------------------------------------------
    ref = emb["fp32"].astype(np.float64)
    ref_top = topk(ref[query_idx], ref[corpus_idx], 10)
    fp32_auc = roc_auc((ref[ia] * ref[ib]).sum(1), labels)
    results: dict[str, dict] = {}
    for name, e32 in emb.items():
        e = e32.astype(np.float64)
        cos = (e * ref).sum(1)
        top = topk(e[query_idx], e[corpus_idx], 20)
        top_mixed = topk(e[query_idx], ref[corpus_idx], 10)
        scores = (e[ia] * e[ib]).sum(1)
        auc = roc_auc(scores, labels)
        results[name] = {
            **info[name],
            "accuracy": {
                "cosine_all": cos_stats(cos),
                "cosine_qqp": cos_stats(cos[sl_q]),
                "cosine_golden": cos_stats(cos[sl_g]),
                "cosine_medium": cos_stats(cos[sl_m]),
                "recall_at_10": round(recall_at_k(ref_top, top[:, :10]), 5),
                "recall_10_at_20": round(recall_at_k(ref_top, top), 5),
                "recall_at_10_vs_fp32_index": round(recall_at_k(ref_top, top_mixed), 5),
                "top1_agreement": round(float(np.mean(ref_top[:, 0] == top[:, 0])), 5),
                "roc_auc": round(auc, 5),
                "roc_auc_delta_vs_fp32": round(auc - fp32_auc, 5),
                "best_threshold": best_threshold(scores, labels),
                "batch_invariance": info[name]["batch_invariance"],
            },
        }
        results[name].pop("batch_invariance")
        mpath = paths[name].with_name(paths[name].name + ".manifest.json")
        if mpath.exists():
            m = json.loads(mpath.read_text())
            results[name]["quantization"] = {
                "method": m.get("method", {}).get("method"),
                "settings": m.get("key", {}).get("settings"),
                "build_fidelity": m.get("fidelity") or m.get("validation"),
                "build_batch_invariance": m.get("batch_invariance"),
                "static_candidates": m.get("method", {}).get("candidates"),
            }
        if yaml_fields.get(name):
            results[name]["model_yaml"] = yaml_fields[name]
    t_acc = time.perf_counter() - t_start

    report: dict[str, Any] = {
        "generated_by": "tools/evaluate_variants.py",
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": model_dir.name,
        "model_dir": str(model_dir),
        "default_variant": default,
        "machine": {
            "cpu": next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                         if ln.startswith("model name")), platform.processor()),
            "cores": os.cpu_count(),
            "note": "shared machine: other builds/tests ran at the same time; speed numbers are noisy",
        },
        "tools": {"onnxruntime": ort.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "data": data_info,
        "variants": results,
        "source_claim": SOURCE_CLAIM,
    }

    # ---- speed ----------------------------------------------------------------------------------
    if not args.no_speed:
        short16 = list(itertools.islice((q for q in others if len(tok.encode(q).ids) == 16), 32))
        medium128 = [m for m in vd.passages(others[::-1], tok, 120, 128, 64, seed=args.seed + 1)][:32]
        shapes = {"b1_short": short16[:1], "b32_short": short16, "b1_medium": medium128[:1], "b32_medium": medium128}
        load_start = os.getloadavg()
        t = time.perf_counter()
        speed = measure_speed(paths, tok, shapes, args.threads, args.speed_rounds, args.speed_seconds)
        speedup = {
            n: {s: {"cpu": round(speed["fp32"][s]["cpu_ms_per_seq"] / speed[n][s]["cpu_ms_per_seq"], 2),
                    "wall": round(speed[n][s]["seq_per_s"] / speed["fp32"][s]["seq_per_s"], 2)} for s in shapes}
            for n in speed if n != "fp32"
        }
        report["speed"] = {
            "threads": args.threads,
            "inter_op_threads": 1,
            "spinning": False,
            "rounds": args.speed_rounds,
            "seconds_per_cell": args.speed_seconds,
            "shapes": {s: {"batch": len(t_), "tokens": int(vd.token_lengths(tok, t_).max())} for s, t_ in shapes.items()},
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "results": speed,
            "speedup_vs_fp32": speedup,
            "seconds": round(time.perf_counter() - t, 1),
        }
        report["source_claim"]["ours_ms_per_sequence_b1"] = {
            n: {s: speed[n][s]["ms_per_seq"] for s in ("b1_short", "b1_medium")} for n in speed
        }
    if args.cpp:
        t = time.perf_counter()
        report["cpp_bench"] = cpp_bench(model_dir, [v for v in variants], seconds=args.cpp_seconds)
        report["cpp_bench_seconds"] = round(time.perf_counter() - t, 1)

    report["runtime_s"] = {"accuracy": round(t_acc, 1), "total": round(time.perf_counter() - t_start, 1)}
    out = args.out or RESULTS_DIR / f"quantization-{datetime.now().strftime('%Y-%m-%d')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    md = markdown(report)
    if not args.no_plot and "speed" in report:
        report["plot"] = plot(out, out.with_suffix(".png"))
        out.write_text(json.dumps(report, indent=2) + "\n")
        md += f"\nPareto plot: {report['plot']}\n"
    out.with_suffix(".md").write_text(md)
    print()
    print(md)
    print(f"evaluate_variants: wrote {out} in {report['runtime_s']['total']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
