#!/usr/bin/env python3
"""Side-by-side benchmark (issue #5): tailcut against the Python stacks it replaces and against
the engine's own ceiling, on the same machine, model file, thread count and workloads.

For each workload and each system, one at a time: start the server on its own loopback port,
wait until it is ready, warm it up, then sweep open-loop request rates (Poisson arrivals,
bench/loadgen's tailcut-loadgen):

  1. the workload's common fixed rate first (the same for every system: P99 at equal load);
  2. a coarse ladder from there, up by --factor while the step passes, down while it fails;
  3. a few bisection steps between the highest pass and the lowest fail.

A step passes when P99 (all responses, from scheduled send time) <= 86 ms and at most 0.1 %
of the requests sent failed (non-200, transport error or no answer). The highest passing rate
is the system's max sustained throughput. During each step the harness reads the server's CPU
time (/proc/<pid>/stat, process tree, measured window only), the machine's load average and
how much CPU other processes took; VmHWM gives the server's peak RSS.

The engine ceiling is `tailcut bench-engine --json` (no server, no client): for each token
length the best batch size's throughput, combined over each workload's length histogram.

Writes bench/results/<date>[-quick].json, latency plots bench/results/latency-<workload>.png
and throughput.png, and the generated section of docs/benchmarks/side-by-side.md (the history
that BENCHMARKS.md's headline links) between <!-- bench:begin --> and <!-- bench:end -->.

Usage: .venv-bench/bin/python bench/run_bench.py [--quick] [--workloads short,medium]
         [--systems tailcut,python-async] [--torch-python /tmp/golden-venv/bin/python]
(`make bench` / `make bench-quick` build and set up everything first.)
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import resource
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
# The binaries the run uses: copies taken at the start (see snapshot_binaries), so that a
# rebuild of build/ during the run (others working in the same tree) cannot swap or remove them.
BIN = {"tailcut": BUILD / "tailcut", "tailcut-loadgen": BUILD / "tailcut-loadgen"}
WORKLOADS_DIR = REPO / "bench" / "workloads"
RESULTS_DIR = REPO / "bench" / "results"
# The page holding the generated section; its plots are linked relative to it.
RESULTS_MD = REPO / "docs" / "benchmarks" / "side-by-side.md"
MODEL_DIR = REPO / "models" / "all-MiniLM-L6-v2"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

SLO_MS = 86.0
MAX_ERROR_RATE = 0.001
THREADS = 2  # intra-op threads of one inference, every system
PY_MAX_BATCH = 16  # the source's dynamic batching setting
PY_WINDOW_MS = 2.0  # the Python batcher's window (see docs/benchmarks/side-by-side.md for the tuning)

# Common fixed rate per workload (req/s): every system is measured there, so P99, CPU and
# memory compare at equal load. Chosen below the Python per-request stack's capacity on a
# 2-core Zen 4 so that, ideally, every system passes there.
FIXED_RATES = {"natural": 80.0, "short": 100.0, "medium": 30.0, "mixed": 40.0, "zipf": 100.0}

MODES = {
    "full": {
        "workloads": ["natural", "short", "medium", "mixed", "zipf"],  # natural: the headline
        "server_warmup_s": 2.0,  # load before the first step, at the fixed rate
        "warmup_s": 1.0,  # per step, not recorded
        "duration_s": 4.0,  # per step, recorded
        "factor": 1.5,  # ladder growth
        "refine": 3,  # bisection steps
        "ceiling_batches": [1, 4, 8, 16, 32, 64],
        "ceiling_seconds": 1.0,
    },
    "quick": {
        "workloads": ["short", "medium"],
        "server_warmup_s": 1.0,
        "warmup_s": 0.5,
        "duration_s": 2.0,
        "factor": 2.0,
        "refine": 1,
        "ceiling_batches": [1, 8, 16, 32],
        "ceiling_seconds": 0.3,
    },
}
CEILING_SEQ_LENS = [8, 16, 32, 64, 128, 256]
LOADGEN_TIMEOUT_S = 15.0
MIN_RATE = 2.0
MAX_RATE = 20000.0


def log(msg: str) -> None:
    print(msg, flush=True)


# --- processes ---------------------------------------------------------------------------------
_LIVE: list[subprocess.Popen] = []  # every process group we started and have not stopped


def _spawn(cmd: list[str], **kw) -> subprocess.Popen:
    p = subprocess.Popen(cmd, start_new_session=True, cwd=REPO, **kw)  # own process group
    _LIVE.append(p)
    return p


def _stop(p: subprocess.Popen, grace_s: float = 10.0) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    if p in _LIVE:
        _LIVE.remove(p)


def stop_all() -> None:
    for p in list(_LIVE):
        _stop(p, grace_s=5.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    return kids


def process_tree(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the given processes (all their threads), in seconds."""
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def vm_kb(pids: list[int], key: str) -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]  # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(f[:8]) - idle) / tick, sum(f[:8]) / tick


# --- systems -----------------------------------------------------------------------------------
@dataclass
class System:
    key: str
    label: str
    settings: str
    argv: callable  # port -> argv
    env: dict = field(default_factory=dict)
    workloads: list[str] | None = None  # None: every workload; else only these unless named in --systems


