#!/usr/bin/env python3
"""Generation side by side: tailcut against llama.cpp's own server on the same GGUF file.

Open-loop Poisson arrivals of streamed chat requests whose prompts are real questions (QQP,
natural length, each question once), `max_tokens` 64, greedy, driven by tailcut-loadgen
--stream. For each system and offered rate: time to first token (TTFT) P50/P99, inter-token
latency P50/P99, token events per second, errors by status, server CPU seconds per second
and peak RSS. Then, per system, the highest rate of the list that held TTFT P99 <= 500 ms and
inter-token P99 <= 86 ms.

Systems (--systems, comma-separated):
  tailcut         `tailcut serve` with a repository holding only the model, --parallel
                  sequences (model.yaml max_sequences), --threads compute threads
  tailcut-serial  the same with one sequence at a time (max_sequences 1): what one engine per
                  request would give, the source's baseline (its 18 -> 57 req/s)
  llama-server    llama.cpp's server from the same source tree (continuous batching on,
                  --parallel slots, the same threads and KV size); --llama-server names the
                  binary (bench/build_llama_server.sh builds it)

Both servers get the same KV capacity (--parallel x --slot-tokens cells), threads and model
file. Each rate runs --duration seconds after --warmup seconds; the systems alternate rate by
rate so that a machine that slows down during the run affects both alike.

Usage: .venv-bench/bin/python bench/generation_bench.py [--rates 1,2,4,8] [--duration 30]
         [--systems tailcut,tailcut-serial,llama-server] [--llama-server PATH] [--qqp PATH]
Results: bench/results/generation-<date>.json and a table on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_workloads  # noqa: E402  (the QQP reader the embedding workloads use)

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
DEFAULT_QQP = Path(os.environ.get("TAILCUT_SHARED_DATA", REPO.parent / "shared" / "data")) / "qqp" / "pairs.jsonl.gz"
DEFAULT_GGUF = REPO / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"
TTFT_SLO_MS = 500.0
ITL_SLO_MS = 86.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def questions(path: Path, n: int, seed: int) -> list[str]:
    """n distinct QQP questions (make_workloads' reader: whitespace folded, first occurrence),
    shuffled with `seed`."""
    out = make_workloads.qqp_questions(path)
    random.Random(seed).shuffle(out)
    return out[:n]


def write_workload(path: Path, texts: list[str], max_tokens: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for q in texts:
            f.write(json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": q}],
                                "max_tokens": max_tokens, "temperature": 0, "stream": True}) + "\n")


class Proc:
    """A server process on a free loopback port, ready when `ready_path` answers 200."""

    def __init__(self, name: str, argv_for_port, ready_path: str, log: Path):
        self.name, self.port, self.log = name, free_port(), log
        self.argv = argv_for_port(self.port)
        self.ready_path = ready_path
        self.proc: subprocess.Popen | None = None

    def __enter__(self):
        self.log_file = open(self.log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(self.argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{self.ready_path}", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log_file.close()

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


def tailcut(tmp: Path, gguf: Path, parallel: int, slot_tokens: int, threads: int, name: str):
    repo = tmp / f"repo-{name}"
    folder = repo / MODEL_NAME
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / gguf.name
    if not link.exists():
        link.symlink_to(gguf.resolve())
    (folder / "model.yaml").write_text(
        f"name: {MODEL_NAME}\nkind: generative\nfile: {gguf.name}\n"
        f"context_tokens: {parallel * slot_tokens}\nmax_sequences: {parallel}\n"
        f"decode_threads: {threads}\nbatch_threads: {threads}\n"
        # Requests queue here rather than being refused: the load generator measures the wait.
        "max_waiting_requests: 100000\nmax_queue_delay_millis: 0\n")
    return Proc(name, lambda port: [str(BUILD / "tailcut"), "serve", "--host", "127.0.0.1",
                                    "--port", str(port), "--model-repository", str(repo)],
                "/v2/health/ready", tmp / f"{name}.log")


def llama_server(tmp: Path, binary: Path, gguf: Path, parallel: int, slot_tokens: int, threads: int):
    return Proc("llama-server", lambda port: [
        str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
        "-t", str(threads), "-tb", str(threads), "-np", str(parallel),
        "-c", str(parallel * slot_tokens), "--cont-batching", "--no-webui",
        # Its prompt cache reuses a slot's previous prompt; tailcut's does not (yet): off.
        "--cache-reuse", "0", "--alias", MODEL_NAME], "/health", tmp / "llama-server.log")


def run_rate(port: int, workload: Path, rate: float, duration: float, warmup: float, start: int,
             out: Path) -> dict:
    argv = [str(BUILD / "tailcut-loadgen"), "--port", str(port), "--path", "/v1/chat/completions",
            "--workload", str(workload), "--rate", str(rate), "--duration", str(duration),
            "--warmup", str(warmup), "--poisson", "--stream", "--connections", "512",
            "--timeout", "120", "--start", str(start), "--out", str(out)]
    subprocess.run(argv, check=True)
    return json.loads(out.read_text())


def summary(rep: dict, cpu_s: float, rss_mb: float, seconds: float) -> dict:
    st = rep.get("streaming") or {}
    ttft, itl = st.get("ttft_ms") or {}, st.get("inter_token_ms") or {}
    errors = {k: v for k, v in rep["status_counts"].items() if k != "200"}
    row = {
        "offered_rate": rep["offered_rate"], "ok": rep["ok"], "errors": errors,
        "unfinished": rep["unfinished"],
        "ttft_p50_ms": ttft.get("p50"), "ttft_p99_ms": ttft.get("p99"),
        "itl_p50_ms": itl.get("p50"), "itl_p99_ms": itl.get("p99"),
        "tokens_per_s": st.get("token_events_per_s"),
        "requests_per_s": rep["achieved_rate"],
        "cpu_per_s": cpu_s / seconds if seconds > 0 else None, "peak_rss_mb": rss_mb,
    }
    row["meets_slo"] = bool(
        not errors and rep["unfinished"] == 0 and row["ttft_p99_ms"] is not None
        and row["ttft_p99_ms"] <= TTFT_SLO_MS and (row["itl_p99_ms"] or 0) <= ITL_SLO_MS)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="tailcut,tailcut-serial,llama-server")
    ap.add_argument("--rates", default="0.5,1,2,3,4")
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--slot-tokens", type=int, default=256, help="KV cells per sequence")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--gguf", type=Path, default=DEFAULT_GGUF)
    ap.add_argument("--llama-server", type=Path,
                    default=Path(os.environ.get("LLAMA_SERVER", REPO / "build-llama-server" / "bin" / "llama-server")))
    ap.add_argument("--qqp", type=Path, default=DEFAULT_QQP)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    rates = [float(r) for r in args.rates.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="tailcut-gen-bench-"))
    workload = tmp / "chat.jsonl"
    write_workload(workload, questions(args.qqp, 5000, args.seed), args.max_tokens)

    def make(system: str):
        if system == "tailcut":
            return tailcut(tmp, args.gguf, args.parallel, args.slot_tokens, args.threads, system)
        if system == "tailcut-serial":
            return tailcut(tmp, args.gguf, 1, args.parallel * args.slot_tokens, args.threads, system)
        if system == "llama-server":
            return llama_server(tmp, args.llama_server, args.gguf, args.parallel, args.slot_tokens,
                                args.threads)
        sys.exit(f"generation_bench: unknown system {system}")

    load = os.getloadavg()[0]
    results: dict[str, list[dict]] = {s: [] for s in systems}
    start_line = 0
    for rate in rates:
        for system in systems:
            # A fresh server per cell: no KV or queue state carries over from the rate before.
            with make(system) as server:
                cpu0 = server.cpu_s()
                t0 = time.monotonic()
                rep = run_rate(server.port, workload, rate, args.duration, args.warmup, start_line,
                               tmp / f"{system}-{rate}.json")
                row = summary(rep, server.cpu_s() - cpu0, server.peak_rss_mb(), time.monotonic() - t0)
            results[system].append(row)
            print(f"{system:15} {rate:5.2f} req/s: TTFT P50/P99 {row['ttft_p50_ms'] or 0:7.0f} / "
                  f"{row['ttft_p99_ms'] or 0:7.0f} ms, ITL P50/P99 {row['itl_p50_ms'] or 0:5.1f} / "
                  f"{row['itl_p99_ms'] or 0:6.1f} ms, {row['tokens_per_s'] or 0:6.1f} tok/s, "
                  f"errors {row['errors']}, unfinished {row['unfinished']}, CPU {row['cpu_per_s'] or 0:.2f}, "
                  f"RSS {row['peak_rss_mb']:.0f} MB, SLO {'ok' if row['meets_slo'] else 'missed'}",
                  flush=True)
        start_line += int(rate * (args.duration + args.warmup)) + 1
    best = {s: max([r["offered_rate"] for r in rows if r["meets_slo"]], default=None)
            for s, rows in results.items()}
    print("highest rate meeting TTFT P99 <= 500 ms and ITL P99 <= 86 ms:", best)
    out = args.out or REPO / "bench" / "results" / f"generation-{datetime.now():%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": " ".join(sys.argv), "load_average_at_start": load,
        "cpu": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), ""),
        "options": {k: str(v) for k, v in vars(args).items()}, "results": results, "best_rate": best,
    }, indent=2) + "\n")
    print(f"generation_bench: wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
