#!/usr/bin/env python3
"""Semantic output cache under load (issue 13), one command: the same stream of real questions at
a fixed rate against three fresh `tailcut serve` processes in one run:

  semantic   --semantic.enabled, the shipped policy (the verifier at its default bound)
  reranker   --semantic.policy reranker: the cross-encoder (models/minilm-l6-qqp-reranker)
             scores the candidates, at its default bound
  exact      --semantic.enabled --semantic.policy exact: only the same text is a hit
  off        no output cache: every request generates

The stream (seeded, the same for all three): QQP pairs from the evaluation's *test* split (the
pairs no verifier weight was trained or calibrated on: tools/semantic_cache_eval.py's
split_bucket >= 80). Each chosen pair's first question `a` is asked; a few seconds later one
follow-up comes, in equal shares:

  repeat      `a` again, word for word (any cache should answer it)
  paraphrase  `b` of a duplicate pair (the same question reworded: a semantic hit is right)
  different   `b` of a non-duplicate pair (topically close, another question: a hit is wrong)

Requests are chat completions, greedy (temperature 0), max_tokens --max-tokens, not streamed,
sent open-loop at a constant --rate (each at its scheduled time on its own connection, so a
slow answer does not delay the next request); latency runs from the scheduled time to the last
byte. Per system: hits by kind (X-Tailcut-Cache) and follow-up type, wrong hits (a hit on a
`different` follow-up; a semantic hit on a first question, which no labelled pair vouches for,
is counted apart as `unlabelled`), client P50/P99 of all requests and of hits, the tokens
generated (the server's tailcut_generation_generated_tokens_total), and the server's own
decision time for semantic hits (tailcut_semantic_cache_lookup_seconds{result="semantic_hit"},
the embedding of the prompt included; P50/P99 as histogram bucket bounds). Afterwards, on an
idle server of its own per --idle-policies (cosine, reranker), what a semantic hit costs, one
request at a time (idle_hits() says how).

  .venv/bin/python bench/semantic_cache_bench.py            # ~8 minutes
  .venv/bin/python bench/semantic_cache_bench.py --duration 20 --rate 2   # harness check

Results: bench/results/semantic-cache-load-<date>.json and a Markdown table on stdout.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import experiments  # noqa: E402  (its Prometheus histogram reader)
from server_process import ServerProcess, free_port  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
DEFAULT_QQP = Path(os.environ.get("TAILCUT_SHARED_DATA", REPO.parent / "shared" / "data")) / "qqp" / "pairs.jsonl.gz"
MODEL = "smollm2-135m-instruct"
SYSTEMS = {
    "semantic": ["--semantic.enabled"],
    "reranker": ["--semantic.enabled", "--semantic.policy", "reranker"],
    "exact": ["--semantic.enabled", "--semantic.policy", "exact"],
    "off": [],
}
FOLLOW_UPS = ("repeat", "paraphrase", "different")


def split_bucket(a: str, b: str) -> int:
    """The evaluation's split (tools/semantic_cache_eval.py): >= 80 is the test split."""
    h = hashlib.blake2b((a + "\x1f" + b).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "little") % 100


def test_pairs(path: Path) -> tuple[list[dict], list[dict]]:
    """Duplicate and non-duplicate pairs of the test split, each question used once."""
    if not path.exists():
        sys.exit(f"semantic_cache_bench: QQP data not found at {path} (--qqp)")
    dup, other, seen = [], [], set()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            a, b = " ".join(p["a"].split()), " ".join(p["b"].split())
            if split_bucket(p["a"], p["b"]) < 80 or a in seen or b in seen or a == b:
                continue
            seen.update((a, b))
            (dup if p["duplicate"] else other).append({"a": a, "b": b})
    return dup, other


def make_stream(args) -> list[dict]:
    """Requests in order, each with the question, its role and its follow-up type."""
    rng = random.Random(args.seed)
    dup, other = test_pairs(args.qqp)
    rng.shuffle(dup)
    rng.shuffle(other)
    n_pairs = int(args.rate * args.duration) // 2
    events = []  # (time in s, order, request)
    for k in range(n_pairs):
        kind = FOLLOW_UPS[k % 3]
        pair = other.pop() if kind == "different" else dup.pop()
        t = k * 2.0 / args.rate
        events.append((t, len(events), {"text": pair["a"], "role": "first", "follow_up": kind}))
        follow = pair["a"] if kind == "repeat" else pair["b"]
        gap = rng.uniform(args.min_gap, args.max_gap)
        events.append((t + gap, len(events), {"text": follow, "role": "follow-up", "follow_up": kind}))
    events.sort(key=lambda e: (e[0], e[1]))
    # A constant rate: the order of the events, spaced 1/rate apart.
    return [dict(req, at=i / args.rate) for i, (_, _, req) in enumerate(events)]


class Server(ServerProcess):
    def __init__(self, name: str, flags: list[str], args, log: Path):
        port = free_port()
        argv = [str(args.tailcut), "serve", "--model-repository", str(args.models),
                "--port", str(port), "--grpc-port", "0", "--host", "127.0.0.1", *flags, *args.server_args]
        super().__init__(name, argv, port, log)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
            return r.read().decode()


