"""Shared helpers for tools/quantize_model.py and tools/evaluate_variants.py.

* The QQP text split (evaluate_variants.py; quantize_model.py calibrates on the python3.11-doc
  corpus, tools/doc_corpus.py, and needs no QQP): every distinct question is put in one of
  100 buckets by the sha256 of its (whitespace-normalised) text, which does not depend on the
  file's order or on a random seed. Buckets 0 and 1 (~2 %, ~2,300 questions) are held out
  (they were the calibration pool before, and stay out so results compare); evaluation only
  uses pairs whose two questions are both in buckets 2..99. The data lives in the shared data
  folder, $TAILCUT_SHARED_DATA (holding qqp/pairs.jsonl.gz), default <repo>/../shared/data.
* Tokenising, onnxruntime sessions and batched embedding the way the server does it
  (HF ``tokenizers``, truncation at 256, right padding to the longest in the batch, the
  graph mean-pools, the caller L2-normalises).

This is a plain module beside the tools (no package): the tools and tests put tools/ on
sys.path and ``import variant_data``.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import export_model  # tools/ is on sys.path wherever this module is imported
from doc_corpus import sha256_texts, text_hash  # noqa: F401  (re-exported; one definition of each)
from export_model import encode_batch as encode, make_session, sha256_file  # noqa: F401  (re-exported)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL_DIR = REPO_ROOT / "models" / "all-MiniLM-L6-v2"
# The shared data folder (holding qqp/): $TAILCUT_SHARED_DATA, else <repo>/../shared/data.
SHARED_DATA_ENV = "TAILCUT_SHARED_DATA"


def shared_data_dir() -> Path:
    env = os.environ.get(SHARED_DATA_ENV)
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


DEFAULT_QQP = shared_data_dir() / "qqp" / "pairs.jsonl.gz"
GOLDEN = REPO_ROOT / "tests" / "data" / "golden_minilm.json"
MAX_LEN = 256

N_BUCKETS = 100
CALIBRATION_BUCKETS = frozenset({0, 1})


def normalise(text: str) -> str:
    return " ".join(str(text).split())


def bucket(text: str) -> int:
    return text_hash(text) % N_BUCKETS


def is_calibration_text(text: str) -> bool:
    return bucket(text) in CALIBRATION_BUCKETS


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    duplicate: int


def load_qqp(path: Path = DEFAULT_QQP) -> list[Pair]:
    """All labelled pairs with non-empty, whitespace-normalised questions, in file order."""
    if not path.exists():
        raise FileNotFoundError(f"QQP data not found at {path} (expected ${SHARED_DATA_ENV}/qqp/pairs.jsonl.gz, "
                                f"default <repo>/../shared/data/qqp/pairs.jsonl.gz)")
    out: list[Pair] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            a, b = normalise(row.get("a", "")), normalise(row.get("b", ""))
            if a and b:
                out.append(Pair(a, b, int(row["duplicate"])))
    return out


def distinct_questions(pairs: list[Pair]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for p in pairs:
        for q in (p.a, p.b):
            if q not in seen:
                seen.add(q)
                out.append(q)
    return out


def calibration_pool(pairs: list[Pair]) -> list[str]:
    """Distinct calibration-bucket questions, in a fixed order (by their hash)."""
    pool = [q for q in distinct_questions(pairs) if is_calibration_text(q)]
    pool.sort(key=lambda q: (text_hash(q), q))
    return pool


def evaluation_pairs(pairs: list[Pair]) -> list[Pair]:
    """Pairs that share no question with the calibration pool (and are not a == b)."""
    return [p for p in pairs if p.a != p.b and not is_calibration_text(p.a) and not is_calibration_text(p.b)]


def golden_texts(path: Path = GOLDEN) -> list[str]:
    return [item["text"] for item in json.loads(path.read_text(encoding="utf-8"))["items"]]


def passages(questions: list[str], tokenizer, lo: int, hi: int, count: int, seed: int) -> list[str]:
    """``count`` texts of lo..hi tokens, each a run of consecutive questions joined by spaces.

    QQP only has short questions; these 'passages' give medium-length real text (the same
    words, a longer context) for the medium-length accuracy check and speed runs.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(questions))
    out: list[str] = []
    i = 0
    while len(out) < count and i < len(order):
        parts: list[str] = []
        n = 2  # [CLS] [SEP]
        while i < len(order) and n < lo:
            q = questions[order[i]]
            i += 1
            parts.append(q)
            n = len(tokenizer.encode(" ".join(parts)).ids)
        if lo <= n <= hi:
            out.append(" ".join(parts))
    return out


# --------------------------------------------------------------------------- running models


def load_tokenizer(path: Path, max_len: int = MAX_LEN, pad: bool = True):
    return export_model.load_tokenizer(path, max_len, pad=pad)


def token_lengths(tok, texts: list[str]) -> np.ndarray:
    """Tokens per text ([CLS]/[SEP] included, after truncation), whatever the padding setting."""
    return np.array([sum(e.attention_mask) for e in tok.encode_batch(texts)], dtype=np.int64)


def embed(session, tok, texts: list[str], batch_size: int = 64, sort_by_length: bool = True) -> np.ndarray:
    """L2-normalised float64 embeddings, rows in the order of ``texts``.

    With sort_by_length the texts are batched in token-length order (little padding, which
    is also what a length-bucketing server does); the result is put back in input order.
    """
    n = len(texts)
    order = np.argsort(token_lengths(tok, texts), kind="stable") if sort_by_length else np.arange(n)
    chunks = []
    for start in range(0, n, batch_size):
        idx = order[start : start + batch_size]
        (emb,) = session.run(["sentence_embedding"], encode(tok, [texts[i] for i in idx]))
        chunks.append((idx, emb))
    dims = chunks[0][1].shape[1] if chunks else 0
    out = np.empty((n, dims), dtype=np.float64)
    for idx, emb in chunks:
        out[idx] = emb
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)