def tailcut_serve_flags() -> str:
    """`tailcut serve --help`, to use only the settings this build has."""
    try:
        return subprocess.run([str(BIN["tailcut"]), "serve", "--help"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def fp32_repository(tmp: Path) -> Path:
    """A model repository holding only the fp32 model: the same files (symlinks to models/), and
    model.yaml without its precision variants, so tailcut loads exactly the one model the
    baselines load (otherwise it also loads the int8/fp16 variants the repository lists)."""
    src = MODEL_DIR
    dst = tmp / "models-fp32" / src.name
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name == "model.yaml" or (f.is_file() and f.name.startswith("model.") and f.name != "model.onnx"):
            continue
        link = dst / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    lines, skipping = [], False
    for line in (src / "model.yaml").read_text().splitlines():
        if skipping and (line.startswith((" ", "\t", "-")) or not line.strip()):
            continue
        skipping = False
        if line.startswith("variants:"):
            skipping = True
            continue
        if line.startswith("default_variant:"):
            continue
        lines.append(line)
    (dst / "model.yaml").write_text("\n".join(lines) + "\n")
    return dst.parent


def systems(args, fp32_repo: Path) -> dict[str, System]:
    tailcut = str(BIN["tailcut"])
    bench_py = str(REPO / ".venv-bench" / "bin" / "python")
    server_py = str(REPO / "bench" / "baselines" / "python_server.py")
    help_text = tailcut_serve_flags()
    # Like for like: the one fp32 model file, no embedding cache, no switching to a quantised
    # variant under load (settings that exist only in newer builds are added when present).
    same = ["--model-repository", str(fp32_repo)]
    same_note = "fp32 model.onnx only"
    if "--cache.enabled" in help_text:
        same.append("--cache.enabled=false")
        same_note += ", embedding cache off"
    if "--precision.mode" in help_text:
        same += ["--precision.mode", "off"]
        same_note += ", precision controller off"
    if "--requests.max_queue_delay_millis" in help_text:
        same_note += ", load shedding at its default (429 when the queued work exceeds max_queue_delay_millis)"
    # tailcut lays out its engine for the CPUs it has (a one-thread batch worker per CPU, since
    # the batch time cut-off came with it); builds from before keep the THREADS of the others.
    own_layout = "--batching.max_batch_millis" in help_text
    layout_note = "engine layout its default (a one-thread batch worker per CPU)" if own_layout \
        else f"intra_op {THREADS}"
    common_tc = ["serve", "--host", "127.0.0.1", *([] if own_layout else ["--threads", str(THREADS)])]
    if "--grpc-port" in help_text:  # No gRPC listener: the benchmarks speak HTTP.
        common_tc += ["--grpc-port", "0"]
    out = {
        "tailcut": System(
            "tailcut",
            "tailcut (batching)",
            f"{same_note}; batching defaults: max batch 64, max 512 padded tokens/batch"
            + (", cut where a batch is predicted to pass 10 ms" if "--batching.max_batch_millis" in help_text else "")
            + f", batch timeout 0 (batch what is queued); {layout_note}, 1 I/O thread",
            lambda port: [tailcut, *common_tc, *same, "--port", str(port)],
        ),
        "tailcut-nobatch": System(
            "tailcut-nobatch",
            "tailcut (no batching)",
            f"{same_note}; --max-batch-size 1; {layout_note}",
            lambda port: [tailcut, *common_tc, *same, "--port", str(port), "--max-batch-size", "1"],
        ),
    }
    if "--cache.enabled" in help_text or "--precision.mode" in help_text:
        out["tailcut-default"] = System(
            "tailcut-default",
            "tailcut (product defaults)",
            "every default: models/ with all its precision variants, embedding cache on, SLO-driven precision "
            f"controller on (may serve an int8 variant under load); {layout_note}. Not like for like: "
            "run on the zipf workload (the cache's) unless --systems names it",
            lambda port: [tailcut, *common_tc, "--model-repository", str(REPO / "models"), "--port", str(port)],
            workloads=["zipf"],
        )
    out.update({
        "python-async": System(
            "python-async",
            "Python async (FastAPI+ORT, batching)",
            f"FastAPI + uvicorn (uvloop, httptools, 1 worker) + onnxruntime {THREADS} intra-op threads; "
            f"asyncio dynamic batcher, max batch {PY_MAX_BATCH}, window {PY_WINDOW_MS:g} ms",
            lambda port: [bench_py, server_py, "--port", str(port), "--mode", "batch", "--threads", str(THREADS),
                          "--max-batch", str(PY_MAX_BATCH), "--window-ms", str(PY_WINDOW_MS), *args.python_arg],
            {"TOKENIZERS_PARALLELISM": "false"},
        ),
        "python-single": System(
            "python-single",
            "Python per-request (FastAPI+ORT)",
            f"the same service without batching: one request per inference, one at a time; {THREADS} intra-op threads",
            lambda port: [bench_py, server_py, "--port", str(port), "--mode", "single", "--threads", str(THREADS),
                          *args.python_arg],
            {"TOKENIZERS_PARALLELISM": "false"},
        ),
    })
    for variant in args.python_variant:  # extra rows: the Python async stack with other settings
        name, _, extra = variant.partition("=")
        base = out["python-async"]
        out[f"python-async[{name}]"] = System(
            f"python-async[{name}]",
            f"Python async [{name}]",
            f"{base.settings}; then {extra}",
            lambda port, base=base, extra=extra: [*base.argv(port), *shlex.split(extra)],
            base.env,
        )
    if args.torch_python:
        site = sysconfig.get_paths()["purelib"]  # .venv-bench's: fastapi, uvicorn, orjson
        out["pytorch"] = System(
            "pytorch",
            "PyTorch eager (sentence-transformers)",
            f"sentence-transformers behind the same FastAPI service, torch.set_num_threads({THREADS}), "
            f"dynamic batcher max {PY_MAX_BATCH}, window {PY_WINDOW_MS:g} ms; interpreter {args.torch_python}",
            lambda port: [args.torch_python, server_py, "--backend", "torch", "--extra-site", site, "--port", str(port),
                          "--mode", "batch", "--threads", str(THREADS), "--max-batch", str(PY_MAX_BATCH),
                          "--window-ms", str(PY_WINDOW_MS)],
            {"TOKENIZERS_PARALLELISM": "false"},
        )
    return out


class Server:
    def __init__(self, system: System, log_path: Path):
        self.system, self.log_path = system, log_path
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120.0) -> float:
        argv = self.system.argv(self.port)
        self.argv = argv
        env = {**os.environ, **self.system.env}
        self.log_file = open(self.log_path, "w")  # noqa: SIM115
        t0 = time.monotonic()
        self.proc = _spawn(argv, stdout=self.log_file, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{self.port}/v2/health/ready"
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.system.key} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - t0
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.system.key} not ready after {timeout_s:.0f} s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        return process_tree(self.proc.pid) if self.alive() else []

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def probe_ms(self, body: bytes) -> float | None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/embeddings", data=body,
            # no-cache: a cache hit would answer at once even with a backlog queued behind it
            headers={"content-type": "application/json", "cache-control": "no-cache"},
        )
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                r.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return None
        return (time.monotonic() - t0) * 1000

    def settle(self, body: bytes, limit_s: float = 30.0) -> float:
        """Wait until the server has worked off any backlog: two quick answers in a row."""
        t0, quick = time.monotonic(), 0
        while time.monotonic() - t0 < limit_s and quick < 2:
            ms = self.probe_ms(body)
            quick = quick + 1 if ms is not None and ms < 50 else 0
            if quick < 2:
                time.sleep(0.05)
        return time.monotonic() - t0

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.log_file.close()


