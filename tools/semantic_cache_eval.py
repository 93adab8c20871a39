#!/usr/bin/env python3
"""Decision policies of the semantic output cache on labelled question pairs: train the
verifier, choose its operating points, and compare it with the simpler policies.

Each labelled pair (a, b, duplicate) is read as "ask a, then b": a's answer is cached, b is
the new prompt, and a policy decides whether b reuses a's answer. Measured per policy on the
TEST split (pairs used for nothing else):

* duplicate hit rate: duplicate pairs whose b hits / duplicate pairs;
* wrong-hit share: non-duplicate pairs whose b hits / all pairs whose b hits (the answers a
  user gets that were written for a different question).

Policies:

* exact match (byte-equal prompts), and exact match after folding case, spaces and
  punctuation;
* one cosine threshold on tailcut's fp32 embeddings (all-MiniLM-L6-v2, mean-pooled,
  L2-normalised), swept 0.80 .. 0.99;
* GPTCache-like: GPTCache's similarity_threshold 0.8 with its SearchDistanceEvaluation
  (max_distance 4.0) over a faiss L2 index hits when the squared L2 distance is at most
  4.0 * (1 - 0.8) = 0.8; on unit vectors that is cosine >= 0.6. Only that decision rule is
  reproduced: GPTCache's default ONNX model (paraphrase-albert) is not normalised and is not
  used here; the embeddings are tailcut's;
* clustering keys: agglomerative clustering of the test split's distinct questions at cosine
  distance 0.18 (average linkage, and complete linkage), key = cluster, so b hits when it is in
  a's cluster. Exact: a merge at distance <= 0.18 joins clusters with at least one pair that
  close, so clusters never cross the connected components of the "distance <= 0.18" graph and
  each component is clustered on its own;
* the verifier (src/cache/semantic_verifier.h): logistic regression over some of the
  features that `tailcut semantic-pairs` computes (the server's own C++ code; default the
  shipped set, DEFAULT_FEATURES), standardised, L2-penalised, fitted by Newton's method on the
  TRAIN split; for each accepted wrong-hit share delta, the probability threshold with the
  most calibration-split hits whose calibration wrong-hit share is <= delta (by default its
  Wilson upper bound at one standard error, --calibration-z: the plain share, chosen as the
  best of thousands of thresholds, came out 1-1.5 points higher on the test split); then
  measured on TEST. The weights document carries those test numbers, and the server picks
  the point for an operator's delta from them (SemanticVerifier::OperatingPointFor).

Also printed: the wrong-hit share of the cosine and of the verifier at a 20 % duplicate hit
rate (interpolated on the test curves), whether the verifier's curve is at or above the
cosine's at every cosine threshold of the sweep (with the binomial standard error where it is
not), a label-noise probe (pairs with the same words that the labels still call different),
the test split divided by whether a pair's questions appear in any train or calibration pair
(unseen_questions: a model that memorises questions looks better on the pairs that share
one; see docs/semantic-cache-evaluation.md), and with --ablation what each feature buys, by
5-fold cross-validation over the train + calibration pairs (the test split is not used to
choose features).

Splits: a pair's bucket is blake2b(a + U+001F + b) mod 100: 0-59 train, 60-79 calibration,
80-99 test. Disjoint in pairs, independent of file order. (A question can appear in pairs of
different splits; see docs/semantic-cache-evaluation.md.)

Features come from `build/tailcut semantic-pairs` (one run embeds every distinct text once),
cached under ~/.cache/tailcut/semantic-pairs/ by a hash of the input pairs, the tailcut binary
and the model file, so a rerun takes seconds.

Writes the numbers (--json-out), an SVG plot of the curves (--svg-out, default
bench/results/semantic-cache-<date>.svg) and, with --write-weights, the verifier's weights
document that the server compiles in (data/semantic_verifier.json).

Usage::

    .venv/bin/python tools/semantic_cache_eval.py                     # all 64,683 pairs
    .venv/bin/python tools/semantic_cache_eval.py --limit 3000        # quick look
    .venv/bin/python tools/semantic_cache_eval.py --ablation --write-weights data/semantic_verifier.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_ENV = "TAILCUT_SHARED_DATA"
NEWLINE = b"\n"

# Every feature `tailcut semantic-pairs` writes (SemanticPairFeatures::Names()).
ALL_FEATURES = [
    "cosine", "token_jaccard", "token_containment", "content_jaccard", "content_unmatched",
    "content_substituted", "number_mismatch", "negation_mismatch", "question_word_mismatch",
    "entity_mismatch", "length_ratio", "length_diff_tokens", "antonym_mismatch", "order_swap",
]
# The shipped verifier's features: the cosine and the mismatches that mark a different
# question (see the ablation in docs/semantic-cache-evaluation.md for why only these).
DEFAULT_FEATURES = [
    "cosine", "number_mismatch", "entity_mismatch", "negation_mismatch", "antonym_mismatch",
    "order_swap",
]
# The accepted wrong-hit shares the operating-point table covers.
DELTAS = [0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.12, 0.15, 0.20, 0.25]
# The shipped default δ (see docs/semantic-cache-evaluation.md for why).
DEFAULT_DELTA = 0.08
COSINE_SWEEP = [round(0.80 + 0.01 * i, 2) for i in range(20)]
GPTCACHE_COSINE = 1.0 - 4.0 * (1.0 - 0.8) / 2.0  # squared L2 <= 0.8 on unit vectors
CLUSTER_DISTANCE = 0.18
TARGET_HIT_RATE = 0.20


def default_pairs() -> Path:
    env = os.environ.get(SHARED_DATA_ENV)
    base = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    return base / "qqp" / "pairs.jsonl.gz"


def default_tailcut() -> Path:
    build = os.environ.get("TAILCUT_BUILD_DIR")
    return (Path(build) if build else REPO_ROOT / "build") / "tailcut"


def default_model_dir() -> Path:
    env = os.environ.get("TAILCUT_MODEL_DIR")
    return Path(env) if env else REPO_ROOT / "models" / "all-MiniLM-L6-v2"


# ----------------------------------------------------------------------------------------
# Data and features


def read_pairs_bytes(path: Path, limit: int | None) -> bytes:
    """The first `limit` lines (all when None) of a .jsonl or .jsonl.gz file."""
    opener = gzip.open if path.suffix == ".gz" else open
    lines = []
    with opener(path, "rb") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            lines.append(line if line.endswith(b"\n") else line + b"\n")
    return b"".join(lines)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_file(model_dir: Path, variant: str = "") -> Path:
    """The ONNX file model.yaml names (its `file:` line, or with `variant` that variant's
    `file:`), default model.onnx."""
    yaml = model_dir / "model.yaml"
    text = yaml.read_text() if yaml.is_file() else ""
    if variant:
        m = re.search(r"-\s*name:\s*" + re.escape(variant) + r"\s*\n\s*file:\s*(\S+)", text)
        if not m:
            raise ValueError(f"--variant {variant}: not a variant in {yaml}")
        return model_dir / m.group(1)
    m = re.search(r"^file:\s*(\S+)", text, re.MULTILINE)
    if m:
        return model_dir / m.group(1)
    return model_dir / "model.onnx"


def semantic_pairs(data: bytes, tailcut: Path, model_dir: Path, cache_dir: Path,
                   log=print, variant: str = "") -> tuple[list[dict], np.ndarray, dict]:
    """Runs `tailcut semantic-pairs` on `data` (or reuses its cached output): the per-pair
    records and the distinct texts' embeddings. The cache key covers the input, the binary
    and the model, so a rebuilt feature extractor is never served stale features."""
    if not tailcut.is_file():
        raise FileNotFoundError(f"{tailcut} not found: build it (ninja -C build tailcut) or "
                                f"pass --tailcut")
    key = hashlib.sha256()
    key.update(hashlib.sha256(data).digest())
    key.update(file_digest(tailcut).encode())
    key.update(file_digest(model_file(model_dir, variant)).encode())
    digest = key.hexdigest()[:24]
    cache_dir.mkdir(parents=True, exist_ok=True)
    features_path = cache_dir / f"{digest}.features.jsonl"
    emb_path = cache_dir / f"{digest}.embeddings.npy"
    meta_path = cache_dir / f"{digest}.meta.json"
    if features_path.is_file() and emb_path.is_file() and meta_path.is_file():
        log(f"features: cached {features_path}")
        meta = json.loads(meta_path.read_text())
        meta["cached"] = True
    else:
        tmp_features = features_path.with_suffix(".tmp")
        tmp_emb = cache_dir / f"{digest}.embeddings.tmp.npy"
        cmd = [str(tailcut), "semantic-pairs", "-m", str(model_dir), "-o", str(tmp_features),
               "--embeddings-out", str(tmp_emb)] + (["--variant", variant] if variant else [])
        log("features: " + " ".join(cmd) + f"  ({data.count(NEWLINE)} pairs on stdin)")
        start, cpu_start = time.monotonic(), os.times()
        proc = subprocess.run(cmd, input=data, stderr=subprocess.PIPE)
        wall = time.monotonic() - start
        cpu_end = os.times()
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"tailcut semantic-pairs failed ({proc.returncode}):\n{stderr}")
        meta = {
            "pairs": data.count(NEWLINE),
            "wall_s": round(wall, 2),
            "cpu_s": round((cpu_end.children_user - cpu_start.children_user)
                           + (cpu_end.children_system - cpu_start.children_system), 2),
            # Its summary lines: the embedding rate and the feature extraction's cost.
            "tailcut_stderr": [line for line in stderr.splitlines()
                               if line.startswith("semantic-pairs:") and " in " in line],
        }
        os.replace(tmp_features, features_path)
        os.replace(tmp_emb, emb_path)
        meta_path.write_text(json.dumps(meta))
        meta["cached"] = False
        log(f"features: {meta['pairs']} pairs in {wall:.1f} s wall, {meta['cpu_s']} s CPU")
    with open(features_path, "rb") as f:
        records = [json.loads(line) for line in f]
    embeddings = np.load(emb_path, mmap_mode="r")
    return records, embeddings, meta


def split_bucket(a: str, b: str) -> int:
    h = hashlib.blake2b((a + "\x1f" + b).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "little") % 100


def fold(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


class Dataset:
    """Pairs, labels, features and the split, as numpy arrays."""

    def __init__(self, data: bytes, records: list[dict], embeddings: np.ndarray):
        pairs = [json.loads(line) for line in data.splitlines() if line.strip()]
        if len(pairs) != len(records):
            raise RuntimeError(f"{len(pairs)} input pairs but {len(records)} feature lines")
        self.a = [p["a"] for p in pairs]
        self.b = [p["b"] for p in pairs]
        self.y = np.array([r["duplicate"] for r in records], dtype=np.int8)
        self.x = np.array([[r["features"][n] for n in ALL_FEATURES] for r in records])
        self.a_row = np.array([r["a_row"] for r in records])
        self.b_row = np.array([r["b_row"] for r in records])
        self.embeddings = embeddings
        self.bucket = np.array([split_bucket(a, b) for a, b in zip(self.a, self.b)])
        self.split = np.where(self.bucket < 60, "train",
                              np.where(self.bucket < 80, "calibration", "test"))

    def column(self, name: str) -> np.ndarray:
        return self.x[:, ALL_FEATURES.index(name)]

    def mask(self, split: str) -> np.ndarray:
        return self.split == split


# ----------------------------------------------------------------------------------------
# The verifier: L2-regularised logistic regression by Newton's method


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray, float]:
    """Means, scales, weights (on standardised features) and bias. The penalty is
    l2 * |w|^2 / 2 per pair-average (the bias is not penalised)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    n, d = z.shape
    design = np.hstack([z, np.ones((n, 1))])
    theta = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(design @ theta)))
        grad = design.T @ (p - y) / n + penalty * theta
        hess = (design * (p * (1 - p))[:, None]).T @ design / n + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return mean, scale, theta[:-1], float(theta[-1])


