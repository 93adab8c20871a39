#!/usr/bin/env python3
"""A burst of new chat requests while streams generate (issue 12): the burst's first tokens.

A new chat request's prompt starts with the chat template's system prompt (about 20 of a QQP
question's 36-38 tokens for SmolLM2). tailcut keeps a finished request's tokens in its
sequence, so a new request on that sequence prefills only the rest; in a burst of more
requests than such sequences, the others either prefill the whole prompt again or, since
2026-12-06, get a copy of the prefix a running sequence holds
(`tailcut_generation_prompt_prefix_copies_total`). This measures what that buys, against
another build (`tailcut-base`, --tailcut-base) or llama-server, in one run:

  per run, for each system (a fresh server, the order rotated run by run):
    --background streamed chat requests (distinct QQP questions, --background-tokens tokens,
    greedy) are started, and once each has streamed --background-warm tokens, --burst
    requests (distinct QQP questions, --burst-tokens tokens) are released at once.
  measured: each burst request's time to first token (from its release), the background
  streams' gaps between tokens from the release until the burst's last first token (how
  many over 86 ms, the largest), and, for tailcut, the prefix copies and cached prompt
  tokens the burst caused (from /metrics, before the release and after the burst).

Every run has its own questions, the same for every system. The servers are started with
bench/generation_bench.py's options (same flags: --parallel, --slot-tokens, --threads, ...).
Results: bench/results/prefix-burst-<date>.json and a Markdown table on stdout.

  .venv/bin/python bench/prefix_burst_bench.py --tailcut-base OTHER_BUILD/tailcut \\
      --gguf models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q8_0.gguf --threads 2 \\
      --parallel 32 --slot-tokens 512 --repeats 5
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import experiments  # noqa: E402  (its Prometheus reader)
import generation_bench as gb  # noqa: E402  (its servers, request bodies and percentiles)
import make_workloads  # noqa: E402

METRICS = ("tailcut_generation_prompt_prefix_copies_total",
           "tailcut_generation_cached_prompt_tokens_total")


class Stream:
    """One streamed chat request on its own thread: the times of its token events."""

    def __init__(self, port: int, text: str, max_tokens: int, start: threading.Barrier | None,
                 warm: int = 0):
        self.port, self.text, self.max_tokens, self.start = port, text, max_tokens, start
        self.warm = threading.Event()  # Set once `warm` tokens have streamed (or it ended).
        self.warm_tokens = warm
        self.released = 0.0
        self.events: list[float] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            body = json.dumps(gb.chat_body(self.text, self.max_tokens, True))
            conn.connect()
            if self.start:
                self.start.wait()  # Connected: released with the others.
            self.released = time.monotonic()
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                raise gb.BenchError(f"HTTP {r.status}: {r.read()[:200]!r}")
            for raw in r:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                choices = chunk.get("choices") or [{}]
                if (choices[0].get("delta") or {}).get("content"):
                    self.events.append(time.monotonic())
                    if len(self.events) == self.warm_tokens:
                        self.warm.set()
            conn.close()
        except Exception as e:  # noqa: BLE001  (reported; the run fails below)
            self.error = repr(e)[:200]
            if self.start:
                self.start.abort()  # The others are not released into a broken burst.
        finally:
            self.warm.set()


def metrics(port: int) -> dict[str, float | None]:
    """The counters in METRICS (None where the server has no such metric)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode(errors="replace")
    except OSError:
        text = ""
    return {name: experiments.metric_total(text, name) for name in METRICS}