# --- measurement -------------------------------------------------------------------------------
def run_loadgen(server: Server, workload: Path, rate: float, warmup_s: float, duration_s: float, start_line: int,
                out: Path, seed: int) -> dict:
    """One open-loop step; returns the loadgen report plus CPU, load and machine-noise readings."""
    cmd = [str(BIN["tailcut-loadgen"]), "--port", str(server.port), "--path", "/v1/embeddings",
           "--workload", str(workload), "--rate", f"{rate:.3f}", "--duration", str(duration_s),
           "--warmup", str(warmup_s), "--poisson", "--seed", str(seed), "--start", str(start_line),
           "--timeout", str(LOADGEN_TIMEOUT_S), "--out", str(out)]
    load = os.getloadavg()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_start = time.monotonic()
    p = _spawn(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(warmup_s)  # the measured window starts when the warm-up ends
    pids = server.pids()
    cpu0, (busy0, _), t0 = cpu_seconds(pids), machine_busy_seconds(), time.monotonic()
    try:
        _, err = p.communicate(timeout=warmup_s + duration_s + LOADGEN_TIMEOUT_S + 30)
    finally:
        _stop(p)
    cpu1, (busy1, _), t1 = cpu_seconds(pids), machine_busy_seconds(), time.monotonic()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"loadgen failed ({p.returncode}): {err.decode(errors='replace')[-2000:]}")
    rep = json.loads(out.read_text())
    client_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    client_wall = t1 - t_start
    window = t1 - t0
    server_cpu = cpu1 - cpu0
    client_in_window = client_cpu * window / client_wall if client_wall > 0 else 0.0
    other = max(0.0, (busy1 - busy0) - server_cpu - client_in_window)
    sent = max(1, rep["sent"])
    rep["derived"] = {
        "loadavg_before": [round(x, 2) for x in load],
        "server_cpu_s": round(server_cpu, 3),
        "server_cpu_s_per_1k": round(server_cpu / sent * 1000, 3),
        "server_cpu_cores": round(server_cpu / window, 3) if window > 0 else None,
        "client_cpu_s": round(client_cpu, 3),
        "client_cpu_s_per_1k": round(client_cpu / max(1, sent + rate * warmup_s) * 1000, 3),
        "other_cpu_cores": round(other / window, 3) if window > 0 else None,
        "window_s": round(window, 3),
    }
    return rep


def judge(rep: dict) -> dict:
    sent = rep["sent"]
    errors = sent - rep["ok"]
    err_rate = errors / sent if sent else 1.0
    lat = rep.get("latency_ms") or {}
    p99 = lat.get("p99", math.inf)
    return {
        "offered_rate": rep["offered_rate"],
        "achieved_rate": round(rep["achieved_rate"], 2),
        "sent": sent,
        "errors": errors,
        "error_rate": round(err_rate, 5),
        "p50_ms": lat.get("p50"),
        "p90_ms": lat.get("p90"),
        "p99_ms": lat.get("p99"),
        "p99_9_ms": lat.get("p99_9"),
        "max_ms": lat.get("max"),
        "status_counts": rep.get("status_counts", {}),
        "send_lag_p99_ms": (rep.get("send_lag_ms") or {}).get("p99"),
        "passed": bool(err_rate <= MAX_ERROR_RATE and p99 <= SLO_MS),
        **rep["derived"],
    }


def nice(rate: float) -> float:
    """Round to 3 significant digits so rates read well in tables."""
    if rate <= 0:
        return rate
    digits = 2 - int(math.floor(math.log10(rate)))
    return round(rate, max(0, digits))


def sweep(server: Server, wl_name: str, wl_path: Path, cfg: dict, fixed: float, cap: float, tmp: Path,
          probe_body: bytes) -> dict:
    steps: list[dict] = []
    state = {"line": 0}

    def step(rate: float) -> dict:
        rate = nice(rate)
        for s in steps:  # never measure the same rate twice
            if s["offered_rate"] == rate:
                return s
        out = tmp / f"{wl_name}-{server.system.key}-{len(steps)}.json"
        rep = run_loadgen(server, wl_path, rate, cfg["warmup_s"], cfg["duration_s"], state["line"], out,
                          seed=1 + len(steps))
        state["line"] = rep.get("next_line", 0)
        s = judge(rep)
        steps.append(s)
        mark = "pass" if s["passed"] else "FAIL"
        log(f"    {rate:8.1f} req/s  achieved {s['achieved_rate']:8.1f}  p50 {fmt_ms(s['p50_ms'])}  "
            f"p99 {fmt_ms(s['p99_ms'])}  errors {s['error_rate']:.2%}  server {s['server_cpu_cores']} cores  "
            f"other {s['other_cpu_cores']} cores  load {s['loadavg_before'][0]:.2f}  {mark}")
        if not server.alive():
            raise RuntimeError(f"{server.system.key} died during the step:\n{server.log_tail()}")
        if not s["passed"]:
            s["settle_s"] = round(server.settle(probe_body), 2)
        return s

    factor = cfg["factor"]
    first = step(fixed)
    lo = hi = None
    r = fixed
    if first["passed"]:
        lo = r
        while hi is None and r < cap:
            r = min(r * factor, cap)
            if step(r)["passed"]:
                lo = r
            else:
                hi = r
    else:
        hi = r
        while lo is None and r / factor >= MIN_RATE:
            r /= factor
            if step(r)["passed"]:
                lo = r
            else:
                hi = r
    for _ in range(cfg["refine"]):
        if lo is None or hi is None or hi / lo < 1.04:
            break
        mid = math.sqrt(lo * hi)
        if step(mid)["passed"]:
            lo = mid
        else:
            hi = mid
    best = None
    if lo is not None:
        passing = [s for s in steps if s["passed"] and s["offered_rate"] <= nice(lo) + 1e-9]
        best = max(passing, key=lambda s: s["offered_rate"]) if passing else None
    return {
        "fixed": first,
        "steps": sorted(steps, key=lambda s: s["offered_rate"]),
        "max_sustained": best,
        "bracket": [nice(lo) if lo else None, nice(hi) if hi else None],
        "capped": hi is None and lo is not None,
    }


