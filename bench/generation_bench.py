#!/usr/bin/env python3
"""Generation benchmark (issue 12), one command: tailcut against llama-server and the Python design.

Open-loop Poisson arrivals of streamed chat requests whose prompts are real questions (QQP,
natural length, each question once), `max_tokens` 64, greedy, driven by tailcut-loadgen
--stream, against four servers on the same GGUF file and the same compute threads:

  tailcut           `tailcut serve`, a repository holding only the model: --parallel sequences
                    (model.yaml max_sequences) in one continuous batch, --parallel x
                    --slot-tokens KV cells, --threads compute threads, prefill chunks of
                    --prefill-chunk tokens
  tailcut-serial    the same with one sequence at a time (max_sequences 1, --slot-tokens cells:
                    tailcut refuses a sequence beyond the model's trained 8,192): what one
                    engine per request gives, the "shared engine >= 3x" target's denominator
  llama-server      llama.cpp's server from the same source tree (bench/build_llama_server.sh):
                    continuous batching, -np --parallel slots, -c the same total context (so the
                    same context per sequence: it splits -c among its slots), the same threads;
                    its KV shifting reuse (--cache-reuse) and host-memory prompt cache
                    (--cache-ram) off, as tailcut has neither; both keep a finished slot's
                    prompt prefix for the next request (llama-server's cache_prompt, tailcut's
                    prefix reuse)
  llama-cpp-python  the source's Python design: llama-cpp-python 0.3.36's own server
                    (`python -m llama_cpp.server`, FastAPI/uvicorn/sse-starlette over one shared
                    `Llama`, requests served one at a time behind its lock) on the same sdist's
                    llama.cpp built as shared libraries (bench/build_llama_cpp_python.sh);
                    n_ctx = --slot-tokens (its one sequence), --interrupt_requests False (by
                    default each new request would cut the stream in progress short),
                    --logits_all False and --flash_attn True (what the other two run: llama.cpp's
                    default flash-attention "auto" is on for the CPU backend, and neither
                    computes the logits of every prompt token)
  tailcut:K=V/...   tailcut with these model.yaml keys set over the options above (e.g.
                    tailcut:thread_poll_level=50/min_prefill_tokens_per_step=4), so that
                    settings are compared in one run; tailcut-chunkN and tailcut-nochunk
                    (below) may be swept too
  tailcut-base      tailcut's options run by the --tailcut-base binary (another build, e.g.
                    the commit before a change), so that two builds are compared in one run

Every point starts a fresh server (no KV, cache or queue state carries over) and runs
--warmup + --duration seconds of arrivals; all systems at one rate see the same prompts (the
same workload lines), and the systems alternate rate by rate, so a machine that slows down
during the run affects all alike. Per point: TTFT P50/P99, inter-token P50/P99 (the gaps
between token events of one stream), token events/s, requests/s, errors by kind (HTTP status
or transport error, and requests still unanswered at the end), the server process's CPU
seconds per answered request and per second (from /proc/PID/stat over the measured window,
all its threads) and its peak RSS (VmHWM), and whether it met the SLO: TTFT P99 <= 500 ms and
inter-token P99 <= 86 ms with no error. A request still streaming at --timeout counts as a
transport timeout and its tokens are not counted (the load generator keeps only finished
streams), so an overloaded point's tokens/s is a slight underestimate. A request whose reused
keep-alive connection the server had closed is resent once on a new one (llama-server closes
after every streamed response): `stale_connection_retries`, not an error. Each point also
counts its inter-token gaps over 86 ms (`slow_gaps`: how many spanned another request's
arrival, the most streams open during one) and, for tailcut, the same count by the server's
own histogram (`server_inter_token`): equal counts mean slow steps, more on the client's side
a slow way out. With --repeats K each point runs K times (fresh prompts, the same for every
system, the systems' order rotated) and is reported as the median, with the P99s' range: at
these rates a 30 s point holds 4-32 requests, and its P99 is close to its worst request; so
the point also has the P99s over all its runs' requests together (`pooled`: pooled_tail),
and for runs of two minutes or more the same split at 60 s after the first arrival
(`first_minute`, `after_first_minute`).

Phases:
  sweep   every system at each of --rates
  search  per system, the highest rate meeting the SLO: the sweep's last passing and first
          failing rates bracket it (if every rate passed: doubling, at most --search-max-rate;
          if none did: from 0), then --search-steps bisections, each a fresh point
  mix     10 % of the prompts long (>= --long-tokens, default 1,000 tokens: QQP questions
          concatenated into one request, each long prompt distinct, each counted by tailcut
          before the run: the run fails if one is short), at each of --mix-rates, for
          --mix-systems: tailcut-chunkN (prefill_chunk_tokens N), tailcut-nochunk (the whole
          prompt in one step: prefill_chunk_tokens = batch_tokens = --slot-tokens) and
          llama-server; the short streams' TTFT and inter-token percentiles reported apart
          from the long ones'. --slot-tokens (1,280) holds a long prompt, its template and
          64 tokens in every system.
  saturation  with --saturation-clients N > 0, for --saturation-systems (default tailcut and
          tailcut-serial), --repeats times each: N closed-loop clients, each sending its next
          non-streamed request when the last is answered, --saturation-seconds measured;
          answered req/s and generated tokens/s. tailcut / tailcut-serial is the "shared
          engine >= 3x one sequence at a time" target (the source's 18 -> 57 req/s).

A system that cannot start, does not answer a first chat request, or dies during a point
stops the run with its log (no silent skip).

The full benchmark (the issue's comparison; on a quiet machine, nothing else running): about
24 minutes, at most ~28. Each point is 35-55 s (server start and first request, 3 s warm-up,
30 s measured, then up to --timeout 20 s for the last answers when the server is behind);
16 sweep points, 8 search points (12 where a system meets the SLO at 2 req/s and the search
doubles once, to --search-max-rate 4), 6 mix points, and ~30 s counting the long prompts:

  bench/build_llama_server.sh && bench/build_llama_cpp_python.sh    # once (~25 + ~10 min)
  .venv-bench/bin/python bench/generation_bench.py

which is --systems tailcut,tailcut-serial,llama-server,llama-cpp-python --rates 0.25,0.5,1,2
--duration 30 --warmup 3 --timeout 20 --search-steps 2 --search-max-rate 4 --mix-rates 0.5,1
--mix-systems tailcut-chunk64,tailcut-nochunk,llama-server --parallel 8 --slot-tokens 1280
--threads 1 --prefill-chunk 256. A quick check of the harness end to end (3-4 minutes; numbers meaningless):

  .venv-bench/bin/python bench/generation_bench.py --rates 0.5 --duration 6 --warmup 1 \\
      --timeout 12 --search-steps 1 --search-max-rate 1 --mix-rates 0.5

Results: bench/results/generation-<date>.json (every point's summary and the load generator's
report) and a Markdown table on stdout. Binaries: --tailcut, --loadgen (default $TAILCUT_BUILD_DIR
or <repo>/build), --llama-server, --llama-cpp-python (the folder build_llama_cpp_python.sh made).
"""
from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import experiments  # noqa: E402  (its Prometheus histogram reader)
import make_workloads  # noqa: E402  (the QQP reader the embedding workloads use)

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
DEFAULT_QQP = Path(os.environ.get("TAILCUT_SHARED_DATA", REPO.parent / "shared" / "data")) / "qqp" / "pairs.jsonl.gz"
DEFAULT_GGUF = REPO / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"
TTFT_SLO_MS = 500.0
ITL_SLO_MS = 86.0
SYSTEMS = ("tailcut", "tailcut-serial", "llama-server", "llama-cpp-python")
TEMPLATE_MARGIN = 48  # Chat-template tokens around a prompt (llama-server adds a system prompt).