def predict(x: np.ndarray, model: dict) -> np.ndarray:
    z = (x - model["mean"]) / model["scale"] @ model["weights"] + model["bias"]
    return 1.0 / (1.0 + np.exp(-z))


def train_verifier(ds: Dataset, features: list[str], l2: float) -> dict:
    cols = [ALL_FEATURES.index(f) for f in features]
    train = ds.mask("train")
    mean, scale, weights, bias = fit_logistic(ds.x[train][:, cols], ds.y[train], l2)
    return {"features": features, "cols": cols, "mean": mean, "scale": scale,
            "weights": weights, "bias": bias, "l2": l2}


def verifier_scores(ds: Dataset, model: dict) -> np.ndarray:
    return predict(ds.x[:, model["cols"]], model)


# ----------------------------------------------------------------------------------------
# Curves and operating points


def curve(scores: np.ndarray, y: np.ndarray) -> dict:
    """Every threshold's (hit rate, wrong-hit share): hits are pairs with score >= threshold.
    Thresholds are the distinct scores, highest first."""
    order = np.argsort(-scores, kind="stable")
    s, lab = scores[order], y[order]
    tp = np.cumsum(lab == 1)
    fp = np.cumsum(lab == 0)
    last_of_tie = np.r_[s[1:] != s[:-1], True]
    tp, fp, thr = tp[last_of_tie], fp[last_of_tie], s[last_of_tie]
    positives = max(int((y == 1).sum()), 1)
    return {"threshold": thr, "hit_rate": tp / positives, "wrong_hit_share": fp / (tp + fp),
            "hits": tp + fp}