def fmt_ms(x) -> str:
    return "     -  " if x is None else f"{x:7.1f}"


# --- engine ceiling ----------------------------------------------------------------------------
def needed_lens(hist: dict[str, int]) -> set[int]:
    need: set[int] = set()
    for k in hist:
        L = int(k)
        below = [g for g in CEILING_SEQ_LENS if g <= L]
        above = [g for g in CEILING_SEQ_LENS if g >= L]
        need.add(below[-1] if below else CEILING_SEQ_LENS[0])
        need.add(above[0] if above else CEILING_SEQ_LENS[-1])
    return need


def engine_ceiling(cfg: dict, wl_meta: dict, workloads: list[str]) -> dict:
    lens = sorted(set().union(*(needed_lens(wl_meta[w]["length_histogram"]) for w in workloads)))
    # Long sequences saturate the cores at small batches already; their biggest batches would
    # only cost minutes (bench-engine runs every cell at least 5 times).
    groups = [([L for L in lens if L < 64], cfg["ceiling_batches"]),
              ([L for L in lens if L >= 64], [b for b in cfg["ceiling_batches"] if b <= 32])]
    load = os.getloadavg()
    t0 = time.monotonic()
    grid: dict = {"cells": []}
    commands = []
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, _ = machine_busy_seconds()
    for group_lens, batches in groups:
        if not group_lens:
            continue
        cmd = [str(BIN["tailcut"]), "bench-engine", "--json", "--model-dir", str(MODEL_DIR), "--threads",
               str(THREADS), "--batch-sizes", *map(str, batches), "--seq-lens", *map(str, group_lens),
               "--seconds", str(cfg["ceiling_seconds"])]
        commands.append(" ".join(shlex.quote(c) for c in cmd))
        p = _spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=900)
        finally:
            _stop(p)
        if p.returncode != 0:
            raise RuntimeError(f"bench-engine failed: {err.decode(errors='replace')[-2000:]}")
        part = json.loads(out)
        grid = {**part, "cells": grid["cells"] + part["cells"]}
    busy1, _ = machine_busy_seconds()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t0
    own = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    other_cores = max(0.0, (busy1 - busy0) - own) / wall if wall > 0 else 0.0
    best: dict[int, dict] = {}
    for c in grid["cells"]:
        if c["seq_len"] not in best or c["sequences_per_s"] > best[c["seq_len"]]["sequences_per_s"]:
            best[c["seq_len"]] = c
    xs = sorted(best)

    def seconds_per_seq(L: int) -> float:  # best-batch time per sequence, linear between grid lengths
        if L <= xs[0]:
            return 1 / best[xs[0]]["sequences_per_s"]
        if L >= xs[-1]:
            return 1 / best[xs[-1]]["sequences_per_s"]
        hi = next(x for x in xs if x >= L)
        lo = max(x for x in xs if x <= L)
        t_lo, t_hi = 1 / best[lo]["sequences_per_s"], 1 / best[hi]["sequences_per_s"]
        return t_lo if hi == lo else t_lo + (t_hi - t_lo) * (L - lo) / (hi - lo)

    per_wl = {}
    for w in workloads:
        hist = {int(k): v for k, v in wl_meta[w]["length_histogram"].items()}
        n = sum(hist.values())
        mean_t = sum(v * seconds_per_seq(L) for L, v in hist.items()) / n
        med = wl_meta[w]["tokens_p50"]
        near = min(xs, key=lambda x: abs(math.log(x / med)))
        per_wl[w] = {
            "sequences_per_s": round(1 / mean_t, 1),
            "typical_len": med,
            "nearest_grid_len": near,
            "best_batch_at_nearest": best[near]["batch"],
            "sequences_per_s_at_nearest": round(best[near]["sequences_per_s"], 1),
        }
    return {"commands": commands, "loadavg_before": [round(x, 2) for x in load],
            "other_cpu_cores": round(other_cores, 3),
            "elapsed_s": round(time.monotonic() - t0, 1), "grid": grid, "per_workload": per_wl}


# --- report ------------------------------------------------------------------------------------
def machine_note() -> dict:
    model = platform.processor() or "unknown"
    info: dict[str, str] = {}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in lscpu.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
        model = info.get("Model name", model)
    except (OSError, subprocess.SubprocessError):
        pass
    details = ", ".join(
        f"{label} {info[k]}" for k, label in (("CPU family", "family"), ("Model", "model"),
                                              ("L3 cache", "L3"), ("Hypervisor vendor", "hypervisor"))
        if info.get(k)
    )
    if details:
        model = f"{model} ({details})"
    mem_kb = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "os": _os_name(),
        "python": platform.python_version(),
    }


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def fmt(x, digits=0, unit="") -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}{unit}"


def fmt_rate(x) -> str:
    return fmt(x, 1 if x is not None and x < 100 else 0)