class BenchError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chat_body(text: str, max_tokens: int, stream: bool) -> dict:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            # llama-cpp-python's server defaults to 1.1 (a non-OpenAI extension); the others
            # apply none and ignore the field or take 1.0 as none: greedy means the same everywhere.
            "repeat_penalty": 1.0}


def write_workload(path: Path, texts: list[str], max_tokens: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for q in texts:
            f.write(json.dumps(chat_body(q, max_tokens, True)) + "\n")


def post_chat(port: int, text: str, max_tokens: int, timeout: float = 300) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(chat_body(text, max_tokens, False)).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise BenchError(f"POST /v1/chat/completions: {e.code} {e.read()[:500]!r}") from e


class Proc:
    """A server process on a free loopback port: ready when `ready_path` answers 200 and a
    first chat request gets an answer with text."""

    def __init__(self, name: str, argv_for_port, ready_path: str, log: Path, env: dict | None = None,
                 fatal: str | None = None):
        self.name, self.port, self.log = name, free_port(), log
        self.argv = argv_for_port(self.port)
        self.ready_path, self.env = ready_path, env
        self.fatal = fatal  # A log line saying it will never be ready though it keeps running.
        self.proc: subprocess.Popen | None = None

    def fail(self, why: str) -> BenchError:
        return BenchError(f"{self.name}: {why}\n  command: {' '.join(self.argv)}\n  log {self.log}:\n"
                          + self.log.read_text(errors="replace")[-3000:])

    def __enter__(self):
        self.log_file = open(self.log, "w")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=self.env)
        except OSError as e:
            raise self.fail(f"cannot start: {e}") from e
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise self.fail(f"exited with status {self.proc.returncode} while starting")
            if self.fatal and self.fatal in self.log.read_text(errors="replace"):
                raise self.fail(f"'{self.fatal}' in its log")
            if time.monotonic() - t0 > 120:
                raise self.fail("not ready after 120 s")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{self.ready_path}", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        try:
            answer = post_chat(self.port, "Say hello.", 4)
            text = answer["choices"][0]["message"]["content"]
        except Exception as e:  # noqa: BLE001  (any failure of the first request stops the run)
            raise self.fail(f"the first chat request failed: {e!r}") from e
        if not text:
            raise self.fail(f"the first chat request got no text: {answer}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.log_file.close()

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise self.fail(f"died during the run (status {self.proc.returncode})")

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return 0.0


class Systems:
    """Makes each system's server (a Proc) from the command line's options."""

    def __init__(self, args, tmp: Path):
        self.a, self.tmp = args, tmp
        self.context = args.parallel * args.slot_tokens

    def check(self, names: list[str]) -> None:
        """Fails before anything runs when a system's program is missing."""
        need = {"loadgen": self.a.loadgen}
        for n in names:
            if n == "tailcut-base":
                need["tailcut-base (--tailcut-base)"] = self.a.tailcut_base or "(not given)"
            elif n in ("tailcut", "tailcut-serial", "tailcut-nochunk") or n.startswith("tailcut:") or \
                    (n.startswith("tailcut-chunk") and n.removeprefix("tailcut-chunk").isdigit()):
                if n.startswith("tailcut:"):
                    model_yaml_overrides(n)  # A malformed name fails here, before any run.
                need["tailcut"] = self.a.tailcut
            elif n == "llama-server":
                need["llama-server (bench/build_llama_server.sh)"] = self.a.llama_server
            elif n == "llama-cpp-python":
                need["llama-cpp-python (bench/build_llama_cpp_python.sh)"] = \
                    self.a.llama_cpp_python / "llama_cpp" / "lib" / "libllama.so"
            else:
                raise BenchError(f"unknown system {n}: choose from {', '.join(SYSTEMS)}, "
                                 "tailcut-nochunk, tailcut-chunkN, tailcut:key=value/...")
        missing = [f"{k}: {p}" for k, p in need.items() if not Path(p).exists()]
        if not self.a.gguf.exists():
            missing.append(f"model: {self.a.gguf}")
        if missing:
            raise BenchError("missing:\n  " + "\n  ".join(missing))

    def make(self, name: str, tag: str) -> Proc:
        """`name`'s server; its log is <tmp>/<tag>.log."""
        a = self.a
        if name == "tailcut":
            return self.tailcut(name, tag, a.parallel, a.prefill_chunk)
        if name == "tailcut-base":
            return self.tailcut(name, tag, a.parallel, a.prefill_chunk, binary=a.tailcut_base)
        if name == "tailcut-serial":  # One sequence's context (it may not exceed the trained one).
            return self.tailcut(name, tag, 1, a.prefill_chunk, context=a.slot_tokens)
        if name == "tailcut-nochunk":
            return self.tailcut(name, tag, a.parallel, a.slot_tokens, batch_tokens=a.slot_tokens,
                                bounded=False)
        if name.startswith("tailcut-chunk"):
            return self.tailcut(name, tag, a.parallel, int(name.removeprefix("tailcut-chunk")))
        if name.startswith("tailcut:"):
            return self.tailcut(name, tag, a.parallel, a.prefill_chunk,
                                overrides=model_yaml_overrides(name))
        if name == "llama-server":
            return Proc(name, lambda port: [
                str(a.llama_server), "-m", str(a.gguf), "--host", "127.0.0.1", "--port", str(port),
                "-t", str(a.threads), "-tb", str(a.threads), "-np", str(a.parallel),
                "-c", str(self.context), "--cont-batching", "--no-webui",
                "--cache-reuse", "0", "--cache-ram", "0", "--alias", MODEL_NAME],
                "/health", self.tmp / f"{tag}.log")
        if name == "llama-cpp-python":
            lib = a.llama_cpp_python / "llama_cpp" / "lib"
            env = dict(os.environ, PYTHONPATH=str(a.llama_cpp_python), LLAMA_CPP_LIB_PATH=str(lib))
            return Proc(name, lambda port: [
                sys.executable, "-m", "llama_cpp.server", "--model", str(a.gguf),
                "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
                "--n_threads", str(a.threads), "--n_threads_batch", str(a.threads),
                "--n_ctx", str(a.slot_tokens), "--interrupt_requests", "False",
                "--logits_all", "False", "--flash_attn", "True", "--verbose", "False"],
                "/v1/models", self.tmp / f"{tag}.log", env)
        raise BenchError(f"unknown system {name}")

    def tailcut(self, name: str, tag: str, sequences: int, chunk: int, batch_tokens: int = 512,
                context: int | None = None, bounded: bool = True,
                overrides: dict[str, str] | None = None, binary: Path | None = None) -> Proc:
        a = self.a
        folder = self.tmp / f"repo-{name.replace('/', '+')}" / MODEL_NAME
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / a.gguf.name
        if not link.exists():
            link.symlink_to(a.gguf.resolve())
        keys = {
            "name": MODEL_NAME, "kind": "generative", "file": a.gguf.name,
            "context_tokens": context or self.context, "max_sequences": sequences,
            "batch_tokens": batch_tokens, "prefill_chunk_tokens": chunk,
            # Unbounded: no step time bound at all (neither a fixed one nor the SLO's, which
            # also turns the slow-gap budget off): whole prompts in one step.
            "max_step_millis_while_generating": a.step_millis if bounded else 0,
            **({} if bounded else {"inter_token_slo_millis": 0}),
            "min_prefill_tokens_per_step": a.min_prefill, "kv_cache": a.kv_cache,
            "decode_threads": a.threads, "batch_threads": a.threads, "thread_poll_level": a.poll,
            # Requests queue here rather than being refused: the load generator measures the wait.
            "max_waiting_requests": 100000, "max_queue_delay_millis": 0,
        }
        keys.update(overrides or {})
        (folder / "model.yaml").write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))
        return Proc(name, lambda port: [str(binary or a.tailcut), "serve", "--host", "127.0.0.1",
                                        "--port", str(port), "--grpc-port", "0",
                                        "--model-repository", str(folder.parent)],
                    "/v2/health/ready", self.tmp / f"{tag}.log", fatal="failed to load")