def evaluate_hits(hit: np.ndarray, y: np.ndarray) -> dict:
    dup_hits = int((hit & (y == 1)).sum())
    wrong = int((hit & (y == 0)).sum())
    duplicates = int((y == 1).sum())
    return {
        "hit_rate": dup_hits / duplicates if duplicates else 0.0,
        "wrong_hit_share": wrong / (dup_hits + wrong) if dup_hits + wrong else 0.0,
        "hits": dup_hits + wrong,
        "wrong_hits": wrong,
    }


def wrong_share_at(c: dict, hit_rate: float) -> float:
    """Wrong-hit share at `hit_rate`, linear between the curve's measured points. For each
    hit rate the curve's best (lowest) wrong share counts: that threshold reaches it first."""
    hr, ws = c["hit_rate"], c["wrong_hit_share"]
    keep = np.r_[True, hr[1:] != hr[:-1]]
    hr, ws = hr[keep], ws[keep]
    if hit_rate < hr[0] or hit_rate > hr[-1]:
        return float("nan")
    return float(np.interp(hit_rate, hr, ws))


def wilson_upper(wrong: np.ndarray, hits: np.ndarray, z: float) -> np.ndarray:
    """Upper end of the Wilson score interval of a proportion wrong / hits (z standard errors;
    z = 0 gives the proportion itself)."""
    n = np.maximum(hits, 1).astype(float)
    p = wrong / n
    centre = p + z * z / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + spread) / (1 + z * z / n)


def choose_threshold(c: dict, delta: float, z: float = 0.0) -> float | None:
    """The threshold with the highest hit rate whose wrong-hit share is <= delta; with z > 0,
    whose Wilson upper bound (z standard errors) is. Taking the best of many thresholds on
    one sample picks lucky ones (a wrong-hit share that comes out low by chance), so the
    plain choice overshoots delta on new pairs; the bound keeps a margin that shrinks as
    the hits grow, and it rules out thresholds that only a handful of pairs pass."""
    wrong = c["wrong_hit_share"] * c["hits"]
    ok = np.nonzero(wilson_upper(wrong, c["hits"], z) <= delta)[0]
    if len(ok) == 0:
        return None
    best = ok[np.argmax(c["hit_rate"][ok])]
    return float(c["threshold"][best])


def operating_points(ds: Dataset, scores: np.ndarray, z: float, deltas=DELTAS) -> list[dict]:
    cal, test = ds.mask("calibration"), ds.mask("test")
    cal_curve = curve(scores[cal], ds.y[cal])
    points = []
    for delta in deltas:
        thr = choose_threshold(cal_curve, delta, z)
        if thr is None:
            continue
        cal_eval = evaluate_hits(scores[cal] >= thr, ds.y[cal])
        test_eval = evaluate_hits(scores[test] >= thr, ds.y[test])
        points.append({"max_wrong_hit_share": delta, "threshold": thr,
                       "calibration": cal_eval, "test": test_eval})
    return points


def operating_point_for(points: list[dict], delta: float) -> dict | None:
    """What SemanticVerifier::OperatingPointFor(delta) picks from the written table: of the
    points whose measured (test) wrong-hit share is <= delta, the one with the most hits."""
    safe = [p for p in points if p["test"]["wrong_hit_share"] <= delta]
    return max(safe, key=lambda p: p["test"]["hit_rate"]) if safe else None


# ----------------------------------------------------------------------------------------
# Clustering keys (agglomerative, numpy)