def plots(result: dict, out_dir: Path) -> dict[str, str]:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import matplotlib.ticker  # noqa: PLC0415

    files = {}
    colors = {"tailcut": "#d62728", "tailcut-default": "#8c564b", "tailcut-nobatch": "#ff9896", "python-async": "#1f77b4",
              "python-single": "#aec7e8", "pytorch": "#2ca02c"}
    for wl, runs in result["runs"].items():
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
        for ax, key, title in ((axes[0], "p50_ms", "P50"), (axes[1], "p99_ms", "P99")):
            for sys_key, run in runs.items():
                if "steps" not in run:
                    continue
                steps = [s for s in run["steps"] if s.get(key) is not None]
                xs = [s["offered_rate"] for s in steps]
                ys = [s[key] for s in steps]
                ax.plot(xs, ys, marker="o", ms=4, color=colors.get(sys_key), label=result["systems"][sys_key]["label"])
                bad = [(x, y) for x, y, s in zip(xs, ys, steps) if s["error_rate"] > MAX_ERROR_RATE]
                if bad:
                    ax.scatter(*zip(*bad), marker="x", s=60, color="black", zorder=5)
            ax.axhline(SLO_MS, color="gray", ls="--", lw=1)
            ax.text(0.01, SLO_MS * 1.08, f"{SLO_MS:g} ms (P99 SLO)", color="gray", fontsize=8,
                    transform=ax.get_yaxis_transform())
            ax.axvline(result["fixed_rates"][wl], color="gray", ls=":", lw=1)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("offered rate (req/s, Poisson)")
            ax.set_ylabel(f"{title} latency (ms)")
            ax.set_title(f"{wl}: {title} latency vs offered rate")
            ax.grid(True, which="both", alpha=0.3)
        axes[1].legend(fontsize=8, loc="upper left")
        fig.text(0.01, 0.01, "x = more than 0.1 % errors; dotted line = common fixed rate", fontsize=8, color="gray")
        if result.get("preliminary"):
            fig.text(0.99, 0.01, "PRELIMINARY: machine busy", fontsize=9, color="red", ha="right")
        fig.tight_layout()
        path = out_dir / f"latency-{wl}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files[wl] = path.relative_to(REPO).as_posix()
    # Max sustained throughput per workload and system, engine ceiling as a marker.
    wls = list(result["runs"])
    sys_keys = [k for k in result["systems"] if any(k in result["runs"][w] for w in wls)]
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(wls) + 2), 4.5))
    width = 0.8 / max(1, len(sys_keys))
    for i, k in enumerate(sys_keys):
        vals = []
        for w in wls:
            ms = (result["runs"][w].get(k) or {}).get("max_sustained")
            vals.append(ms["offered_rate"] if ms else 0)
        ax.bar([j + i * width for j in range(len(wls))], vals, width, label=result["systems"][k]["label"],
               color=colors.get(k))
    ceil = [result["engine_ceiling"]["per_workload"][w]["sequences_per_s"] if result.get("engine_ceiling") else 0
            for w in wls]
    ax.scatter([j + width * (len(sys_keys) - 1) / 2 for j in range(len(wls))], ceil, marker="_", s=800, color="black",
               label="engine ceiling (no server)", zorder=5)
    ax.set_xticks([j + width * (len(sys_keys) - 1) / 2 for j in range(len(wls))], wls)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_ylabel(f"req/s at P99 ≤ {SLO_MS:g} ms (log scale)")
    ax.set_title("Max sustained throughput" + (" (PRELIMINARY: machine busy)" if result.get("preliminary") else ""),
                 color="red" if result.get("preliminary") else "black")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path = out_dir / "throughput.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    files["throughput"] = path.relative_to(REPO).as_posix()
    return files


