#!/usr/bin/env python3
"""Operating points of the semantic cache's reranker policy: for each accepted wrong-hit share
δ, the reranker probability threshold chosen on the calibration part of the cross-encoder's
group split, and what it measures on the test part (questions no step has seen).

Why this exists
---------------
Under ``semantic.policy: reranker`` the server reuses a cached answer when the nearest cached
prompt's cosine is at least the document's ``min_cosine`` and the reranker (the exported
cross-encoder, tools/export_cross_encoder.py) gives the pair a probability of at least the
threshold the operator's δ picks. Those thresholds only mean something when measured as the
server decides: the same embedding variant for the cosine, the same reranker variant, the
same pair order (the incoming query first, the cached prompt second) and the same cut. This
tool replays QQP that way (ask ``a``, then ``b``: a hit on a duplicate pair is a true hit, on a
non-duplicate a wrong one) with ONNX Runtime on the exported files, and writes the document
the export copies beside the model (``semantic_operating_points.json``).

Split: tools/train_cross_encoder.py's ``group_split`` (connected question groups, 60/20/20).
The thresholds are chosen on ``calibration``; the reported hit rate and wrong-hit share are
``test``'s. The cross-encoder was trained on ``train`` only.

Usage (after scripts/setup.sh; needs the team's QQP pairs)::

    .venv/bin/python tools/calibrate_cross_encoder.py            # writes the document
    .venv/bin/python tools/calibrate_cross_encoder.py --dry-run  # prints the tables only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))

import export_model  # noqa: E402
import variant_data  # noqa: E402
from export_cross_encoder import MAX_SEQUENCE_LENGTH, MODEL_NAME  # noqa: E402
from semantic_cache_eval import curve, default_pairs, evaluate_hits, model_file  # noqa: E402
from train_cross_encoder import group_split, read_pairs, wrong_share_at  # noqa: E402

FORMAT = "tailcut.semantic_reranker/1"
DEFAULT_OUT = REPO_ROOT / "data" / "semantic_cross_encoder" / "operating_points.json"
DELTAS = [round(0.04 + 0.01 * i, 2) for i in range(17)]  # 0.04 .. 0.20
HIT_RATES = [0.05, 0.10, 0.20, 0.30, 0.50]


def rerank_logits(session, tok, pairs: list[tuple[str, str]], batch: int = 64) -> np.ndarray:
    order = np.argsort([len(a) + len(b) for a, b in pairs])
    out = np.zeros(len(pairs), np.float32)
    for s in range(0, len(pairs), batch):
        idx = order[s:s + batch]
        out[idx] = session.run(["logit"], export_model.encode_batch(tok, [pairs[i] for i in idx]))[0][:, 0]
    return out


MIN_HITS = 20  # Fewer hits than this say nothing about a share.


def point_for(prob: np.ndarray, labels: np.ndarray, gate: np.ndarray, delta: float) -> float | None:
    """The lowest threshold whose hits (gate & prob >= t) are at most `delta` wrong on these
    pairs, with at least MIN_HITS hits; None when none is. Over semantic_cache_eval's curve of
    the pairs the cosine floor lets through; the lowest such threshold, where choose_threshold
    would take the first of equal hit rates (the shipped document was chosen this way)."""
    if not gate.any():
        return None
    c = curve(prob[gate], labels[gate])
    ok = np.nonzero((c["wrong_hit_share"] <= delta) & (c["hits"] >= MIN_HITS))[0]
    return float(c["threshold"][ok[-1]]) if len(ok) else None


def measure(prob, labels, gate, threshold) -> tuple[float, float]:
    """(hit rate, wrong-hit share) of the decision gate & prob >= threshold."""
    e = evaluate_hits(gate & (prob >= threshold), labels)
    return e["hit_rate"], e["wrong_hit_share"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, default=None, help="QQP pairs (default: the shared data)")
    ap.add_argument("--embedding-model", type=Path, default=REPO_ROOT / "models" / "all-MiniLM-L6-v2")
    ap.add_argument("--embedding-variant", default="int8-per-token",
                    help="the variant the semantic cache embeds queries with")
    ap.add_argument("--reranker-model", type=Path, default=REPO_ROOT / "models" / MODEL_NAME)
    ap.add_argument("--reranker-variant", default="int8-per-token")
    ap.add_argument("--min-cosine", type=float, default=0.80,
                    help="candidates below this cosine are never scored (the server's floor)")
    ap.add_argument("--default-delta", type=float, default=0.09,
                    help="the δ the document recommends (the server's default)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--dry-run", action="store_true", help="print, write nothing")
    args = ap.parse_args(argv)

    pairs_path = args.pairs or default_pairs()
    if not pairs_path.is_file():
        print(f"calibrate_cross_encoder: {pairs_path} not found (set TAILCUT_SHARED_DATA)", file=sys.stderr)
        return 2
    try:
        emb_file = model_file(args.embedding_model, args.embedding_variant)
        rr_file = model_file(args.reranker_model, args.reranker_variant)
    except ValueError as e:
        print(f"calibrate_cross_encoder: {e}", file=sys.stderr)
        return 2
    for f in (emb_file, rr_file):
        if not f.is_file():
            print(f"calibrate_cross_encoder: {f} not found (run scripts/setup.sh)", file=sys.stderr)
            return 2

    pairs = read_pairs(pairs_path)
    split = group_split(pairs)
    keep = np.nonzero(split != "train")[0]
    sub = [pairs[i] for i in keep]
    labels = np.array([int(p["duplicate"]) for p in sub])
    part = split[keep]
    t0 = time.time()
    emb_tok = variant_data.load_tokenizer(args.embedding_model / "tokenizer.json")
    emb_session = export_model.make_session(emb_file)
    texts = sorted({p["a"] for p in sub} | {p["b"] for p in sub})
    index = {t: i for i, t in enumerate(texts)}
    vectors = variant_data.embed(emb_session, emb_tok, texts, batch_size=128)
    cosine = np.einsum("ij,ij->i", vectors[[index[p["a"]] for p in sub]],
                       vectors[[index[p["b"]] for p in sub]])
    rr_tok = export_model.load_tokenizer(args.reranker_model / "tokenizer.json", MAX_SEQUENCE_LENGTH)
    rr_session = export_model.make_session(rr_file)
    # The server's order: the incoming query (b) first, the cached prompt (a) second.
    logits = rerank_logits(rr_session, rr_tok, [(p["b"], p["a"]) for p in sub])
    prob = 1 / (1 + np.exp(-logits.astype(np.float64)))
    print(f"scored {len(sub)} pairs ({len(texts)} texts) in {time.time() - t0:.0f} s", file=sys.stderr)

    cal, test = part == "calibration", part == "test"
    gate = cosine >= args.min_cosine
    floor_recall = float((gate & test & (labels == 1)).sum() / (test & (labels == 1)).sum())
    points = []
    for delta in DELTAS:
        t = point_for(prob[cal], labels[cal], gate[cal], delta)
        if t is None:
            continue
        cal_hit, cal_wrong = measure(prob[cal], labels[cal], gate[cal], t)
        hit, wrong = measure(prob[test], labels[test], gate[test], t)
        points.append({"max_wrong_hit_share": delta, "threshold": t, "hit_rate": hit,
                       "wrong_hit_share": wrong, "calibration_hit_rate": cal_hit,
                       "calibration_wrong_hit_share": cal_wrong})
    print(f"test pairs {int(test.sum())}, duplicates {int((test & (labels == 1)).sum())}; "
          f"cosine >= {args.min_cosine} keeps {floor_recall:.1%} of the duplicates")
    print(f"{'delta':>6} {'threshold':>9} {'test hit rate':>13} {'test wrong':>10} {'cal hit':>8} {'cal wrong':>9}")
    for p in points:
        print(f"{p['max_wrong_hit_share']:>6.2f} {p['threshold']:>9.4f} {p['hit_rate']:>13.1%} "
              f"{p['wrong_hit_share']:>10.1%} {p['calibration_hit_rate']:>8.1%} "
              f"{p['calibration_wrong_hit_share']:>9.1%}")
    gated = np.where(gate, prob, -1.0)
    curve = {
        "cosine": {f"{h:.2f}": wrong_share_at(cosine[test], labels[test], h) for h in HIT_RATES},
        "reranker": {f"{h:.2f}": wrong_share_at(gated[test], labels[test], h)
                     for h in HIT_RATES if h <= floor_recall},
    }
    print("wrong hits as a share of hits, test part, at a duplicate hit rate of:")
    for name, row in curve.items():
        print(f"  {name:>9}: " + "  ".join(f"{k} {v:.1%}" for k, v in row.items()))
    if not any(abs(p["max_wrong_hit_share"] - args.default_delta) < 1e-9 for p in points):
        print(f"calibrate_cross_encoder: no operating point for the default δ {args.default_delta}",
              file=sys.stderr)
        return 1
    doc = {
        "format": FORMAT,
        "model": args.reranker_model.name,
        "reranker_variant": args.reranker_variant,
        "embedding_variant": args.embedding_variant,
        "min_cosine": args.min_cosine,
        "score": "sigmoid(logit) of (query, cached prompt)",
        "default_max_wrong_hit_share": args.default_delta,
        "operating_points": points,
        "test_wrong_hit_share_at_hit_rate": curve,
        "provenance": {
            "tool": "tools/calibrate_cross_encoder.py",
            "pairs": pairs_path.name,
            "split": "tools/train_cross_encoder.py group_split: thresholds on calibration "
                     f"({int(cal.sum())} pairs), figures on test ({int(test.sum())} pairs)",
            "reranker_file_sha256": export_model.sha256_file(rr_file),
            "embedding_file_sha256": export_model.sha256_file(emb_file),
        },
    }
    if args.dry_run:
        return 0
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
