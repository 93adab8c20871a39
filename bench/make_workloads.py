#!/usr/bin/env python3
"""Write the benchmark workloads: request bodies built from real text, one JSON body per line.

Deterministic: the same inputs and --seed give byte-identical files. The files go to an
ignored folder (bench/workloads/ by default) and are never committed: QQP is for research
use only and must not be shipped.

Workloads (token counts are what the model sees: WordPiece tokens of the model's own
tokenizer.json, [CLS] and [SEP] included, after its truncation at 256):

  short   distinct Quora Question Pairs (QQP) questions of 8..16 tokens
  medium  paragraphs of the Python 3.11 documentation (Debian's python3.11-doc HTML) of
          64..128 tokens
  mixed   60 % short, 30 % medium, 10 % long (documentation paragraphs of 129..256 tokens),
          shuffled
  natural distinct QQP questions as they come: no length filter, no repeats (their natural
          length distribution: median 14 tokens, a long tail to the truncation at 256)
  zipf    requests drawn from a few thousand distinct QQP questions (4..64 tokens) with
          Zipf-distributed popularity, P(rank r) ~ 1 / r^s (s = 1.0): repeats for the cache

Each line is an OpenAI embeddings request, {"input": "...", "model": "default"}; the load
generator cycles through the lines. workloads.json beside them records the sources, the
parameters and the token-length statistics printed at the end.

The documentation corpus (tools/doc_corpus.py, shared with the quantization tools):
/usr/share/doc/python3.11/html when the package is installed; otherwise the package is
fetched with `apt-get download python3.11-doc` and unpacked under the output folder (no root
needed, nothing installed system-wide).

Usage: python bench/make_workloads.py [--out bench/workloads] [--qqp PATH] [--docs DIR]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import doc_corpus  # noqa: E402  (tools/doc_corpus.py: the python3.11-doc paragraphs)

DEFAULT_QQP = REPO.parent / "shared" / "data" / "qqp" / "pairs.jsonl.gz"
DEFAULT_TOKENIZER = REPO / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"

SHORT_RANGE = (8, 16)
MEDIUM_RANGE = (64, 128)
LONG_RANGE = (129, 256)
ZIPF_RANGE = (4, 64)
N_SHORT = 4000
N_MEDIUM = 2000
N_LONG = 600
N_MIXED = 4000
MIX = {"short": 0.6, "medium": 0.3, "long": 0.1}
ZIPF_DISTINCT = 3000
ZIPF_REQUESTS = 30000
ZIPF_S = 1.0
N_NATURAL = 40000  # distinct: at 200 req/s, 200 s of traffic before a text comes round again


# --- sources ---------------------------------------------------------------------------------
def qqp_questions(path: Path) -> list[str]:
    if not path.exists():
        sys.exit(f"make_workloads: QQP data not found at {path} (expected <repo>/../shared/data/qqp/pairs.jsonl.gz)")
    seen: set[str] = set()
    out: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            for key in ("a", "b"):
                q = " ".join(str(row.get(key, "")).split())
                if q and q not in seen:
                    seen.add(q)
                    out.append(q)
    return out


# --- token lengths ---------------------------------------------------------------------------
def token_lengths(tokenizer, texts: list[str]) -> list[int]:
    out: list[int] = []
    for i in range(0, len(texts), 2048):
        out.extend(len(e.ids) for e in tokenizer.encode_batch(texts[i : i + 2048]))
    return out


def select(rng: random.Random, texts: list[str], lengths: list[int], lo: int, hi: int, n: int):
    pool = [(t, n_tok) for t, n_tok in zip(texts, lengths) if lo <= n_tok <= hi]
    if len(pool) < n:
        sys.exit(f"make_workloads: only {len(pool)} texts of {lo}..{hi} tokens, {n} needed")
    return rng.sample(pool, n)


def stats(lengths: list[int]) -> dict:
    v = sorted(lengths)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]  # noqa: E731
    return {
        "requests": len(v),
        "tokens_min": v[0],
        "tokens_p10": q(0.10),
        "tokens_p50": q(0.50),
        "tokens_p90": q(0.90),
        "tokens_max": v[-1],
        "tokens_mean": round(sum(v) / len(v), 1),
    }


def write(path: Path, items: list[tuple[str, int]]) -> str:
    body = "".join(json.dumps({"input": t, "model": "default"}, ensure_ascii=False) + "\n" for t, _ in items)
    path.write_text(body, encoding="utf-8")
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def zipf_draws(rng: random.Random, distinct: list[tuple[str, int]], n: int, s: float):
    weights = [1.0 / (r**s) for r in range(1, len(distinct) + 1)]
    return rng.choices(distinct, weights=weights, k=n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "workloads")
    ap.add_argument("--qqp", type=Path, default=DEFAULT_QQP)
    ap.add_argument("--docs", type=Path, default=None, help="python3.11-doc html folder (default: find or fetch it)")
    ap.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    ap.add_argument("--seed", type=int, default=20240605)
    ap.add_argument("--zipf-s", type=float, default=ZIPF_S)
    ap.add_argument("--zipf-distinct", type=int, default=ZIPF_DISTINCT)
    args = ap.parse_args(argv)

    from tokenizers import Tokenizer  # noqa: PLC0415

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer.from_file(str(args.tokenizer))
    if args.docs is not None:
        docs_dir, docs_origin = args.docs, f"{args.docs} (given)"
    else:
        docs_dir, docs_origin = doc_corpus.fetch_docs(args.out)

    questions = qqp_questions(args.qqp)
    q_len = token_lengths(tokenizer, questions)
    paragraphs = doc_corpus.paragraphs(docs_dir)
    p_len = token_lengths(tokenizer, paragraphs)

    rng = random.Random(args.seed)
    short = select(rng, questions, q_len, *SHORT_RANGE, N_SHORT)
    medium = select(rng, paragraphs, p_len, *MEDIUM_RANGE, N_MEDIUM)
    long_ = select(rng, paragraphs, p_len, *LONG_RANGE, N_LONG)
    pools = {"short": short, "medium": medium, "long": long_}
    mixed: list[tuple[str, int]] = []
    for name, share in MIX.items():
        mixed.extend(rng.choices(pools[name], k=round(share * N_MIXED)))
    rng.shuffle(mixed)
    zipf_pool = select(rng, questions, q_len, *ZIPF_RANGE, args.zipf_distinct)
    zipf = zipf_draws(rng, zipf_pool, ZIPF_REQUESTS, args.zipf_s)
    # Drawn last, so that the other workloads stay byte-identical to earlier runs'.
    natural = rng.sample(list(zip(questions, q_len)), N_NATURAL)

    workloads = {"short": short, "medium": medium, "mixed": mixed, "natural": natural, "zipf": zipf}
    meta = {
        "generated_by": "bench/make_workloads.py",
        "seed": args.seed,
        "tokenizer": str(args.tokenizer.relative_to(REPO) if args.tokenizer.is_relative_to(REPO) else args.tokenizer),
        "sources": {
            "qqp": {"path": str(args.qqp), "distinct_questions": len(questions)},
            "docs": {"origin": docs_origin, "prose_paragraphs": len(paragraphs)},
        },
        "workloads": {},
    }
    descriptions = {
        "short": f"QQP questions, {SHORT_RANGE[0]}..{SHORT_RANGE[1]} tokens",
        "medium": f"Python docs paragraphs, {MEDIUM_RANGE[0]}..{MEDIUM_RANGE[1]} tokens",
        "mixed": "60 % short, 30 % medium, 10 % long (docs paragraphs, 129..256 tokens)",
        "natural": f"{N_NATURAL} distinct QQP questions, any length (no filter, no repeats)",
        "zipf": f"{args.zipf_distinct} distinct QQP questions ({ZIPF_RANGE[0]}..{ZIPF_RANGE[1]} tokens), Zipf s={args.zipf_s}",
    }
    print(f"{'workload':8} {'requests':>8} {'distinct':>8} {'min':>4} {'p10':>4} {'p50':>4} {'p90':>4} {'max':>4} {'mean':>6}  source")
    for name, items in workloads.items():
        sha = write(args.out / f"{name}.jsonl", items)
        st = stats([n for _, n in items])
        st["distinct_texts"] = len({t for t, _ in items})
        st["sha256_16"] = sha
        st["description"] = descriptions[name]
        hist: dict[int, int] = {}
        for _, n_tok in items:
            hist[n_tok] = hist.get(n_tok, 0) + 1
        st["length_histogram"] = {str(k): hist[k] for k in sorted(hist)}  # tokens -> requests
        if name == "zipf":
            counts: dict[str, int] = {}
            for t, _ in items:
                counts[t] = counts.get(t, 0) + 1
            top = sorted(counts.values(), reverse=True)
            st["zipf_s"] = args.zipf_s
            st["top1_share"] = round(top[0] / len(items), 4)
            st["top100_share"] = round(sum(top[:100]) / len(items), 4)
            # Share of requests whose text was seen before in the file: an unbounded cache's hit rate.
            st["repeat_share"] = round(1 - len(counts) / len(items), 4)
        meta["workloads"][name] = st
        print(
            f"{name:8} {st['requests']:8} {st['distinct_texts']:8} {st['tokens_min']:4} {st['tokens_p10']:4} "
            f"{st['tokens_p50']:4} {st['tokens_p90']:4} {st['tokens_max']:4} {st['tokens_mean']:6}  {descriptions[name]}"
        )
    z = meta["workloads"]["zipf"]
    print(f"zipf: top-1 text {z['top1_share']:.1%} of requests, top-100 {z['top100_share']:.1%}, repeats {z['repeat_share']:.1%}")
    long_stats = stats([n for _, n in long_])
    meta["classes"] = {
        "short": stats([n for _, n in short]),
        "medium": stats([n for _, n in medium]),
        "long": long_stats,
        "mix": MIX,
    }
    (args.out / "workloads.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"make_workloads: wrote {', '.join(f'{n}.jsonl' for n in workloads)} and workloads.json to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