def burst_run(systems: gb.Systems, name: str, background: list[str], burst: list[str],
              tag: str) -> dict:
    a = systems.a
    with systems.make(name, tag) as server:
        streams = [Stream(server.port, q, a.background_tokens, None, a.background_warm)
                   for q in background]
        for s in streams:
            s.warm.wait()
        if any(s.error for s in streams):
            raise gb.BenchError(f"{name}: a background stream failed: {[s.error for s in streams if s.error]}")
        before = metrics(server.port) if name.startswith("tailcut") else {}
        go = threading.Barrier(len(burst) + 1, timeout=60)
        burst_streams = [Stream(server.port, q, a.burst_tokens, go) for q in burst]
        try:
            go.wait()
        except threading.BrokenBarrierError:
            pass  # A burst request failed before the release: reported below.
        for s in burst_streams:
            s.thread.join()
        after = metrics(server.port) if name.startswith("tailcut") else {}
        for s in streams:
            s.thread.join()
        server.alive()
    failed = [s.error for s in burst_streams + streams if s.error]
    if failed:
        raise gb.BenchError(f"{name}: {len(failed)} requests failed: {failed[:3]}")
    release = min(s.released for s in burst_streams)
    ttft = [1000 * (s.events[0] - s.released) for s in burst_streams if s.events]
    window_end = max(s.events[0] for s in burst_streams if s.events)
    gaps = [1000 * (t1 - t0) for s in streams for t0, t1 in zip(s.events, s.events[1:])
            if t1 > release and t0 < window_end]
    row = {"system": name, "burst": len(burst), "background": len(background),
           "first_tokens": len(ttft), "ttft_ms": sorted(ttft),
           "ttft_p50_ms": gb.pct(ttft, 0.5), "ttft_max_ms": max(ttft, default=None),
           "background_gaps": len(gaps), "background_gaps_over_slo": sum(g > gb.ITL_SLO_MS for g in gaps),
           "background_gap_max_ms": max(gaps, default=None)}
    for key in METRICS:
        b, e = before.get(key), after.get(key)
        row[key.removeprefix("tailcut_generation_")] = None if b is None or e is None else e - b
    print(f"  {name:13} burst TTFT P50 / max {row['ttft_p50_ms'] or 0:.0f} / {row['ttft_max_ms'] or 0:.0f} ms, "
          f"background gaps > 86 ms {row['background_gaps_over_slo']} of {len(gaps)} (max "
          f"{row['background_gap_max_ms'] or 0:.0f} ms), prefix copies "
          f"{row['prompt_prefix_copies_total']}, cached prompt tokens {row['cached_prompt_tokens_total']}",
          flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", default="tailcut-base,tailcut")
    ap.add_argument("--burst", type=int, default=16, help="requests released at once")
    ap.add_argument("--burst-tokens", type=int, default=16, help="max_tokens of a burst request")
    ap.add_argument("--background", type=int, default=8, help="streams generating during the burst")
    ap.add_argument("--background-tokens", type=int, default=192,
                    help="max_tokens of a background stream (it must outlast the burst)")
    ap.add_argument("--background-warm", type=int, default=4,
                    help="tokens each background stream has streamed before the burst")
    ap.add_argument("--repeats", type=int, default=5)
    gb.add_server_options(ap)
    # A burst of 16 beside 8 streams needs 24 sequences; 512 cells hold a question and its answer.
    ap.set_defaults(parallel=32, slot_tokens=512, threads=2)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.background + args.burst > args.parallel:
        sys.exit("prefix_burst_bench: --background + --burst must fit --parallel sequences")
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="tailcut-burst-bench-"))
    systems = gb.Systems(args, tmp)
    try:
        systems.check(names)
    except gb.BenchError as e:
        sys.exit(f"prefix_burst_bench: {e}")
    questions = make_workloads.qqp_questions(args.qqp)
    random.Random(args.seed).shuffle(questions)
    per_run = args.background + args.burst
    print(f"prefix_burst_bench: {tmp} (server logs)", flush=True)
    started = time.monotonic()
    runs: dict[str, list[dict]] = {n: [] for n in names}
    try:
        for k in range(args.repeats):
            qs = questions[k * per_run:(k + 1) * per_run]
            for name in names[k % len(names):] + names[:k % len(names)]:
                runs[name].append(burst_run(systems, name, qs[:args.background], qs[args.background:],
                                            f"burst-{name.replace('/', '+')}-{k}"))
    except gb.BenchError as e:
        sys.exit(f"prefix_burst_bench: {e}")
    summary = []
    for name in names:
        rs = runs[name]
        ttft = [t for r in rs for t in r["ttft_ms"]]
        summary.append({
            "system": name, "runs": len(rs), "ttft_p50_ms": gb.pct(ttft, 0.5),
            "ttft_max_ms_per_run": [r["ttft_max_ms"] for r in rs],
            "ttft_max_ms_median": statistics.median(r["ttft_max_ms"] for r in rs),
            "background_gaps_over_slo_per_run": [r["background_gaps_over_slo"] for r in rs],
            "prefix_copies_per_run": [r["prompt_prefix_copies_total"] for r in rs],
            "cached_prompt_tokens_per_run": [r["cached_prompt_tokens_total"] for r in rs]})
    out = args.out or gb.REPO / "bench" / "results" / f"prefix-burst-{datetime.now():%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": " ".join(sys.argv), "minutes": round((time.monotonic() - started) / 60, 1),
        "cpu": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                     if line.startswith("model name")), ""),
        "options": {k: str(v) for k, v in vars(args).items()}, "summary": summary, "runs": runs,
    }, indent=1) + "\n")
    print("\n| system | burst TTFT P50 ms | burst TTFT max ms, per run (median) | background gaps > 86 ms, "
          "per run | prefix copies, per run |\n|---|---:|---|---|---|")
    for s in summary:
        print(f"| {s['system']} | {gb.fmt_ms(s['ttft_p50_ms'])} | "
              f"{', '.join(f'{v:.0f}' for v in s['ttft_max_ms_per_run'])} ({s['ttft_max_ms_median']:.0f}) | "
              f"{', '.join(map(str, s['background_gaps_over_slo_per_run']))} | "
              f"{', '.join('-' if v is None else f'{v:.0f}' for v in s['prefix_copies_per_run'])} |")
    print(f"\nprefix_burst_bench: wrote {out} ({(time.monotonic() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