def model_yaml_overrides(name: str) -> dict[str, str]:
    """`tailcut:key=value/key=value` -> the model.yaml keys it sets (not a comma: --systems
    is a comma-separated list)."""
    out = {}
    for item in name.removeprefix("tailcut:").split("/"):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise BenchError(f"{name}: expected tailcut:key=value[/key=value...]")
        out[key.strip()] = value.strip()
    return out


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile, as tailcut-loadgen computes it."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def answered(samples: list[dict]) -> tuple[list[dict], list[float], list[float]]:
    """The answered samples, their first-token times (those that got a token) and all their
    inter-token gaps."""
    ok = [s for s in samples if s["status"] == 200]
    return ok, [s["ttft_ms"] for s in ok if s["ttft_ms"] >= 0], [g for s in ok for g in s["gaps_ms"]]


def stream_stats(samples: list[dict]) -> dict:
    ok, ttft, gaps = answered(samples)
    return {"n": len(samples), "ok": len(ok), "ttft_p50_ms": pct(ttft, 0.5), "ttft_p99_ms": pct(ttft, 0.99),
            "itl_p50_ms": pct(gaps, 0.5), "itl_p99_ms": pct(gaps, 0.99)}


def meets_slo(row: dict) -> bool:
    """TTFT P99 <= 500 ms and inter-token P99 <= 86 ms, with no error."""
    return bool(not row["errors"] and row["ttft_p99_ms"] is not None
                and row["ttft_p99_ms"] <= TTFT_SLO_MS and (row["itl_p99_ms"] or 0) <= ITL_SLO_MS)