def close_pairs(emb: np.ndarray, max_distance: float, block: int = 2048):
    """(i, j) with i < j and cosine distance <= max_distance, by blocks of rows."""
    out_i, out_j = [], []
    min_sim = 1.0 - max_distance
    for start in range(0, len(emb), block):
        sims = emb[start:start + block] @ emb.T
        i, j = np.nonzero(sims >= min_sim)
        i = i + start
        keep = i < j
        out_i.append(i[keep])
        out_j.append(j[keep])
    return np.concatenate(out_i), np.concatenate(out_j)


def components(n: int, ei: np.ndarray, ej: np.ndarray) -> np.ndarray:
    parent = np.arange(n)

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for i, j in zip(ei.tolist(), ej.tolist()):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    return np.array([find(i) for i in range(n)])


def agglomerate(emb: np.ndarray, max_distance: float, linkage: str) -> np.ndarray:
    """Cluster labels of one component: merge the closest two clusters (average or complete
    linkage of cosine distance, Lance-Williams updates) while that distance <= max_distance."""
    m = len(emb)
    labels = np.arange(m)
    if m == 1:
        return labels
    dist = 1.0 - (emb @ emb.T).astype(np.float64)
    np.fill_diagonal(dist, np.inf)
    size = np.ones(m)
    active = np.ones(m, dtype=bool)
    while True:
        flat = int(np.argmin(dist))
        i, j = divmod(flat, m)
        if dist[i, j] > max_distance:
            break
        if linkage == "average":
            merged = (size[i] * dist[i] + size[j] * dist[j]) / (size[i] + size[j])
        else:
            merged = np.maximum(dist[i], dist[j])
        merged[~active] = np.inf
        dist[i, :] = merged
        dist[:, i] = merged
        dist[i, i] = np.inf
        dist[j, :] = np.inf
        dist[:, j] = np.inf
        size[i] += size[j]
        active[j] = False
        labels[labels == j] = i
    return labels


def cluster_keys(emb: np.ndarray, max_distance: float, linkage: str) -> tuple[np.ndarray, dict]:
    ei, ej = close_pairs(emb, max_distance)
    comp = components(len(emb), ei, ej)
    labels = np.arange(len(emb))
    roots, counts = np.unique(comp, return_counts=True)
    for root in roots[counts > 1]:
        members = np.nonzero(comp == root)[0]
        sub = agglomerate(np.asarray(emb[members], dtype=np.float32), max_distance, linkage)
        labels[members] = members[sub]
    _, cluster_sizes = np.unique(labels, return_counts=True)
    info = {"questions": len(emb), "close_pairs": len(ei),
            "largest_component": int(counts.max()), "clusters": len(cluster_sizes),
            "largest_cluster": int(cluster_sizes.max())}
    return labels, info


# ----------------------------------------------------------------------------------------
# Plot


def write_svg(path: Path, curves: list[dict], points: list[dict], title: str) -> None:
    """A plot by hand (no matplotlib here): x = wrong-hit share, y = duplicate hit rate.
    curves: {label, colour, x, y}; points: {label, colour, x, y, shape}."""
    w, h = 820, 520
    left, right, top, bottom = 70, 290, 40, 60
    x_max, y_max = 0.50, 1.0
    pw, ph = w - left - right, h - top - bottom

    def px(x: float) -> float:
        return left + min(max(x, 0.0), x_max) / x_max * pw

    def py(y: float) -> float:
        return top + ph - min(max(y, 0.0), y_max) / y_max * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14">{title}</text>']
    for k in range(11):
        x = k * 0.05
        out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{top + ph}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{px(x):.1f}" y="{top + ph + 18}" text-anchor="middle">'
                   f'{x * 100:.0f}%</text>')
    for k in range(11):
        y = k * 0.1
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{left + pw}" y2="{py(y):.1f}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{py(y) + 4:.1f}" text-anchor="end">'
                   f'{y * 100:.0f}%</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
               f'stroke="black"/>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 15}" text-anchor="middle">'
               f'wrong hits, share of all hits (test split)</text>')
    out.append(f'<text x="18" y="{top + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {top + ph / 2})">duplicate hit rate</text>')
    legend_y = top + 10
    for c in curves:
        # One vertex per 0.2 % of hit rate is finer than the pixels; thousands are not.
        xs, ys = np.asarray(c["x"], dtype=float), np.asarray(c["y"], dtype=float)
        keep = np.r_[True, np.diff(np.floor(ys * 500)) != 0]
        keep[-1] = True
        keep &= np.asarray(c["hits"]) >= 50  # Fewer hits than that is noise, not a curve.
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs[keep], ys[keep])
                       if np.isfinite(x) and np.isfinite(y) and x <= x_max)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c["colour"]}" '
                   f'stroke-width="2"/>')
        out.append(f'<line x1="{left + pw + 15}" y1="{legend_y}" x2="{left + pw + 40}" '
                   f'y2="{legend_y}" stroke="{c["colour"]}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 46}" y="{legend_y + 4}">{c["label"]}</text>')
        legend_y += 20
    for p in points:
        if not (np.isfinite(p["x"]) and np.isfinite(p["y"])):
            continue
        x, y = px(p["x"]), py(p["y"])
        if p.get("shape") == "square":
            mark = (f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" '
                    f'fill="{p["colour"]}"/>')
            legend = (f'<rect x="{left + pw + 23}" y="{legend_y - 4}" width="8" height="8" '
                      f'fill="{p["colour"]}"/>')
        else:
            mark = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{p["colour"]}"/>'
            legend = (f'<circle cx="{left + pw + 27}" cy="{legend_y}" r="4" '
                      f'fill="{p["colour"]}"/>')
        out.append(mark)
        if p.get("label"):
            out.append(legend)
            out.append(f'<text x="{left + pw + 46}" y="{legend_y + 4}">{p["label"]}</text>')
            legend_y += 20
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