def markdown(result: dict, figs: dict[str, str]) -> str:
    m = result["machine"]
    L = []
    quick = result["mode"] == "quick"
    L.append(f"## Results{' (quick mode)' if quick else ''}")
    L.append("")
    L.append(f"Generated by `{result['command']}` on {result['date']} in {result['elapsed_s'] / 60:.1f} min; "
             f"raw data: `{result['results_file']}`.")
    L.append("")
    v = result.get("versions", {})
    L.append(f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}, Linux {m['kernel']}. "
             f"Client (tailcut-loadgen) and server share the cores. "
             f"{(v.get('tailcut') or {}).get('version', 'tailcut')} (git {v.get('git', '?')}); "
             f"Python onnxruntime {v.get('python_onnxruntime', '?')}. Load average at start "
             f"{' / '.join(f'{x:.2f}' for x in result['loadavg_at_start'])}.")
    L.append("")
    if result["preliminary"]:
        L.append(f"> **Preliminary (machine busy):** {result['preliminary']} Treat these numbers as a check that "
                 "the harness works, not as results; rerun `make bench` on a quiet machine.")
        L.append("")
    if quick:
        L.append("> Quick mode: short steps (0.5 s warm-up + 2 s), ladder ×2, one refinement step, two workloads. "
                 "Use `make bench` for the numbers to quote.")
        L.append("")
    L.append(f"Max sustained = highest offered rate (Poisson arrivals) whose P99 ≤ {SLO_MS:g} ms with ≤ "
             f"{MAX_ERROR_RATE:.1%} errors, and in brackets the rate of 200 responses actually measured there; "
             "ratios use the offered rates. ✗ = the fixed rate failed the SLO for that system. CPU s/1k req = server CPU seconds "
             "per 1,000 requests at the fixed rate; peak RSS = the server's VmHWM over its whole run on that workload.")
    L.append("")
    systems_ = result["systems"]
    for wl, runs in result["runs"].items():
        meta = result["workloads"][wl]
        fixed = result["fixed_rates"][wl]
        ceil = (result.get("engine_ceiling") or {}).get("per_workload", {}).get(wl)
        L.append(f"### {wl}: {meta['description']}")
        L.append("")
        L.append(f"{meta['requests']:,} request bodies ({meta['distinct_texts']:,} distinct), tokens p10/p50/p90/max "
                 f"{meta['tokens_p10']}/{meta['tokens_p50']}/{meta['tokens_p90']}/{meta['tokens_max']}"
                 + (f"; Zipf s={meta['zipf_s']}: top text {meta['top1_share']:.1%} of requests, "
                    f"{meta['repeat_share']:.1%} repeats" if wl == "zipf" else "") + ".")
        L.append("")
        L.append(f"| system | max sustained req/s offered (achieved) | P99 there (ms) | P50 @ {fixed:g}/s (ms) | P99 @ {fixed:g}/s (ms) "
                 f"| P99.9 @ {fixed:g}/s (ms) | errors @ {fixed:g}/s | CPU s/1k req @ {fixed:g}/s | peak RSS (MiB) | start-up (s) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for k, run in runs.items():
            label = systems_[k]["label"]
            if "error" in run:
                L.append(f"| {label} | failed: {run['error'][:80]} | | | | | | | | |")
                continue
            ms, fx = run.get("max_sustained"), run["fixed"]
            if ms:
                thr = (("≥ " if run.get("capped") else "") + fmt_rate(ms["offered_rate"])
                       + f" ({fmt_rate(ms['achieved_rate'])})")
                p99_there = fmt(ms["p99_ms"], 1)
            else:
                thr, p99_there = f"< {MIN_RATE:g}", "–"
            L.append(f"| {label} | {thr} | {p99_there} | {fmt(fx['p50_ms'], 1)} | {fmt(fx['p99_ms'], 1)}"
                     f"{'' if fx['passed'] else ' ✗'} | {fmt(fx.get('p99_9_ms'), 1)} | {fx['error_rate']:.2%} | {fmt(fx['server_cpu_s_per_1k'], 2)} "
                     f"| {fmt(run.get('peak_rss_mib'), 0)} | {fmt(run.get('startup_s'), 1)} |")
        if ceil:
            L.append(f"| engine ceiling (no server) | {fmt_rate(ceil['sequences_per_s'])} | – | – | – | – | – | – | – | – |")
        L.append("")
        r = result["ratios"].get(wl, {})
        parts = []
        if r.get("tailcut_vs_python_async") is not None:
            parts.append(f"tailcut / Python async stack = **{r['tailcut_vs_python_async']:.2f}×**")
        if r.get("tailcut_vs_python_single") is not None:
            parts.append(f"tailcut / Python per-request = {r['tailcut_vs_python_single']:.2f}×")
        if r.get("tailcut_default_vs_python_async") is not None:
            parts.append(f"tailcut with product defaults (cache) / Python async = "
                         f"{r['tailcut_default_vs_python_async']:.2f}×")
        if r.get("tailcut_vs_ceiling") is not None:
            parts.append(f"tailcut / engine ceiling = **{r['tailcut_vs_ceiling']:.0%}**")
        if r.get("p99_at_fixed_python_async_over_tailcut") is not None:
            parts.append(f"P99 at {fixed:g}/s: Python async / tailcut = {r['p99_at_fixed_python_async_over_tailcut']:.1f}×")
        if parts:
            L.append("Ratios (max sustained throughput): " + "; ".join(parts) + ".")
            L.append("")
        if ceil:
            L.append(f"Engine ceiling: best batch size per token length from `tailcut bench-engine`, combined over this "
                     f"workload's length histogram (at the median {ceil['typical_len']} tokens ≈ grid {ceil['nearest_grid_len']}: "
                     f"{fmt(ceil['sequences_per_s_at_nearest'], 0)} seq/s at batch {ceil['best_batch_at_nearest']}).")
            L.append("")
        notes = []
        for k, run in runs.items():
            mt = run.get("metrics") or {}
            if mt.get("mean_batch_size"):
                rej = int(mt.get("tailcut_queue_rejected_total", 0))
                notes.append(f"{systems_[k]['label']}: mean batch {mt['mean_batch_size']:.2f} rows"
                             + (f", {mt['mean_infer_ms']:.1f} ms per batch" if mt.get("mean_infer_ms") else "")
                             + " over the sweep"
                             + (f", {rej} requests rejected by the queue bound" if rej else ""))
        if notes:
            L.append("tailcut's own metrics: " + "; ".join(notes) + ".")
            L.append("")
        errs = []
        for k, run in runs.items():
            codes: dict[str, int] = {}
            for st in run.get("steps", []):
                for code, n in st.get("status_counts", {}).items():
                    if code != "200":
                        codes[code] = codes.get(code, 0) + n
                unfinished = st["errors"] - sum(n for c, n in st.get("status_counts", {}).items() if c != "200")
                if unfinished > 0:
                    codes["no answer"] = codes.get("no answer", 0) + unfinished
            if codes:
                errs.append(f"{systems_[k]['label']}: " + ", ".join(f"{n} × {c}" for c, n in sorted(codes.items())))
        if errs:
            L.append("Failed requests over the whole sweep (all steps): " + "; ".join(errs) + ".")
            L.append("")
        if wl in figs:
            L.append(f"![{wl}: latency vs offered rate]({md_link(figs[wl])})")
            L.append("")
    if "throughput" in figs:
        L.append(f"![max sustained throughput]({md_link(figs['throughput'])})")
        L.append("")
    L.append("Settings in this run:")
    L.append("")
    ran = {k for runs in result["runs"].values() for k in runs}
    for k, s in systems_.items():
        if k in ran:
            L.append(f"- **{s['label']}**: {s['settings']}.")
    L.append(f"- **Load**: {result['settings']['description']}")
    if result["warnings"]:
        L.append("")
        L.append("Warnings from this run:")
        L.append("")
        for w in result["warnings"]:
            L.append(f"- {w}")
    return "\n".join(L) + "\n"


def md_link(repo_path: str) -> str:
    """A file named relative to the repository, as a link from RESULTS_MD."""
    return Path(os.path.relpath(REPO / repo_path, RESULTS_MD.parent)).as_posix()


def write_markdown(section: str) -> None:
    block = f"{BEGIN}\n{section}{END}"
    if RESULTS_MD.exists():
        text = RESULTS_MD.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            text = head + block + tail
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        text = "# Benchmarks\n\n" + block + "\n"
    RESULTS_MD.write_text(text)


# --- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="≈3 minutes: two workloads, short steps")
    ap.add_argument("--workloads", default=None, help="comma-separated (default: per mode)")
    ap.add_argument("--systems", default=None, help="comma-separated keys (default: all available)")
    ap.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON"),
                    help="interpreter with torch + sentence-transformers: adds the PyTorch eager row")
    ap.add_argument("--python-arg", action="append", default=[], help="extra argument for the Python baselines")
    ap.add_argument("--python-variant", action="append", default=[], metavar="NAME=ARGS",
                    help="add a row: the Python async stack with extra arguments, e.g. w5='--window-ms 5'")
    ap.add_argument("--fixed-rate", action="append", default=[], metavar="WORKLOAD=RATE")
    ap.add_argument("--no-markdown", action="store_true", help="do not touch docs/benchmarks/side-by-side.md")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the engine ceiling")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default bench/results/<date>.json)")
    ap.add_argument("--command", default=None, help="how this run was started, for the report (make sets it)")
    ap.add_argument("--render", type=Path, default=None, metavar="RESULTS_JSON",
                    help="measure nothing: redraw the plots and side-by-side.md's section from a results file")
    args = ap.parse_args(argv)

    if args.render:
        result = json.loads(args.render.read_text())
        figs = plots(result, RESULTS_DIR)
        section = markdown(result, figs)
        if not args.no_markdown:
            write_markdown(section)
        print(section)
        return 0

    mode = "quick" if args.quick else "full"
    cfg = dict(MODES[mode])
    workloads = args.workloads.split(",") if args.workloads else cfg["workloads"]
    fixed_rates = dict(FIXED_RATES)
    for fr in args.fixed_rate:
        k, v = fr.split("=", 1)
        fixed_rates[k] = float(v)
    for binary in ("tailcut", "tailcut-loadgen"):
        if not (BUILD / binary).exists():
            sys.exit(f"run_bench: {BUILD / binary} is missing; run `make build` (or `make bench`)")
    meta_path = WORKLOADS_DIR / "workloads.json"
    if not meta_path.exists():
        sys.exit("run_bench: no workloads; run `.venv-bench/bin/python bench/make_workloads.py` (or `make bench`)")
    wl_meta = json.loads(meta_path.read_text())["workloads"]
    for w in workloads:
        if w not in wl_meta or not (WORKLOADS_DIR / f"{w}.jsonl").exists():
            sys.exit(f"run_bench: workload {w!r} not found in {WORKLOADS_DIR}")

    started = dt.datetime.now().astimezone()
    stamp = started.strftime("%Y-%m-%d-%H%M") + ("-quick" if args.quick else "")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out_path = args.out or RESULTS_DIR / f"{stamp}.json"
    tmp = RESULTS_DIR / f"{stamp}.tmp"  # step reports and server logs (ignored by git)
    tmp.mkdir(parents=True, exist_ok=True)

    versions = snapshot_binaries(tmp)
    all_systems = systems(args, fp32_repository(tmp))
    keys = args.systems.split(",") if args.systems else list(all_systems)
    unknown = [k for k in keys if k not in all_systems]
    if unknown:
        sys.exit(f"run_bench: unknown systems {unknown}; known: {list(all_systems)}")
    # Systems limited to some workloads (tailcut's product defaults: zipf) run on the others
    # only when named explicitly.
    plan = {w: [k for k in keys if args.systems or all_systems[k].workloads is None or w in all_systems[k].workloads]
            for w in workloads}
    warnings: list[str] = []
    load0 = os.getloadavg()
    log(f"run_bench: {mode} mode, workloads {workloads}, systems {keys}")
    log(f"run_bench: load average before starting {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    if load0[0] > 0.5:
        w = (f"load average was {load0[0]:.2f} (1 min) before the run started: other work is competing for the "
             f"{os.cpu_count()} cores, so latencies and throughputs are pessimistic and noisy")
        log("run_bench: WARNING: " + w)
        warnings.append(w)

    sys_objs = {k: all_systems[k] for k in keys}
    result = {
        "schema": 1,
        "mode": mode,
        "date": started.isoformat(timespec="seconds"),
        "command": args.command or "bench/run_bench.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "argv": sys.argv,
        "machine": machine_note(),
        "versions": versions,
        "loadavg_at_start": [round(x, 2) for x in load0],
        "settings": {
            "slo_p99_ms": SLO_MS, "max_error_rate": MAX_ERROR_RATE, "threads": THREADS, **cfg,
            "arrivals": "poisson", "loadgen_timeout_s": LOADGEN_TIMEOUT_S,
            "description": (f"open-loop Poisson arrivals from tailcut-loadgen, one request (one text) per body, "
                            f"latency from scheduled send time; each step {cfg['warmup_s']:g} s warm-up + "
                            f"{cfg['duration_s']:g} s measured; ladder ×{cfg['factor']:g} from the fixed rate, "
                            f"{cfg['refine']} bisection steps; each server warmed up {cfg['server_warmup_s']:g} s "
                            f"at the fixed rate after start-up."),
        },
        "fixed_rates": {w: fixed_rates[w] for w in workloads},
        "workloads": {w: {k: v for k, v in wl_meta[w].items() if k != "length_histogram"} for w in workloads},
        "systems": {k: {"label": s.label, "settings": s.settings, "argv": s.argv(0)} for k, s in sys_objs.items()},
        "engine_ceiling": None,
        "runs": {w: {} for w in workloads},
        "ratios": {},
        "warnings": warnings,
    }

    def handle_term(signum, frame):  # noqa: ARG001
        raise SystemExit(f"run_bench: signal {signum}")

    signal.signal(signal.SIGTERM, handle_term)
    t_start = time.monotonic()
    try:
        if not args.no_ceiling:
            log("run_bench: engine ceiling (tailcut bench-engine, no server)")
            result["engine_ceiling"] = engine_ceiling(cfg, wl_meta, workloads)
            oc = result["engine_ceiling"]["other_cpu_cores"]
            log(f"    ({result['engine_ceiling']['elapsed_s']:.0f} s; other processes used {oc:.2f} cores meanwhile)")
            if oc > 0.1:
                warnings.append(f"other processes used {oc:.2f} cores while the engine ceiling was measured: "
                                "the ceiling (and the ratios to it) are too low")
            for w, c in result["engine_ceiling"]["per_workload"].items():
                log(f"    {w:7} {c['sequences_per_s']:8.1f} seq/s (median {c['typical_len']} tokens: "
                    f"{c['sequences_per_s_at_nearest']:.0f} seq/s at batch {c['best_batch_at_nearest']})")
        for w in workloads:
            wl_path = WORKLOADS_DIR / f"{w}.jsonl"
            probe_body = wl_path.open().readline().encode()
            ceil = (result["engine_ceiling"] or {}).get("per_workload", {}).get(w, {}).get("sequences_per_s")
            # A safety stop for the ladder only: no server without a cache can beat the engine.
            cap = min(MAX_RATE, max(1000.0, 3 * ceil)) if ceil else MAX_RATE
            for k in plan[w]:
                s = sys_objs[k]
                log(f"run_bench: {w} × {s.label}")
                server = Server(s, tmp / f"{w}-{k}.log")
                run: dict = {}
                try:
                    run["startup_s"] = round(server.start(), 2)
                    run["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
                    run_loadgen(server, wl_path, fixed_rates[w], 0.0, cfg["server_warmup_s"], 0,
                                tmp / f"{w}-{k}-warmup.json", seed=99)
                    server.settle(probe_body)
                    run.update(sweep(server, w, wl_path, cfg, fixed_rates[w], cap, tmp, probe_body))
                    pids = server.pids()
                    run["peak_rss_mib"] = round(vm_kb(pids, "VmHWM") / 1024, 1)
                    run["rss_end_mib"] = round(vm_kb(pids, "VmRSS") / 1024, 1)
                    if k.startswith("tailcut"):
                        run["metrics"] = scrape_metrics(server.port)
                    ms = run.get("max_sustained")
                    log(f"  => max sustained {ms['achieved_rate'] if ms else '-'} req/s; P99 at {fixed_rates[w]:g}/s "
                        f"{fmt(run['fixed']['p99_ms'], 1)} ms; peak RSS {run['peak_rss_mib']} MiB")
                except Exception as e:  # noqa: BLE001 - one system failing must not lose the others
                    run["error"] = str(e)[:2000]
                    msg = f"{w} × {k}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                    warnings.append(msg)
                    log(f"  !! {msg}")
                finally:
                    server.stop()
                result["runs"][w][k] = run
    finally:
        stop_all()
        import shutil  # noqa: PLC0415

        shutil.rmtree(tmp / "bin", ignore_errors=True)  # ≈ 100 MB of binary copies; the logs stay
    result["elapsed_s"] = round(time.monotonic() - t_start, 1)

    # Ratios and noise assessment.
    others = []
    for w, runs in result["runs"].items():
        def thr(k):
            ms = (runs.get(k) or {}).get("max_sustained")
            return ms["offered_rate"] if ms else None

        r = {}
        tc, pa, ps = thr("tailcut"), thr("python-async"), thr("python-single")
        ceil = (result["engine_ceiling"] or {}).get("per_workload", {}).get(w, {}).get("sequences_per_s")
        if tc and pa:
            r["tailcut_vs_python_async"] = round(tc / pa, 3)
        if tc and ps:
            r["tailcut_vs_python_single"] = round(tc / ps, 3)
        if tc and ceil:
            r["tailcut_vs_ceiling"] = round(tc / ceil, 3)
        td = thr("tailcut-default")
        if td and pa:
            r["tailcut_default_vs_python_async"] = round(td / pa, 3)
        f_tc = (runs.get("tailcut") or {}).get("fixed", {}).get("p99_ms")
        f_pa = (runs.get("python-async") or {}).get("fixed", {}).get("p99_ms")
        if f_tc and f_pa:
            r["p99_at_fixed_python_async_over_tailcut"] = round(f_pa / f_tc, 2)
        result["ratios"][w] = r
        for run in runs.values():
            others += [s["other_cpu_cores"] for s in run.get("steps", []) if s.get("other_cpu_cores") is not None]
    others.sort()
    median_other = others[len(others) // 2] if others else 0.0
    result["other_cpu_cores_median"] = median_other
    reasons = []
    if load0[0] > 0.5:
        reasons.append(f"the load average was {load0[0]:.2f} before the run")
    if median_other > 0.1:
        reasons.append(f"other processes used a median {median_other:.2f} of the {os.cpu_count()} cores during the steps")
        warnings.append(f"other processes used a median {median_other:.2f} cores during the measured windows")
    ceil_other = (result["engine_ceiling"] or {}).get("other_cpu_cores", 0.0)
    if ceil_other > 0.1:
        reasons.append(f"other processes used {ceil_other:.2f} cores while the engine ceiling was measured")
    lag = [s["send_lag_p99_ms"] for runs in result["runs"].values() for run in runs.values()
           for s in run.get("steps", []) if s.get("send_lag_p99_ms") is not None]
    if lag and max(lag) > 5:
        warnings.append(f"the load generator's timer ran up to {max(lag):.1f} ms late (P99 of a step): the client was "
                        "short of CPU in some steps, which inflates those latencies")
    text = "; ".join(reasons) + "."
    result["preliminary"] = text[0].upper() + text[1:] if reasons else None
    result["results_file"] = out_path.relative_to(REPO).as_posix() if out_path.is_relative_to(REPO) else str(out_path)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    log(f"run_bench: wrote {result['results_file']}")
    figs = {}
    try:
        figs = plots(result, RESULTS_DIR)
    except Exception as e:  # noqa: BLE001
        warnings.append(f"plots failed: {e}")
        log(f"run_bench: plots failed: {e}")
    section = markdown(result, figs)
    if not args.no_markdown:
        write_markdown(section)
        log(f"run_bench: updated {RESULTS_MD.relative_to(REPO)}")
    print()
    print(section)
    log(f"run_bench: done in {result['elapsed_s'] / 60:.1f} min")
    return 0 if not any("error" in run for runs in result["runs"].values() for run in runs.values()) else 1


def snapshot_binaries(tmp: Path) -> dict:
    """Copy tailcut and tailcut-loadgen into the run's folder and use the copies; record versions."""
    import hashlib  # noqa: PLC0415
    import shutil  # noqa: PLC0415

    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    info = {}
    for name, src in list(BIN.items()):
        dst = bin_dir / name
        shutil.copy2(src, dst)
        BIN[name] = dst
        info[name] = {"sha256_16": hashlib.sha256(dst.read_bytes()).hexdigest()[:16],
                      "built": dt.datetime.fromtimestamp(src.stat().st_mtime).isoformat(timespec="seconds")}
    try:
        info["tailcut"]["version"] = subprocess.run([str(BIN["tailcut"]), "--version"], capture_output=True,
                                                    text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        info["git"] = head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import onnxruntime  # noqa: PLC0415

        info["python_onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    return info


def scrape_metrics(port: int) -> dict:
    """A few of tailcut's own counters: batch sizes and rejections over the whole sweep."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except (urllib.error.URLError, OSError):
        return {}
    vals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        base = name.split("{", 1)[0]
        if base in ("tailcut_batch_size_sum", "tailcut_batch_size_count", "tailcut_queue_rejected_total",
                    "tailcut_deadline_exceeded_total", "tailcut_http_refused_connections_total",
                    "tailcut_http_timeouts_total", "tailcut_http_protocol_errors_total"):
            vals[base] = vals.get(base, 0) + float(value)
        elif base in ("tailcut_stage_duration_seconds_sum", "tailcut_stage_duration_seconds_count") and 'stage="' in name:
            stage = name.split('stage="', 1)[1].split('"', 1)[0]
            if stage in ("infer", "queue"):
                key = f"{stage}_{base.rsplit('_', 1)[1]}"
                vals[key] = vals.get(key, 0) + float(value)
        elif base == "tailcut_requests_total" and 'route="/v1/embeddings"' in name:
            status = name.split('status="', 1)[1].split('"', 1)[0] if 'status="' in name else "?"
            vals[f"requests_status_{status}"] = vals.get(f"requests_status_{status}", 0) + float(value)
    if vals.get("tailcut_batch_size_count"):
        vals["mean_batch_size"] = round(vals["tailcut_batch_size_sum"] / vals["tailcut_batch_size_count"], 2)
    for stage in ("infer", "queue"):
        if vals.get(f"{stage}_count"):
            vals[f"mean_{stage}_ms"] = round(1000 * vals[f"{stage}_sum"] / vals[f"{stage}_count"], 2)
    return vals


if __name__ == "__main__":
    sys.exit(main())