def server_inter_token(port: int) -> dict | None:
    """tailcut's own count of inter-token gaps (tailcut_generation_inter_token_seconds, whole
    run including the warm-up): all, and those over the bucket bound at or above the SLO. Set
    against the load generator's, it says whether a slow gap was a slow step or a slow way
    to the client."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except (OSError, urllib.error.URLError):
        return None
    buckets = experiments.hist_buckets(text, "tailcut_generation_inter_token_seconds", {})
    if not buckets:
        return None
    total = buckets[math.inf]
    bound = min((b for b in buckets if b >= ITL_SLO_MS / 1000), default=math.inf)
    return {"gaps": total, "over_bucket_bound_s": bound, "over": total - buckets[bound]}


def slow_gaps(samples: list[dict]) -> dict:
    """What the inter-token gaps over the SLO coincide with: how many there are, how many
    spanned another request's arrival (its prompt then shares the steps), and the largest
    number of streams open during one. The times come from the load generator's samples
    (scheduled time, TTFT, then the gaps)."""
    ok = [s for s in samples if s["status"] == 200 and s["ttft_ms"] >= 0]
    arrivals = sorted(s["scheduled_s"] * 1000 for s in samples)
    spans = [(s["scheduled_s"] * 1000, s["scheduled_s"] * 1000 + s["ttft_ms"] + sum(s["gaps_ms"]))
             for s in ok]
    n = with_arrival = most_open = 0
    for s in ok:
        t = s["scheduled_s"] * 1000 + s["ttft_ms"]
        for gap in s["gaps_ms"]:
            if gap > ITL_SLO_MS:
                n += 1
                first_after = bisect.bisect_right(arrivals, t)
                if first_after < len(arrivals) and arrivals[first_after] < t + gap:
                    with_arrival += 1
                most_open = max(most_open, sum(1 for b, e in spans if b < t + gap and e > t))
            t += gap
    return {"over_slo": n, "spanning_an_arrival": with_arrival, "most_streams_open": most_open}


def run_point(systems: Systems, name: str, workload: Path, rate: float, start: int, tag: str,
              long_lines: set[int] | None = None) -> dict:
    """One fresh server of `name`, one load-generator run; the point's summary."""
    a = systems.a
    tag = tag.replace("/", "+")  # A file name, whatever the system's name holds.
    out, samples_path = systems.tmp / f"{tag}.json", systems.tmp / f"{tag}.samples.jsonl"
    with systems.make(name, tag) as server:
        argv = [str(a.loadgen), "--port", str(server.port), "--path", "/v1/chat/completions",
                "--workload", str(workload), "--rate", str(rate), "--duration", str(a.duration),
                "--warmup", str(a.warmup), "--poisson", "--stream", "--connections", "512",
                "--timeout", str(a.timeout), "--start", str(start), "--seed", str(a.seed),
                "--out", str(out), "--samples", str(samples_path)]
        gen = subprocess.Popen(argv)
        try:
            # CPU over the measured window: from the end of the warm-up to the end of the run.
            try:
                gen.wait(a.warmup)
            except subprocess.TimeoutExpired:
                pass
            cpu0, t0 = server.cpu_s(), time.monotonic()
            if gen.wait() != 0:
                raise BenchError(f"tailcut-loadgen failed against {name}: {' '.join(argv)}")
            cpu, seconds = server.cpu_s() - cpu0, time.monotonic() - t0
        finally:
            if gen.poll() is None:
                gen.kill()
                gen.wait()
        server.alive()
        rss = server.peak_rss_mb()
        server_gaps = server_inter_token(server.port) if name.startswith("tailcut") else None
    rep = json.loads(out.read_text())
    samples = [json.loads(line) for line in samples_path.read_text().splitlines() if line]
    st = rep.get("streaming") or {}
    ttft, itl = st.get("ttft_ms") or {}, st.get("inter_token_ms") or {}
    errors = {k: v for k, v in rep["status_counts"].items() if k not in ("200", "transport_error")}
    errors.update({f"transport:{k}": v for k, v in rep.get("transport_error_kinds", {}).items()})
    if rep["unfinished"]:
        errors["unfinished"] = rep["unfinished"]
    if st.get("answers_without_tokens"):
        errors["answers_without_tokens"] = st["answers_without_tokens"]
    row = {
        "system": name, "offered_rate": rate, "sent": rep["sent"], "ok": rep["ok"], "errors": errors,
        "ttft_p50_ms": ttft.get("p50"), "ttft_p99_ms": ttft.get("p99"),
        "itl_p50_ms": itl.get("p50"), "itl_p99_ms": itl.get("p99"),
        "tokens_per_s": st.get("token_events_per_s"), "requests_per_s": rep["achieved_rate"],
        "cpu_s_per_request": cpu / rep["ok"] if rep["ok"] else None,
        "cpu_per_s": cpu / seconds if seconds > 0 else None, "peak_rss_mb": rss,
        "stale_connection_retries": rep.get("stale_connection_retries", 0),
        "send_lag_p99_ms": (rep.get("send_lag_ms") or {}).get("p99"),
    }
    row["meets_slo"] = meets_slo(row)
    # For a P99 over all the repeats (merge_repeats, which drops it; so do the other callers).
    row["_samples"] = samples
    row["slow_gaps"] = slow_gaps(samples)
    if server_gaps:
        row["server_inter_token"] = server_gaps
    if long_lines is not None:
        row["short"] = stream_stats([s for s in samples if s["line"] not in long_lines])
        row["long"] = stream_stats([s for s in samples if s["line"] in long_lines])
    row["loadgen_report"] = rep
    print(f"  {name:17} {rate:6.3f} req/s: TTFT P50/P99 {row['ttft_p50_ms'] or 0:7.0f} / "
          f"{row['ttft_p99_ms'] or 0:7.0f} ms, ITL P50/P99 {row['itl_p50_ms'] or 0:5.1f} / "
          f"{row['itl_p99_ms'] or 0:6.1f} ms, {row['tokens_per_s'] or 0:6.1f} tok/s, ok {row['ok']}, "
          f"errors {errors or 0}, CPU {row['cpu_s_per_request'] or 0:.2f} s/req, RSS {rss:.0f} MB"
          + (f", short ITL P99 {row['short']['itl_p99_ms'] or 0:.1f} ms" if long_lines is not None else "")
          + f", gaps > {ITL_SLO_MS:.0f} ms: {row['slow_gaps']['over_slo']} "
            f"({row['slow_gaps']['spanning_an_arrival']} spanning an arrival)"
          + f", SLO {'met' if row['meets_slo'] else 'missed'}", flush=True)
    return row


FIRST_MINUTE_S = 60.0  # pooled_tail's split of long runs

MEDIAN_FIELDS = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tokens_per_s",
                 "requests_per_s", "cpu_s_per_request", "cpu_per_s", "peak_rss_mb", "send_lag_p99_ms")