def chat(port: int, text: str, max_tokens: int, timeout: float) -> tuple[int, dict, dict]:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": text}],
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), {}


def counter(text: str, name: str, labels: dict | None = None) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            head, _, val = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in (labels or {}).items()):
                total += float(val)
    return total


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2)


def run_system(name: str, stream: list[dict], args, tmp: Path) -> dict:
    with Server(name, SYSTEMS[name], args, tmp / f"{name}.log") as server:
        # One request outside the stream, so the first measured one does not pay for warm-up.
        chat(server.port, "Say hello.", 4, 60)
        before = server.metrics()
        results: list[dict | None] = [None] * len(stream)

        def send(i: int, start: float) -> None:
            req = stream[i]
            scheduled = start + req["at"]
            try:
                status, headers, body = chat(server.port, req["text"], args.max_tokens, args.timeout)
            except Exception as e:  # noqa: BLE001  (a transport error is a result, not a crash)
                status, headers, body = 0, {}, {"error": repr(e)}
            results[i] = {"ms": (time.monotonic() - scheduled) * 1000, "status": status,
                          "cache": headers.get("X-Tailcut-Cache", ""),
                          "similarity": headers.get("X-Tailcut-Cache-Similarity"),
                          "answer": (body.get("choices") or [{}])[0].get("message", {}).get("content")}

        threads = []
        start = time.monotonic() + 0.5
        for i, req in enumerate(stream):
            delay = start + req["at"] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t = threading.Thread(target=send, args=(i, start), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(args.timeout + 5)
        after = server.metrics()

    rows = [dict(req, **(res or {"ms": None, "status": 0, "cache": ""})) for req, res in zip(stream, results)]
    ok = [r for r in rows if r["status"] == 200]
    hits = [r for r in ok if r["cache"]]
    follow = {k: [r for r in ok if r["role"] == "follow-up" and r["follow_up"] == k] for k in FOLLOW_UPS}

    def hit_count(rs, kind=None):
        return sum(1 for r in rs if r["cache"] and (kind is None or r["cache"] == kind))

    generated = (counter(after, "tailcut_generation_generated_tokens_total")
                 - counter(before, "tailcut_generation_generated_tokens_total"))
    lookup = "tailcut_semantic_cache_lookup_seconds"
    out = {
        "requests": len(rows), "answered_200": len(ok),
        "errors": len(rows) - len(ok),
        "hits": len(hits), "hit_rate": round(len(hits) / max(1, len(ok)), 4),
        "hits_by_follow_up": {k: {"of": len(v), "exact": hit_count(v, "exact"),
                                  "semantic": hit_count(v, "semantic")} for k, v in follow.items()},
        "wrong_hits": hit_count(follow["different"]),
        "unlabelled_hits_on_first_questions": hit_count([r for r in ok if r["role"] == "first"]),
        "latency_ms": {"p50": pct([r["ms"] for r in ok], 0.5), "p99": pct([r["ms"] for r in ok], 0.99)},
        "hit_latency_ms": {"p50": pct([r["ms"] for r in hits], 0.5), "p99": pct([r["ms"] for r in hits], 0.99)},
        "miss_latency_ms": {"p50": pct([r["ms"] for r in ok if not r["cache"]], 0.5),
                            "p99": pct([r["ms"] for r in ok if not r["cache"]], 0.99)},
        "generated_tokens": generated,
        "server_semantic_hit_decision_ms": {
            "p50": experiments.hist_quantile(after, lookup, {"result": "semantic_hit"}, 0.5, before),
            "p99": experiments.hist_quantile(after, lookup, {"result": "semantic_hit"}, 0.99, before)},
        "server_exact_hit_decision_ms": {
            "p99": experiments.hist_quantile(after, lookup, {"result": "exact_hit"}, 0.99, before)},
        "server_miss_decision_ms": {
            "p99": experiments.hist_quantile(after, lookup, {"result": "miss"}, 0.99, before)},
        "rows": rows,
    }
    return out


def idle_hits(stream: list[dict], args, tmp: Path, policy: str = "cosine") -> dict:
    """What a semantic hit costs at the server when generation does not compete for the cores:
    a fresh server whose cosine policy accepts anything at cosine >= 0.5 (so that every
    reworded prompt below hits; the verifier's own scoring is ~20 us a candidate), the first
    --idle-hits first questions of the stream asked once (max_tokens 2), then each again as
    "Please tell me: <question>": new tokens, so the prompt is embedded, then searched and
    replayed, with the queries embedded by the variant the shipped verifier was measured on (as
    the default configuration does). One request at a time, --idle-gap apart. Per hit: Server-Timing's queue, which
    for an answer from the cache runs from the request's arrival to the cache's decision
    (embedding included), exact rather than a histogram bucket.

    With policy "reranker" the decision also scores the candidates above its measured cosine
    floor with the cross-encoder, at its loosest operating point (20 % wrong hits) so that
    most rewordings hit; what a lookup costs does not depend on the threshold."""
    flags = ["--semantic.enabled", "--semantic.policy", "cosine", "--semantic.min_cosine_per_mille", "500"]
    if policy == "reranker":
        flags = ["--semantic.enabled", "--semantic.policy", "reranker",
                 "--semantic.max_wrong_hits_per_mille", "200"]
    # The vector space the shipped verifier was measured in, which the default configuration
    # embeds queries with (the cosine policy alone would use the model's default variant).
    variant = json.loads((REPO / "data" / "semantic_verifier.json").read_text()).get("embedding_variant")
    if variant:
        flags += ["--semantic.embedding_variant", variant]
    firsts = [r["text"] for r in stream if r["role"] == "first"][: args.idle_hits]
    with Server(f"idle-{policy}", flags, args, tmp / f"idle-{policy}.log") as server:
        for text in firsts:
            chat(server.port, text, 2, args.timeout)
        ms, decision, kinds = [], [], {}
        for text in firsts:
            time.sleep(args.idle_gap)
            t0 = time.monotonic()
            _, headers, _ = chat(server.port, f"Please tell me: {text}", 2, args.timeout)
            ms.append((time.monotonic() - t0) * 1000)
            kind = headers.get("X-Tailcut-Cache", "miss")
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind != "semantic":
                continue
            for part in headers.get("Server-Timing", "").split(","):
                name, _, dur = part.strip().partition(";dur=")
                if name == "queue" and dur:
                    decision.append(float(dur))
    return {"requests": len(ms), "by_result": kinds,
            "semantic_hit_decision_ms": {"p50": pct(decision, 0.5), "p99": pct(decision, 0.99),
                                         "max": max(decision) if decision else None},
            "client_ms": {"p50": pct(ms, 0.5), "p99": pct(ms, 0.99)}}


def markdown(results: dict) -> str:
    lines = ["| system | hit rate | paraphrases hit | repeats hit | wrong hits (of different) | "
             "unlabelled hits | P50 ms | P99 ms | hit P99 ms | server semantic-hit P99 ms | "
             "tokens generated | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        f = r["hits_by_follow_up"]
        para = f["paraphrase"]
        rep = f["repeat"]
        lines.append(
            f"| {name} | {r['hit_rate'] * 100:.1f} % | {para['exact'] + para['semantic']}/{para['of']} | "
            f"{rep['exact'] + rep['semantic']}/{rep['of']} | {r['wrong_hits']}/{f['different']['of']} | "
            f"{r['unlabelled_hits_on_first_questions']} | {r['latency_ms']['p50']} | {r['latency_ms']['p99']} | "
            f"{r['hit_latency_ms']['p99']} | {r['server_semantic_hit_decision_ms']['p99']} | "
            f"{int(r['generated_tokens'])} | {r['errors']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qqp", type=Path, default=DEFAULT_QQP)
    ap.add_argument("--tailcut", type=Path, default=BUILD / "tailcut")
    ap.add_argument("--models", type=Path, default=REPO / "models",
                    help="model repository holding the generative and the embedding model")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rate", type=float, default=2.0, help="requests per second (constant)")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of arrivals per system")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--min-gap", type=float, default=3.0, help="seconds from a question to its follow-up, at least")
    ap.add_argument("--max-gap", type=float, default=15.0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--idle-gap", type=float, default=0.2,
                    help="seconds between the idle phase's requests")
    ap.add_argument("--idle-hits", type=int, default=50,
                    help="reworded questions sent one at a time to an idle server afterwards (0: none)")
    ap.add_argument("--idle-policies", default="cosine,reranker",
                    help="decisions whose idle hit cost is measured (cosine, reranker)")
    ap.add_argument("--server-args", default="", help="extra flags for every server")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    args.server_args = args.server_args.split()
    systems = [s for s in args.systems.split(",") if s]  # Empty: only the idle phase.
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r} (known: {', '.join(SYSTEMS)})")
    stream = make_stream(args)
    results = {}
    with tempfile.TemporaryDirectory(prefix="semantic-bench-") as tmp:
        for name in systems:
            print(f"semantic_cache_bench: {name}: {len(stream)} requests at {args.rate} req/s", flush=True)
            results[name] = run_system(name, stream, args, Path(tmp))
        idle = {}
        for policy in (p for p in args.idle_policies.split(",") if p and args.idle_hits):
            print(f"semantic_cache_bench: idle semantic hits, {policy} ({args.idle_hits})", flush=True)
            idle[policy] = idle_hits(stream, args, Path(tmp), policy)
    out = args.out or REPO / "bench" / "results" / f"semantic-cache-load-{datetime.now():%Y-%m-%d}.json"
    doc = {"command": " ".join(sys.argv), "date": datetime.now().isoformat(timespec="seconds"),
           "machine": {"cpu": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                                    if ln.startswith("model name")), "?"), "cores": os.cpu_count()},
           "rate": args.rate, "duration_s": args.duration, "max_tokens": args.max_tokens,
           "results": results, "idle_semantic_hits": idle if args.idle_hits else None}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(markdown(results))
    for policy, figures in idle.items():
        print(f"idle semantic hits, {policy}:", json.dumps(figures))
    print(f"semantic_cache_bench: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