# ----------------------------------------------------------------------------------------
# Reports


def pct(v: float) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.1f} %"


def weights_document(model: dict, points: list[dict], default_delta: float, provenance: dict
                     ) -> dict:
    return {
        "format": "tailcut.semantic_verifier/1",
        "model": "logistic_regression",
        "bias": model["bias"],
        "features": [{"name": n, "mean": float(m), "scale": float(s), "weight": float(w)}
                     for n, m, s, w in zip(model["features"], model["mean"], model["scale"],
                                           model["weights"])],
        "default_max_wrong_hit_share": default_delta,
        # hit_rate / wrong_hit_share are the held-out TEST measurements; the threshold was
        # chosen on the calibration split.
        "operating_points": [{"max_wrong_hit_share": p["max_wrong_hit_share"],
                              "threshold": p["threshold"],
                              "hit_rate": p["test"]["hit_rate"],
                              "wrong_hit_share": p["test"]["wrong_hit_share"],
                              "calibration_hit_rate": p["calibration"]["hit_rate"],
                              "calibration_wrong_hit_share": p["calibration"]["wrong_hit_share"]}
                             for p in points],
        "provenance": provenance,
    }


ABLATION_HIT_RATES = (0.05, 0.10, 0.20, 0.30)
CURVE_GRID = np.round(np.arange(0.02, 0.6001, 0.01), 2)


def cross_validated_scores(ds: Dataset, features: list[str], l2: float) -> tuple[np.ndarray,
                                                                                  np.ndarray]:
    """Out-of-fold probabilities for the train + calibration pairs (buckets 0-79), 5 folds of
    16 buckets each: every pair scored by a model that did not see it. The test split is not
    touched. Returns (mask of those pairs, scores)."""
    bucket = ds.bucket
    dev = bucket < 80
    fold = bucket // 16
    cols = [ALL_FEATURES.index(f) for f in features]
    scores = np.zeros(len(ds.y))
    for k in range(5):
        fit, held = dev & (fold != k), dev & (fold == k)
        mean, scale, weights, bias = fit_logistic(ds.x[fit][:, cols], ds.y[fit], l2)
        scores[held] = predict(ds.x[held][:, cols], {"mean": mean, "scale": scale,
                                                     "weights": weights, "bias": bias})
    return dev, scores


def ablation(ds: Dataset, features: list[str], l2: float) -> list[dict]:
    """What each feature buys, by 5-fold cross-validation over the train + calibration pairs:
    the cosine alone, the chosen set, the set less each of its features, the set plus each
    other feature, and every feature. Per model: the wrong-hit share at a few hit rates and
    the largest excess over the cosine's at any hit rate of the 2 %..60 % grid (> 0: somewhere
    worse than one cosine threshold)."""
    dev, _ = cross_validated_scores(ds, ["cosine"], l2)
    cos_curve = curve(ds.column("cosine")[dev], ds.y[dev])
    cos_grid = np.array([wrong_share_at(cos_curve, h) for h in CURVE_GRID])

    def row(label: str, feats: list[str]) -> dict:
        _, scores = cross_validated_scores(ds, feats, l2)
        c = curve(scores[dev], ds.y[dev])
        grid = np.array([wrong_share_at(c, h) for h in CURVE_GRID])
        excess = grid - cos_grid
        worst = int(np.nanargmax(excess))
        return {"model": label, "features": feats,
                **{f"wrong_hit_share_at_{round(h * 100)}": wrong_share_at(c, h)
                   for h in ABLATION_HIT_RATES},
                "worst_excess_over_cosine": float(excess[worst]),
                "worst_at_hit_rate": float(CURVE_GRID[worst])}

    rows = [row("cosine only", ["cosine"]), row("chosen: " + ", ".join(features), features)]
    for f in features:
        if f != "cosine":
            rows.append(row(f"chosen - {f}", [g for g in features if g != f]))
    for f in ALL_FEATURES:
        if f not in features:
            rows.append(row(f"chosen + {f}", features + [f]))
    rows.append(row("all features", list(ALL_FEATURES)))
    return rows


def unseen_questions(ds: Dataset, scores: np.ndarray, threshold: float | None) -> dict:
    """The test split again, divided by whether a pair's questions were seen in fitting: a
    QQP question recurs in several pairs, so a test pair often shares a question with a
    train or calibration pair. A model that can memorise a question (say, one fed the
    embeddings themselves) then looks better on the test split than it is on new prompts;
    the "unseen" part (neither question in any train or calibration pair) is what a cache's
    users bring. Per part: wrong hits at a 20 % hit rate for the cosine and the verifier, and
    what the default threshold does."""
    fit = ds.mask("train") | ds.mask("calibration")
    seen = np.union1d(ds.a_row[fit], ds.b_row[fit])
    test = ds.mask("test")
    fresh = test & ~np.isin(ds.a_row, seen) & ~np.isin(ds.b_row, seen)
    cos = ds.column("cosine")
    out = {}
    for name, m in (("unseen", fresh), ("seen", test & ~fresh)):
        part = {"pairs": int(m.sum()), "duplicates": int(ds.y[m].sum())}
        if part["duplicates"] and part["pairs"] > part["duplicates"]:
            part["cosine_wrong_hit_share_at_20"] = wrong_share_at(curve(cos[m], ds.y[m]),
                                                                  TARGET_HIT_RATE)
            part["verifier_wrong_hit_share_at_20"] = wrong_share_at(curve(scores[m], ds.y[m]),
                                                                    TARGET_HIT_RATE)
            if threshold is not None:
                part["default_point"] = evaluate_hits(scores[m] >= threshold, ds.y[m])
        out[name] = part
    return out