def pooled_tail(runs_samples: list[list[dict]]) -> dict:
    """TTFT and inter-token P99 over the answered requests of all the runs together. A run of
    a minute at 0.75 req/s has ~45 requests, so its P99 is its slowest first token, and the
    median of three such P99s moved by 1.5x between identical runs (2026-12-06); over the runs
    pooled it is the ~2nd slowest of 135. Kept beside the medians, not instead: the spread
    between runs is what the repeats measure. The samples themselves stay out of the JSON."""
    _, ttft, gaps = answered([s for samples in runs_samples for s in samples])
    pooled = {"requests": len(ttft), "ttft_p99_ms": pct(ttft, 0.99), "itl_p99_ms": pct(gaps, 0.99),
              "gaps": len(gaps), "gaps_over_slo": sum(g > ITL_SLO_MS for g in gaps)}
    # A server's first minute is its own regime (its step-time margin and slow-gap budget
    # start cautious; tailcut's tail came from there on 2026-12-06), so runs longer than two
    # minutes also report it apart from the rest.
    spans = [(min(x["scheduled_s"] for x in s), max(x["scheduled_s"] for x in s)) if s else (0.0, 0.0)
             for s in runs_samples]
    if all(end - start >= 2 * FIRST_MINUTE_S for start, end in spans):
        for name, first in (("first_minute", True), ("after_first_minute", False)):
            _, t, g = answered([x for samples, (start, _) in zip(runs_samples, spans) for x in samples
                                if (x["scheduled_s"] - start < FIRST_MINUTE_S) == first])
            pooled[name] = {"requests": len(t), "ttft_p95_ms": pct(t, 0.95), "ttft_p99_ms": pct(t, 0.99),
                            "ttft_max_ms": max(t, default=None), "itl_p99_ms": pct(g, 0.99),
                            "gaps_over_slo": sum(x > ITL_SLO_MS for x in g)}
    return pooled


def merge_repeats(runs: list[dict]) -> dict:
    """One point from its --repeats runs: each figure the median of the runs' (a P99 of each
    run: the spread between runs is what the repeats measure), and under "pooled" the P99s
    over all the runs' requests together (pooled_tail); counts and errors summed, the SLO
    judged on the medians; every run kept under "runs"."""
    pooled = pooled_tail([r.pop("_samples") for r in runs])
    if "first_minute" in pooled:
        a, b = pooled["first_minute"], pooled["after_first_minute"]
        print(f"  {runs[0]['system']:17} {runs[0]['offered_rate']:6.3f} req/s, first {FIRST_MINUTE_S:.0f} s / "
              f"after: TTFT P99 {a['ttft_p99_ms'] or 0:.0f} / {b['ttft_p99_ms'] or 0:.0f} ms, max "
              f"{a['ttft_max_ms'] or 0:.0f} / {b['ttft_max_ms'] or 0:.0f} ms, ITL P99 "
              f"{a['itl_p99_ms'] or 0:.1f} / {b['itl_p99_ms'] or 0:.1f} ms", flush=True)
    if len(runs) == 1:
        runs[0]["pooled"] = pooled
        return runs[0]

    def median(key: str):
        v = sorted(r[key] for r in runs if r[key] is not None)
        if not v:
            return None
        mid = len(v) // 2
        return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2

    row = {"system": runs[0]["system"], "offered_rate": runs[0]["offered_rate"],
           "sent": sum(r["sent"] for r in runs), "ok": sum(r["ok"] for r in runs), "errors": {}}
    for r in runs:
        for k, v in r["errors"].items():
            row["errors"][k] = row["errors"].get(k, 0) + v
    for key in MEDIAN_FIELDS:
        row[key] = median(key)
    row["stale_connection_retries"] = sum(r["stale_connection_retries"] for r in runs)
    row["spread"] = {k: [min(r[k] or 0 for r in runs), max(r[k] or 0 for r in runs)]
                     for k in ("ttft_p99_ms", "itl_p99_ms")}
    row["meets_slo"] = meets_slo(row)
    row["pooled"] = pooled
    row["runs"] = runs
    print(f"  {row['system']:17} {row['offered_rate']:6.3f} req/s, median of {len(runs)}: TTFT P99 "
          f"{row['ttft_p99_ms'] or 0:.0f} ({row['spread']['ttft_p99_ms'][0]:.0f}-"
          f"{row['spread']['ttft_p99_ms'][1]:.0f}) ms, ITL P99 {row['itl_p99_ms'] or 0:.1f} "
          f"({row['spread']['itl_p99_ms'][0]:.1f}-{row['spread']['itl_p99_ms'][1]:.1f}) ms, "
          f"SLO {'met' if row['meets_slo'] else 'missed'}; pooled over {pooled['requests']} "
          f"requests: TTFT P99 {pooled['ttft_p99_ms'] or 0:.0f} ms, ITL P99 "
          f"{pooled['itl_p99_ms'] or 0:.1f} ms, gaps > {ITL_SLO_MS:.0f} ms "
          f"{pooled['gaps_over_slo']} of {pooled['gaps']}", flush=True)
    return row


class Lines:
    """Hands out workload start lines so that no prompt is sent twice and every system at one
    rate gets the same ones."""

    def __init__(self, args):
        self.a, self.next = args, 0

    def take(self, rate: float) -> int:
        start = self.next
        self.next += int(rate * (self.a.duration + self.a.warmup) * 1.5) + 10
        return start


def search(systems: Systems, name: str, sweep_rows: list[dict], workload: Path, lines: Lines,
           args) -> tuple[float | None, list[dict]]:
    """The highest rate meeting the SLO, bracketed by the sweep, then bisected."""
    rows = sorted(sweep_rows, key=lambda r: r["offered_rate"])
    passing = [r["offered_rate"] for r in rows if r["meets_slo"]]
    lo = max(passing, default=0.0)
    hi = min((r["offered_rate"] for r in rows if not r["meets_slo"] and r["offered_rate"] > lo), default=None)
    extra = []
    while hi is None and args.search_steps > 0:
        rate = min(2 * lo, args.search_max_rate)
        if rate <= lo:
            break
        row = merge_repeats([run_point(systems, name, workload, rate, lines.take(rate),
                                       f"search-{name}-{rate:g}-{k}") for k in range(args.repeats)])
        extra.append(row)
        lo, hi = (rate, None) if row["meets_slo"] else (lo, rate)
    for _ in range(args.search_steps if hi is not None else 0):
        rate = round((lo + hi) / 2, 4)
        row = merge_repeats([run_point(systems, name, workload, rate, lines.take(rate),
                                       f"search-{name}-{rate:g}-{k}") for k in range(args.repeats)])
        extra.append(row)
        lo, hi = (rate, hi) if row["meets_slo"] else (lo, rate)
    return (lo if lo > 0 else None), extra