def label_noise_probe(ds: Dataset, min_cosine: float = 0.95) -> dict:
    """Pairs no text feature can tell apart: cosine >= min_cosine, the same lowercased words
    (token_jaccard 1) and the shared content words in the same order (order_swap 0). How
    many of them the labels call different questions."""
    same = ((ds.column("cosine") >= min_cosine) & (ds.column("token_jaccard") == 1.0)
            & (ds.column("order_swap") == 0.0))
    close = ds.column("cosine") >= min_cosine
    return {"min_cosine": min_cosine, "pairs_same_words_same_order": int(same.sum()),
            "non_duplicate_share_of_those": float(1 - ds.y[same].mean()) if same.any() else None,
            "pairs_at_or_above_cosine": int(close.sum()),
            "non_duplicate_share_at_or_above_cosine": float(1 - ds.y[close].mean())
            if close.any() else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, default=default_pairs(),
                    help="labelled pairs, JSON lines (.gz or plain); default "
                         "$TAILCUT_SHARED_DATA/qqp/pairs.jsonl.gz, else ../shared/data/...")
    ap.add_argument("--limit", type=int, help="use only the first N pairs (quick runs)")
    ap.add_argument("--tailcut", type=Path, default=default_tailcut(),
                    help="the tailcut binary (default $TAILCUT_BUILD_DIR/tailcut or build/tailcut)")
    ap.add_argument("--model-dir", type=Path, default=default_model_dir())
    ap.add_argument("--variant", default="",
                    help="precision variant of the model that embeds the texts (model.yaml's "
                         "variants, e.g. int8-per-token; default its file); recorded in the "
                         "weights as embedding_variant, which the server then embeds with")
    ap.add_argument("--cache-dir", type=Path,
                    default=Path.home() / ".cache" / "tailcut" / "semantic-pairs")
    ap.add_argument("--features", default=",".join(DEFAULT_FEATURES),
                    help="comma-separated features the verifier uses (default: the shipped "
                         f"set, {','.join(DEFAULT_FEATURES)}; 'all' = every one)")
    ap.add_argument("--l2", type=float, default=1e-4, help="L2 penalty (standardised features)")
    ap.add_argument("--default-delta", type=float, default=DEFAULT_DELTA,
                    help="the shipped default accepted wrong-hit share")
    ap.add_argument("--calibration-z", type=float, default=1.0,
                    help="choose each delta's threshold so that the calibration wrong-hit "
                         "share's Wilson upper bound at this many standard errors is <= delta "
                         "(0 = the share itself)")
    ap.add_argument("--ablation", action="store_true",
                    help="also measure what each feature buys (5-fold cross-validation over "
                         "the train + calibration pairs)")
    ap.add_argument("--cluster-max-questions", type=int, default=40000,
                    help="cluster at most this many distinct test questions (the first pairs' "
                         "questions first); clustering keys are only measured on pairs whose "
                         "two questions were clustered")
    ap.add_argument("--json-out", type=Path, help="write every number here")
    ap.add_argument("--svg-out", type=Path,
                    help="the plot (default bench/results/semantic-cache-<date>.svg; 'none' = "
                         "no plot)")
    ap.add_argument("--write-weights", type=Path,
                    help="write the verifier's weights document (data/semantic_verifier.json)")
    args = ap.parse_args(argv)

    if not args.pairs.is_file():
        print(f"pairs not found at {args.pairs} (--pairs, or ${SHARED_DATA_ENV}/qqp/"
              f"pairs.jsonl.gz)", file=sys.stderr)
        return 2
    features = (list(ALL_FEATURES) if args.features == "all"
                else [f.strip() for f in args.features.split(",") if f.strip()])
    unknown = [f for f in features if f not in ALL_FEATURES]
    if unknown or "cosine" not in features:
        print(f"--features: unknown {unknown}; known {ALL_FEATURES}; cosine is required",
              file=sys.stderr)
        return 2

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    data = read_pairs_bytes(args.pairs, args.limit)
    records, embeddings, meta = semantic_pairs(data, args.tailcut, args.model_dir,
                                               args.cache_dir, log, args.variant)
    ds = Dataset(data, records, embeddings)
    counts = {s: {"pairs": int(ds.mask(s).sum()), "duplicates": int(ds.y[ds.mask(s)].sum())}
              for s in ("train", "calibration", "test")}
    log(f"split: {counts}")

    test = ds.mask("test")
    yt = ds.y[test]
    cos = ds.column("cosine")
    results: dict = {"pairs_file": str(args.pairs), "limit": args.limit, "splits": counts,
                     "semantic_pairs_run": meta, "policies": []}

    # Exact match.
    a_t = [s for s, m in zip(ds.a, test) if m]
    b_t = [s for s, m in zip(ds.b, test) if m]
    exact = np.array([x == z for x, z in zip(a_t, b_t)])
    folded = np.array([fold(x) == fold(z) for x, z in zip(a_t, b_t)])
    results["policies"].append({"policy": "exact match", **evaluate_hits(exact, yt)})
    results["policies"].append({"policy": "exact match, case/space/punctuation folded",
                                **evaluate_hits(folded, yt)})
    # One cosine threshold.
    for t in COSINE_SWEEP:
        results["policies"].append({"policy": f"cosine >= {t:.2f}",
                                    **evaluate_hits(cos[test] >= t - 1e-12, yt)})
    results["policies"].append({"policy": "GPTCache-like (cosine >= 0.60): threshold 0.8 -> "
                                          "squared L2 <= 0.8",
                                **evaluate_hits(cos[test] >= GPTCACHE_COSINE - 1e-12, yt)})

    # Clustering keys over the test split's distinct questions.
    rows = np.unique(np.concatenate([ds.a_row[test], ds.b_row[test]]))
    if len(rows) > args.cluster_max_questions:
        # Keep the questions of the first test pairs, so whole pairs stay measurable.
        order = np.concatenate([np.stack([ds.a_row[test], ds.b_row[test]], 1).ravel()])
        _, first = np.unique(order, return_index=True)
        rows = order[np.sort(first)][:args.cluster_max_questions]
    emb = np.asarray(ds.embeddings[np.sort(rows)], dtype=np.float32)
    row_index = {int(r): k for k, r in enumerate(np.sort(rows))}
    measurable = np.array([int(a) in row_index and int(b) in row_index
                           for a, b in zip(ds.a_row[test], ds.b_row[test])])
    for linkage in ("average", "complete"):
        start = time.monotonic()
        labels, info = cluster_keys(emb, CLUSTER_DISTANCE, linkage)
        info["seconds"] = round(time.monotonic() - start, 1)
        info["pairs_measured"] = int(measurable.sum())
        same = np.array([ok and labels[row_index[int(a)]] == labels[row_index[int(b)]]
                         for ok, a, b in zip(measurable, ds.a_row[test], ds.b_row[test])])
        ev = evaluate_hits(same[measurable], yt[measurable])
        results["policies"].append({"policy": f"clustering keys ({linkage} linkage, cosine "
                                              f"distance {CLUSTER_DISTANCE})", **ev,
                                    "clustering": info})
        log(f"clustering ({linkage}): {info}")

    # The verifier.
    model = train_verifier(ds, features, args.l2)
    scores = verifier_scores(ds, model)
    points = operating_points(ds, scores, args.calibration_z)
    for p in points:
        results["policies"].append({"policy": f"verifier, delta {p['max_wrong_hit_share']:.2f} "
                                              f"(p >= {p['threshold']:.3f})", **p["test"]})
    results["verifier"] = {
        "features": features, "l2": args.l2,
        "weights": {f: float(w) for f, w in zip(features, model["weights"])},
        "bias": model["bias"], "operating_points": points,
    }

    # The curves on the test split, and the 20 % comparison.
    cos_curve = curve(cos[test], yt)
    ver_curve = curve(scores[test], yt)
    cos_at = wrong_share_at(cos_curve, TARGET_HIT_RATE)
    ver_at = wrong_share_at(ver_curve, TARGET_HIT_RATE)
    results["at_20_percent_hit_rate"] = {"cosine_wrong_hit_share": cos_at,
                                         "verifier_wrong_hit_share": ver_at,
                                         "target": "verifier <= 0.06"}
    # At or above: at each measured cosine point (0.80 .. 0.99), the verifier's wrong-hit
    # share at the same hit rate is no higher.
    dominance = []
    for t in COSINE_SWEEP:
        ev = evaluate_hits(cos[test] >= t - 1e-12, yt)
        v = wrong_share_at(ver_curve, ev["hit_rate"])
        p, n = ev["wrong_hit_share"], max(ev["hits"], 1)
        dominance.append({"cosine_threshold": t, "hit_rate": ev["hit_rate"],
                          "cosine_wrong_hit_share": p,
                          "verifier_wrong_hit_share": v,
                          # Binomial standard error of the cosine's share: how far apart two
                          # policies can measure by chance alone.
                          "standard_error": float(np.sqrt(p * (1 - p) / n)),
                          "verifier_at_or_better": bool(v <= p + 1e-12)})
    # And over the whole range of hit rates both curves reach, in 1 % steps.
    grid = np.arange(0.01, min(cos_curve["hit_rate"][-1], ver_curve["hit_rate"][-1]) + 1e-9, 0.01)
    worse = [round(float(h), 2) for h in grid
             if wrong_share_at(ver_curve, h) > wrong_share_at(cos_curve, h) + 1e-12]
    results["curve_check"] = {"at_cosine_sweep_points": dominance,
                              "all_at_or_better_at_sweep_points":
                                  all(d["verifier_at_or_better"] for d in dominance),
                              "hit_rates_where_verifier_worse_1pct_grid": worse}

    results["label_noise_probe"] = label_noise_probe(ds)
    default_point = operating_point_for(points, args.default_delta)
    results["unseen_questions"] = unseen_questions(
        ds, scores, default_point["threshold"] if default_point else None)
    if args.ablation:
        results["ablation_cv"] = ablation(ds, features, args.l2)

    # Report.
    print(f"pairs: {len(ds.y)} ({args.pairs}{', first ' + str(args.limit) if args.limit else ''})"
          f"; splits {counts}")
    print(f"features: tailcut semantic-pairs, {meta.get('wall_s')} s wall, "
          f"{meta.get('cpu_s')} s CPU{' (cached run)' if meta.get('cached') else ''}")
    print()
    print("| policy (test split) | duplicate hit rate | wrong hits / hits | hits |")
    print("|---|---:|---:|---:|")
    for p in results["policies"]:
        print(f"| {p['policy']} | {pct(p['hit_rate'])} | {pct(p['wrong_hit_share'])} | "
              f"{p['hits']} |")
    print()
    print(f"at a {TARGET_HIT_RATE:.0%} duplicate hit rate (interpolated on the test curves): "
          f"cosine threshold {pct(cos_at)} wrong, verifier {pct(ver_at)} wrong")
    print(f"verifier curve at or above the cosine curve (same hit rate, no more wrong hits) at "
          f"every cosine sweep point 0.80-0.99: "
          f"{results['curve_check']['all_at_or_better_at_sweep_points']}")
    for d in dominance:
        if not d["verifier_at_or_better"]:
            print(f"  worse at cosine {d['cosine_threshold']:.2f} (hit rate "
                  f"{pct(d['hit_rate'])}): {pct(d['verifier_wrong_hit_share'])} vs "
                  f"{pct(d['cosine_wrong_hit_share'])}, standard error "
                  f"{100 * d['standard_error']:.1f} pt")
    print(f"  1 % grid of hit rates both curves reach: worse at "
          f"{', '.join(f'{h:.0%}' for h in worse) or 'none'}")
    if default_point:
        print(f"default delta {args.default_delta} (the server's choice: of the points whose "
              f"test wrong-hit share is <= delta, the most hits): the point chosen for delta "
              f"{default_point['max_wrong_hit_share']}, p >= {default_point['threshold']:.4f}, "
              f"test hit rate {pct(default_point['test']['hit_rate'])}, wrong "
              f"{pct(default_point['test']['wrong_hit_share'])}")
        results["default_operating_point"] = {"default_max_wrong_hit_share": args.default_delta,
                                              **default_point}
    print("weights (standardised): " + ", ".join(
        f"{f} {w:+.3f}" for f, w in zip(features, model["weights"])) + f", bias {model['bias']:+.3f}")
    for name, part in results["unseen_questions"].items():
        line = (f"test pairs whose questions were {name} in train/calibration pairs: "
                f"{part['pairs']} ({part['duplicates']} duplicates)")
        if "cosine_wrong_hit_share_at_20" in part:
            line += (f"; at a 20 % hit rate cosine {pct(part['cosine_wrong_hit_share_at_20'])}"
                     f" wrong, verifier {pct(part['verifier_wrong_hit_share_at_20'])}")
        if "default_point" in part:
            line += (f"; default point {pct(part['default_point']['hit_rate'])} hit, "
                     f"{pct(part['default_point']['wrong_hit_share'])} wrong")
        print(line)
    probe = results["label_noise_probe"]
    print(f"label-noise probe: {probe['pairs_same_words_same_order']} pairs with cosine >= "
          f"{probe['min_cosine']}, the same words and the same content-word order; "
          f"{pct(probe['non_duplicate_share_of_those'])} of them labelled non-duplicate "
          f"(all pairs at that cosine: {pct(probe['non_duplicate_share_at_or_above_cosine'])})")
    if args.ablation:
        print()
        print("ablation: 5-fold cross-validation over the train + calibration pairs; wrong hits "
              "/ hits at each duplicate hit rate; worst = largest excess over one cosine "
              "threshold on the 2-60 % grid")
        print()
        print("| model | " + " | ".join(f"at {round(h * 100)} %" for h in ABLATION_HIT_RATES)
              + " | worst vs cosine |")
        print("|---|" + "---:|" * (len(ABLATION_HIT_RATES) + 1))
        for r in results["ablation_cv"]:
            cells = " | ".join(pct(r[f"wrong_hit_share_at_{round(h * 100)}"])
                               for h in ABLATION_HIT_RATES)
            print(f"| {r['model']} | {cells} | {100 * r['worst_excess_over_cosine']:+.1f} pt at "
                  f"{r['worst_at_hit_rate']:.0%} |")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(results, indent=1, default=float, allow_nan=True) + "\n")
    svg = args.svg_out
    if svg is None:
        svg = REPO_ROOT / "bench" / "results" / f"semantic-cache-{_dt.date.today().isoformat()}.svg"
    if str(svg) != "none":
        def reach(c):
            return {"x": c["wrong_hit_share"], "y": c["hit_rate"], "hits": c["hits"]}
        curves = [{"label": "one cosine threshold", "colour": "#d62728", **reach(cos_curve)},
                  {"label": "verifier (all thresholds)", "colour": "#1f77b4", **reach(ver_curve)}]
        marks = [{"label": "verifier operating points", "colour": "#1f77b4",
                  "x": p["test"]["wrong_hit_share"], "y": p["test"]["hit_rate"]} for p in points]
        for k in range(1, len(marks)):
            marks[k]["label"] = ""
        named = {"GPTCache-like (cosine >= 0.60)": "#2ca02c", "clustering keys (average": "#9467bd",
                 "clustering keys (complete": "#8c564b"}
        for p in results["policies"]:
            for prefix, colour in named.items():
                if p["policy"].startswith(prefix):
                    marks.append({"label": prefix.replace("clustering keys (", "clusters, "),
                                  "colour": colour, "shape": "square",
                                  "x": p["wrong_hit_share"], "y": p["hit_rate"]})
        write_svg(svg, curves, marks, f"Semantic cache decision policies, QQP test split "
                                      f"({int(test.sum())} pairs)")
        print(f"plot: {svg}")
    if args.write_weights:
        provenance = {
            "trained_by": "tools/semantic_cache_eval.py",
            "data": args.pairs.name, "pairs": len(ds.y), "limit": args.limit,
            "split": "blake2b(a + U+001F + b) % 100: 0-59 train, 60-79 calibration, 80-99 test",
            "splits": counts, "l2": args.l2, "calibration_z": args.calibration_z,
            "thresholds": "chosen on the calibration split; hit_rate and wrong_hit_share "
                          "measured on the test split",
            "embedding_model": args.model_dir.name + f" ({args.variant or 'fp32'}, mean pooled, "
                                                     "L2-normalised)",
            "date": _dt.date.today().isoformat(),
        }
        doc = weights_document(model, points, args.default_delta, provenance)
        if args.variant:
            doc["embedding_variant"] = args.variant
        # The rule SemanticVerifier::FromJson() applies: some point's measured (test)
        # wrong-hit share must be within the default δ.
        if operating_point_for(points, args.default_delta) is None:
            print(f"--default-delta {args.default_delta}: no operating point measured a "
                  f"wrong-hit share that low on the test split; not writing weights",
                  file=sys.stderr)
            return 1
        args.write_weights.parent.mkdir(parents=True, exist_ok=True)
        args.write_weights.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
        print(f"weights: {args.write_weights}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