def saturate(systems: Systems, name: str, questions: list[str], tag: str) -> dict:
    """Throughput at saturation, closed loop: --saturation-clients clients, each sending its
    next non-streamed chat request (a distinct QQP question, max_tokens as the sweep) as soon as
    its last one is answered, for --warmup + --saturation-seconds against a fresh server. Counts
    the requests answered within the measured window and their generated tokens (usage). This
    is the source's "shared engine against one engine per request" comparison (18 -> 57 req/s):
    tailcut-serial runs one sequence at a time whatever the clients, so the ratio of the two is
    what sharing the engine buys at full load. Latency here is not a target: every client keeps
    one request outstanding, so the queue is as long as the clients allow."""
    import http.client
    import threading
    a = systems.a
    pool = iter(questions)
    lock = threading.Lock()
    done: list[tuple[float, float, int]] = []  # (sent, answered, generated tokens)
    failures: dict[str, int] = {}
    with systems.make(name, tag.replace("/", "+")) as server:
        t_start = time.monotonic()
        t_measure, t_end = t_start + a.warmup, t_start + a.warmup + a.saturation_seconds

        def client() -> None:
            while time.monotonic() < t_end:
                with lock:
                    text = next(pool)
                body = json.dumps(chat_body(text, a.max_tokens, False))
                sent = time.monotonic()
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
                    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
                    r = conn.getresponse()
                    payload = r.read()
                    conn.close()
                    if r.status != 200:
                        raise BenchError(f"HTTP {r.status}")
                    tokens = json.loads(payload)["usage"]["completion_tokens"]
                except Exception as e:  # noqa: BLE001  (counted by kind, the run goes on)
                    with lock:
                        failures[str(e)[:60]] = failures.get(str(e)[:60], 0) + 1
                    continue
                with lock:
                    done.append((sent, time.monotonic(), tokens))

        cpu0 = server.cpu_s()
        threads = [threading.Thread(target=client, daemon=True) for _ in range(a.saturation_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu = server.cpu_s() - cpu0
        server.alive()
        rss = server.peak_rss_mb()
    window = [d for d in done if t_measure <= d[1] <= t_end]
    latencies = [1000 * (d[1] - d[0]) for d in window]
    row = {"system": name, "clients": a.saturation_clients, "seconds": a.saturation_seconds,
           "answered": len(window), "requests_per_s": len(window) / a.saturation_seconds,
           "generated_tokens_per_s": sum(d[2] for d in window) / a.saturation_seconds,
           "latency_p50_ms": pct(latencies, 0.5), "latency_p99_ms": pct(latencies, 0.99),
           "failures": failures, "cpu_s_all_run": cpu, "peak_rss_mb": rss}
    print(f"  {name:17} {a.saturation_clients} clients: {row['requests_per_s']:.2f} req/s, "
          f"{row['generated_tokens_per_s']:.1f} generated tok/s, latency P50/P99 "
          f"{row['latency_p50_ms'] or 0:.0f} / {row['latency_p99_ms'] or 0:.0f} ms, failures "
          f"{failures or 0}", flush=True)
    return row


def long_prompts(args, questions: list[str], n: int, systems: Systems) -> tuple[list[str], list[int]]:
    """n distinct long prompts of real text (QQP questions, numbered, under an instruction),
    each at least --long-tokens tokens as tailcut counts them (its usage.prompt_tokens, the
    chat template included), sized from one measured chars-per-token ratio. Fails if one is
    short or would not fit a sequence's context."""
    head = "Here are questions people asked on a forum:\n"
    tail = "\nWhich two of these questions ask the same thing? Answer briefly."
    pool = iter(questions)

    def build(chars: int) -> str:
        parts, size = [], len(head) + len(tail)
        while size < chars:
            q = next(pool)
            parts.append(f"{len(parts) + 1}. {q}")
            size += len(parts[-1]) + 1
        return head + "\n".join(parts) + tail

    ceiling = args.slot_tokens - args.max_tokens - TEMPLATE_MARGIN
    with systems.make("tailcut", "long-prompt-count") as probe:  # A throwaway server: nothing it caches is reused.
        def tokens(text: str) -> int:
            return post_chat(probe.port, text, 1)["usage"]["prompt_tokens"]

        trial = build(3 * args.long_tokens)  # ~700 tokens: fits a sequence.
        chars_per_token = len(trial) / tokens(trial)
        target = (args.long_tokens + ceiling) / 2  # Halfway between the floor and the ceiling.
        texts = [build(int(target * chars_per_token)) for _ in range(n)]
        counts = [tokens(t) for t in texts]
    bad = [c for c in counts if not args.long_tokens <= c <= ceiling]
    if bad:
        raise BenchError(f"long prompts of {bad} tokens: outside [{args.long_tokens}, {ceiling}] "
                         f"(--long-tokens, --slot-tokens - --max-tokens - {TEMPLATE_MARGIN})")
    return texts, counts


def mix_workload(args, short: list[str], systems: Systems, path: Path, n_lines: int) -> tuple[set[int], list[int]]:
    """A workload whose lines are short questions but one in every ten, at a random place in
    each block of ten, a long prompt. Returns the long lines and their token counts."""
    rng = random.Random(args.seed + 1)
    long_at = {b + rng.randrange(10) for b in range(0, n_lines, 10)}
    long_at = {i for i in long_at if i < n_lines}
    texts, counts = long_prompts(args, short[n_lines:], len(long_at), systems)
    it = iter(texts)
    write_workload(path, [next(it) if i in long_at else short[i] for i in range(n_lines)], args.max_tokens)
    return long_at, counts


def fmt_ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v / 1000:.1f} s" if v >= 10_000 else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_errors(e: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in e.items()) or "0"


def spread(row: dict, key: str) -> str:
    """' (lo–hi; pooled P)' over a repeated point's runs (the P99 over all their requests
    together, pooled_tail), '' for a single run."""
    if "spread" not in row:
        return ""
    lo, hi = row["spread"][key]
    return f" ({fmt_ms(lo)}–{fmt_ms(hi)}; pooled {fmt_ms(row['pooled'][key])})"


def markdown(results: dict, args) -> str:
    order = list(dict.fromkeys(r["system"] for r in results["sweep"] + results["search"]))
    out = ["| system | offered req/s | TTFT P50 / P99 ms | ITL P50 / P99 ms | tok/s | req/s | errors "
           "| CPU s/req | CPU/s | peak RSS MB | SLO |",
           "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for row in sorted(results["sweep"] + results["search"], key=lambda r: (order.index(r["system"]), r["offered_rate"])):
        out.append(
            f"| {row['system']} | {row['offered_rate']:g} | {fmt_ms(row['ttft_p50_ms'])} / {fmt_ms(row['ttft_p99_ms'])}"
            f"{spread(row, 'ttft_p99_ms')} | {fmt_ms(row['itl_p50_ms'])} / {fmt_ms(row['itl_p99_ms'])}"
            f"{spread(row, 'itl_p99_ms')} | {row['tokens_per_s'] or 0:.1f} "
            f"| {row['requests_per_s']:.2f} | {fmt_errors(row['errors'])} | {row['cpu_s_per_request'] or 0:.2f} "
            f"| {row['cpu_per_s'] or 0:.2f} | {row['peak_rss_mb']:.0f} | {'met' if row['meets_slo'] else 'missed'} |")
    best = results["max_rate_at_slo"]
    out += ["", f"Highest rate meeting TTFT P99 <= {TTFT_SLO_MS:.0f} ms and ITL P99 <= {ITL_SLO_MS:.0f} ms "
            f"(no error), {args.duration:g} s per point"
            f"{f', median of {args.repeats} runs (P99 ranges in brackets)' if args.repeats > 1 else ''}:", "",
            "| system | max req/s at SLO |", "|---|---:|"]
    out += [f"| {s} | {'none tried met it' if r is None else f'{r:g}'} |" for s, r in best.items()]
    if results["saturation"]:
        out += ["", f"Saturation, closed loop: {args.saturation_clients} clients, each sending its next "
                f"request when answered, {args.saturation_seconds:g} s measured:", "",
                "| system | req/s | generated tok/s | latency P50 / P99 ms | failures | peak RSS MB |",
                "|---|---:|---:|---:|---|---:|"]
        for row in results["saturation"]:
            out.append(f"| {row['system']} | {row['requests_per_s']:.2f} | {row['generated_tokens_per_s']:.1f} "
                       f"| {fmt_ms(row['latency_p50_ms'])} / {fmt_ms(row['latency_p99_ms'])} "
                       f"| {fmt_errors(row['failures'])} | {row['peak_rss_mb']:.0f} |")
    ratios = results["targets"]
    if ratios:
        out += [""] + [f"- {k}: {v}" for k, v in ratios.items()]
    if results["mix"]:
        out += ["", f"Mixed prompts: 10 % long ({min(results['long_prompt_tokens'])}–"
                f"{max(results['long_prompt_tokens'])} tokens), the rest QQP questions:", "",
                "| system | offered req/s | short TTFT P50 / P99 ms | short ITL P50 / P99 ms "
                "| long TTFT P50 / P99 ms | all ITL P99 ms | tok/s | errors |",
                "|---|---:|---:|---:|---:|---:|---:|---|"]
        for row in results["mix"]:
            s, lg = row["short"], row["long"]
            out.append(
                f"| {row['system']} | {row['offered_rate']:g} | {fmt_ms(s['ttft_p50_ms'])} / {fmt_ms(s['ttft_p99_ms'])} "
                f"| {fmt_ms(s['itl_p50_ms'])} / {fmt_ms(s['itl_p99_ms'])} | {fmt_ms(lg['ttft_p50_ms'])} / "
                f"{fmt_ms(lg['ttft_p99_ms'])} | {fmt_ms(row['itl_p99_ms'])} | {row['tokens_per_s'] or 0:.1f} "
                f"| {fmt_errors(row['errors'])} |")
    return "\n".join(out)


def targets(results: dict) -> dict:
    """The issue's three targets, where this run has the numbers for them."""
    best, rows, out = results["max_rate_at_slo"], results["sweep"], {}
    if best.get("tailcut") and best.get("llama-server"):
        r = best["tailcut"] / best["llama-server"]
        out["max rate at SLO, tailcut / llama-server (target >= 1.2)"] = f"{r:.2f}"

    def at(system: str) -> dict[float, dict]:
        return {r["offered_rate"]: r for r in rows if r["system"] == system}

    tc, ls, serial = at("tailcut"), at("llama-server"), at("tailcut-serial")
    for rate in sorted(set(tc) & set(ls)):
        a, b = tc[rate]["ttft_p99_ms"], ls[rate]["ttft_p99_ms"]
        if a is not None and b is not None:
            out[f"TTFT P99 at {rate:g} req/s, tailcut vs llama-server (target <=)"] = f"{a:,.0f} vs {b:,.0f} ms"
    sat: dict[str, list[float]] = {}
    for row in results["saturation"]:
        sat.setdefault(row["system"], []).append(row["requests_per_s"])
    if sat.get("tailcut") and sat.get("tailcut-serial"):
        shared, one = statistics.median(sat["tailcut"]), statistics.median(sat["tailcut-serial"])
        out["req/s at saturation, tailcut / tailcut-serial (target >= 3)"] = \
            f"{shared / one:.2f} ({shared:.2f} / {one:.2f} req/s, median of {len(sat['tailcut'])})"
    both = [r for r in sorted(set(tc) & set(serial)) if serial[r]["tokens_per_s"]]
    if both:
        top = max(both)
        out[f"tokens/s at {top:g} req/s, tailcut / tailcut-serial (target >= 3)"] = \
            f"{tc[top]['tokens_per_s'] / serial[top]['tokens_per_s']:.2f}"
    return out


def add_server_options(ap: argparse.ArgumentParser) -> None:
    """The options Systems starts the servers with (also bench/prefix_burst_bench.py's)."""
    ap.add_argument("--parallel", type=int, default=8, help="sequences at once (tailcut, llama-server)")
    ap.add_argument("--slot-tokens", type=int, default=1280, help="KV cells per sequence")
    ap.add_argument("--prefill-chunk", type=int, default=256, help="tailcut's prefill_chunk_tokens")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kv-cache", default="per_sequence", choices=("per_sequence", "shared"),
                    help="tailcut's model.yaml kv_cache")
    ap.add_argument("--step-millis", type=int, default=0,
                    help="tailcut's max_step_millis_while_generating (0: none of its own; the "
                         "bound from inter_token_slo_millis less the measured margin applies)")
    ap.add_argument("--min-prefill", type=int, default=16,
                    help="tailcut's min_prefill_tokens_per_step (prompt tokens a step takes even "
                         "past the step time bound)")
    ap.add_argument("--poll", type=int, default=0,
                    help="tailcut's thread_poll_level (llama-server's default is 50)")
    ap.add_argument("--gguf", type=Path, default=DEFAULT_GGUF)
    ap.add_argument("--tailcut", type=Path, default=BUILD / "tailcut")
    ap.add_argument("--tailcut-base", type=Path, default=None,
                    help="the binary the tailcut-base system runs (another build of tailcut)")
    ap.add_argument("--loadgen", type=Path, default=BUILD / "tailcut-loadgen")
    ap.add_argument("--llama-server", type=Path,
                    default=Path(os.environ.get("LLAMA_SERVER", REPO / "build-llama-server" / "bin" / "llama-server")))
    ap.add_argument("--llama-cpp-python", type=Path, default=REPO / "build-llama-cpp-python",
                    help="bench/build_llama_cpp_python.sh's folder")
    ap.add_argument("--qqp", type=Path, default=DEFAULT_QQP)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rates", default="0.25,0.5,1,2", help="sweep rates, req/s")
    ap.add_argument("--duration", type=float, default=30, help="measured seconds per point")
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per point (sweep and search), each with its own prompts; the "
                         "point is their median, with the spread of the P99s")
    ap.add_argument("--timeout", type=float, default=20,
                    help="seconds a request may take; later it counts as unfinished (and an "
                         "overloaded point ends at warm-up + duration + timeout)")
    ap.add_argument("--search-steps", type=int, default=2, help="bisections per system (0: no search)")
    ap.add_argument("--search-max-rate", type=float, default=4)
    ap.add_argument("--mix-rates", default="0.5,1", help="rates of the long-prompt mix ('' skips it)")
    ap.add_argument("--mix-systems", default="tailcut-chunk64,tailcut-nochunk,llama-server")
    ap.add_argument("--long-tokens", type=int, default=1000)
    ap.add_argument("--saturation-clients", type=int, default=0,
                    help="closed-loop clients of the saturation phase (0 skips it)")
    ap.add_argument("--saturation-seconds", type=float, default=30)
    ap.add_argument("--saturation-systems", default="tailcut,tailcut-serial")
    add_server_options(ap)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    # A SIGTERM unwinds like Ctrl-C: the servers and the load generator are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    mix_rates = [float(r) for r in args.mix_rates.split(",") if r.strip()]
    mix_names = [s.strip() for s in args.mix_systems.split(",") if s.strip()] if mix_rates else []
    sat_names = [s.strip() for s in args.saturation_systems.split(",") if s.strip()] \
        if args.saturation_clients > 0 else []
    tmp = Path(tempfile.mkdtemp(prefix="tailcut-gen-bench-"))
    systems = Systems(args, tmp)
    try:
        systems.check(names + mix_names + sat_names)  # Also refuses an unknown name.
    except BenchError as e:
        sys.exit(f"generation_bench: {e}")
    questions = make_workloads.qqp_questions(args.qqp)
    random.Random(args.seed).shuffle(questions)
    lines = Lines(args)
    n_short = args.repeats * (
        sum(int(r * (args.duration + args.warmup) * 1.5) + 10 for r in rates) * 2 +
        len(names) * (args.search_steps + 2) * (int(args.search_max_rate * (args.duration + args.warmup) * 1.5) + 10))
    n_short = min(n_short, len(questions) // 2)
    workload = tmp / "chat.jsonl"
    write_workload(workload, questions[:n_short], args.max_tokens)
    print(f"generation_bench: {tmp} (logs, workloads, load-generator reports)", flush=True)

    load = os.getloadavg()[0]
    results: dict = {"sweep": [], "search": [], "mix": [], "saturation": [], "max_rate_at_slo": {},
                     "long_prompt_tokens": []}
    started = time.monotonic()
    try:
        for rate in rates:
            runs: dict[str, list[dict]] = {name: [] for name in names}
            for k in range(args.repeats):
                start = lines.take(rate)
                # Each repeat its own prompts (the same for every system) and its own order of
                # systems, so neither the prompts nor the position in the run favour one.
                for name in names[k % len(names):] + names[:k % len(names)]:
                    runs[name].append(run_point(systems, name, workload, rate, start,
                                                f"sweep-{name}-{rate:g}-{k}"))
            results["sweep"] += [merge_repeats(runs[name]) for name in names]
        for name in names:
            best, extra = search(systems, name, [r for r in results["sweep"] if r["system"] == name],
                                 workload, lines, args)
            results["max_rate_at_slo"][name] = best
            results["search"] += extra
        if mix_names:
            n_mix = sum(int(r * (args.duration + args.warmup) * 1.5) + 10 for r in mix_rates)
            mix_path = tmp / "mix.jsonl"
            long_at, counts = mix_workload(args, questions[n_short:], systems, mix_path, n_mix)
            results["long_prompt_tokens"] = counts
            mix_lines = Lines(args)
            for rate in mix_rates:
                start = mix_lines.take(rate)
                for name in mix_names:
                    row = run_point(systems, name, mix_path, rate, start, f"mix-{name}-{rate:g}",
                                    long_at)
                    row.pop("_samples")  # Its short/long split is what the mix reports.
                    results["mix"].append(row)
        # The saturation phase's prompts: past every other phase's (no prompt is sent twice).
        sat_questions = questions[len(questions) * 3 // 4:]
        for k in range(args.repeats if sat_names else 0):
            for name in sat_names[k % len(sat_names):] + sat_names[:k % len(sat_names)]:
                results["saturation"].append(saturate(systems, name, sat_questions[k::args.repeats],
                                                      f"saturation-{name}-{k}"))
    except BenchError as e:
        sys.exit(f"generation_bench: {e}")
    results["targets"] = targets(results)
    out = args.out or REPO / "bench" / "results" / f"generation-{datetime.now():%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": " ".join(sys.argv), "load_average_at_start": load,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "cpu": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), ""),
        "options": {k: str(v) for k, v in vars(args).items()}, **results,
    }, indent=1) + "\n")
    print("\n" + markdown(results, args) + "\n")
    print(f"generation_bench: wrote {out} ({(time.monotonic() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
