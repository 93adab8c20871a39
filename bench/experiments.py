#!/usr/bin/env python3
"""Focused experiments beside the side-by-side benchmark (bench/run_bench.py), each one
command that starts its own servers on loopback, drives them with the open-loop load
generator and prints (and saves) a JSON report for BENCHMARKS.md:

  capacity    the highest rate tailcut sustains at P99 <= 86 ms for one workload
  load-step   low -> high -> low offered rate, precision controller on vs pinned FP32:
              per-second P99 and the active variant (issue: quantization)
  overload    2x and 5x the sustainable rate for 60 s: latency of what is admitted, how fast
              the rest is refused, peak memory, and recovery afterwards; slow clients and
              idle connections (issue: hardening); --neighbour N runs N nice-19 compiler
              loops on the machine during each phase (issue: overload answers stay honest)
  soak        70 % of the sustainable rate on the Zipf workload for 30 minutes: memory over
              time, errors, P99 of the first vs the last 5 minutes (issue: hardening)
  cache       the Zipf workload with the cache off / L1 / L1+Redis, the P99 of cache hits,
              and first-response latency and QPS multi-level vs single tier (issue: cache)
  variants    per precision variant: P99 at fixed rates through the server, short and medium
              texts (issue: quantization)
  precision-cache  the Zipf workload with the cache on: capacity with the precision
              controller on vs off (issue: vectors that stay consistent)
  io-isolation  small requests on one connection, alone and while another connection sends
              4 MiB bodies that cost only parsing: their latency (issue: robustness)
  faults      verified load (every vector checked) while Redis is killed, paused and
              restarted, the model file is replaced and reloaded, and SIGTERM arrives: failed
              and wrong answers per fault (issue: hardening)

Run them on a quiet machine, e.g. `.venv-bench/bin/python bench/experiments.py overload`.
Results go to bench/results/<experiment>-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_bench as rb  # noqa: E402  (shares the binaries, workloads and process helpers)

SLO_MS = rb.SLO_MS
RESULTS = rb.RESULTS_DIR


# --- servers ------------------------------------------------------------------------------------
class Tailcut(rb.Server):
    """One `tailcut serve` on a free loopback port (run_bench's Server: start-up, readiness
    and stop), as a context manager with metric helpers."""

    def __init__(self, flags: list[str], log: Path, repository: Path | None = None):
        repo = str(repository or rb.MODEL_DIR.parent)
        system = rb.System("tailcut", "tailcut", " ".join(flags), lambda port: [
            str(rb.BIN["tailcut"]), "serve", "--host", "127.0.0.1", "--port", str(port), "--grpc-port", "0",
            "--model-repository", repo, *flags])
        super().__init__(system, log)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as r:
            return r.read().decode()

    def metric(self, name: str, **labels) -> float:
        return metric_total(self.metrics(), name, **labels) or 0.0

    def rss_kb(self, key: str = "VmRSS") -> int:
        return rb.vm_kb(rb.process_tree(self.proc.pid), key)


class RedisServer:
    def __init__(self, tmp: Path):
        self.port = rb.free_port()
        self.dir = tmp

    def __enter__(self):
        return self.start()

    def start(self):
        self.proc = rb._spawn(["redis-server", "--port", str(self.port), "--save", "",
                               "--appendonly", "no", "--dir", str(self.dir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def __exit__(self, *exc):
        rb._stop(self.proc)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


class Neighbour:
    """A CPU-hungry neighbour process on the same machine, as when a build shares it: `count`
    shell loops at nice 19, each compiling one of this repository's larger sources
    (`g++ -O2 -c`, the command from build/compile_commands.json, no ccache) over and over
    into a temporary folder. A real compiler rather than a busy loop: it also contends for
    caches and memory bandwidth the way the builds that share the benchmark machine do."""

    SOURCE = "src/core/text_embedding_servable.cc"

    def __init__(self, count: int, tmp: Path):
        self.count = count
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []
        entries = json.loads((rb.BUILD / "compile_commands.json").read_text())
        entry = next(e for e in entries if e["file"].endswith(self.SOURCE))
        args = entry.get("arguments") or shlex.split(entry["command"])
        out = args.index("-o")
        self.args, self.out_index = args, out + 1  # Every other path in it is absolute.

    def __enter__(self):
        for i in range(self.count):
            args = list(self.args)
            args[self.out_index] = str(self.tmp / f"neighbour-{i}.o")
            loop = f"while :; do {shlex.join(args)} >/dev/null 2>&1; done"
            self.procs.append(rb._spawn(["nice", "-n", "19", "sh", "-c", loop]))
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            rb._stop(p, grace_s=2.0)

    @staticmethod
    def nice_cpu_seconds() -> float:
        """CPU seconds the machine spent in niced processes since boot (/proc/stat `nice`)."""
        return int(Path("/proc/stat").read_text().split()[2]) / os.sysconf("SC_CLK_TCK")

    def describe(self) -> dict:
        return {"processes": self.count, "nice": 19, "command": shlex.join(self.args)}


def fp32_only_repo(tmp: Path) -> Path:
    return rb.fp32_repository(tmp)


def variant_repo(tmp: Path, variant: str) -> Path:
    """The default model with `variant` as its default variant (and only that one loaded)."""
    src = rb.MODEL_DIR
    dst = tmp / f"models-{variant}" / src.name
    dst.mkdir(parents=True, exist_ok=True)
    text = (src / "model.yaml").read_text()
    file = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"- name: {variant}":
            file = lines[i + 1].split(":", 1)[1].strip()
    if file is None:
        raise SystemExit(f"model.yaml lists no variant {variant}")
    for f in ("tokenizer.json", "vocab.txt", file):
        if not (dst / f).exists():
            (dst / f).symlink_to((src / f).resolve())
    head = [ln for ln in lines if not ln.startswith((" ", "-", "variants:", "default_variant:"))]
    head = [ln for ln in head if not ln.startswith("file:")]
    precision = "int8" if "int8" in variant else ("fp16" if "fp16" in variant else "fp32")
    (dst / "model.yaml").write_text("\n".join(head) + f"\nfile: {file}\nvariants:\n  - name: {variant}\n"
                                    f"    file: {file}\n    precision: {precision}\n")
    return dst.parent


# --- load ---------------------------------------------------------------------------------------
def loadgen(port: int, workload: str, rate: float, duration: float, warmup: float = 2.0,
            timeline: bool = False, start: int = 0, headers: list[str] | None = None,
            connections: int = 256, timeout: float = 15.0) -> dict:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    cmd = [str(rb.BIN["tailcut-loadgen"]), "--port", str(port), "--workload",
           str(rb.WORKLOADS_DIR / f"{workload}.jsonl"), "--rate", f"{rate:.3f}", "--duration",
           str(duration), "--warmup", str(warmup), "--poisson", "--start", str(start),
           "--connections", str(connections), "--timeout", str(timeout), "--out", str(out)]
    if timeline:
        cmd.append("--timeline")
    for h in headers or []:
        cmd += ["-H", h]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rep = json.loads(out.read_text())
    out.unlink()
    return rep


def passed(rep: dict) -> bool:
    sent = max(1, rep["sent"])
    return (sent - rep["ok"]) / sent <= rb.MAX_ERROR_RATE and \
        rep.get("latency_ms", {}).get("p99", 1e9) <= SLO_MS


def capacity(port: int, workload: str, start_rate: float, duration: float = 10.0) -> float:
    """Highest passing rate: climb by 1.4x until a step fails, then bisect three times."""
    good, bad, rate = 0.0, None, start_rate
    while bad is None:
        ok = passed(loadgen(port, workload, rate, duration))
        print(f"  capacity {workload} {rate:.0f}/s: {'pass' if ok else 'fail'}", flush=True)
        if ok:
            good, rate = rate, rate * 1.4
        else:
            bad = rate
        if rate > 20000:
            break
    for _ in range(3):
        if bad is None:
            break
        mid = (good + bad) / 2
        ok = passed(loadgen(port, workload, mid, duration))
        print(f"  capacity {workload} {mid:.0f}/s: {'pass' if ok else 'fail'}", flush=True)
        good, bad = (mid, bad) if ok else (good, mid)
    return good


def summary(rep: dict) -> dict:
    lat, ok = rep.get("latency_ms", {}), rep.get("ok_latency_ms", {})
    return {"offered": rep["offered_rate"], "achieved": round(rep["achieved_rate"], 1),
            "sent": rep["sent"], "ok": rep["ok"], "status": rep.get("status_counts", {}),
            "p50_ms": lat.get("p50"), "p99_ms": lat.get("p99"), "p99_9_ms": lat.get("p99_9"),
            "max_ms": lat.get("max"), "ok_p99_ms": ok.get("p99"),
            "status_latency_ms": rep.get("status_latency_ms", {})}


# --- experiments --------------------------------------------------------------------------------
def exp_capacity(args, tmp: Path) -> dict:
    flags = ["--cache.enabled=false", "--precision.mode", "off", *args.flags]
    with Tailcut(flags, tmp / "capacity.log", fp32_only_repo(tmp)) as s:
        loadgen(s.port, args.workload, args.start_rate / 2, 5)
        return {"workload": args.workload, "flags": flags,
                "max_rate": capacity(s.port, args.workload, args.start_rate)}


def exp_load_step(args, tmp: Path) -> dict:
    phases = [(args.low, args.phase_s), (args.high, args.phase_s), (args.low, args.phase_s)]
    out = {"phases": phases, "workload": args.workload}
    for label, mode in (("controller", "slo"), ("pinned_fp32", "off")):
        flags = ["--cache.enabled=false", "--precision.mode", mode,
                 "--requests.max_queue_delay_millis", "0", "--precision.min_dwell_millis", "5000"]
        with Tailcut(flags, tmp / f"step-{label}.log") as s:
            loadgen(s.port, args.workload, args.low, 5)  # warm
            samples, stop = [], threading.Event()

            def poll():
                t0 = time.monotonic()
                while not stop.is_set():
                    active = None
                    for line in s.metrics().splitlines():
                        if line.startswith("tailcut_precision_active{") and line.endswith(" 1"):
                            active = line.split('variant="')[1].split('"')[0]
                    samples.append({"t": round(time.monotonic() - t0, 1), "variant": active})
                    time.sleep(0.5)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            timeline, offset, start = [], 0, 0
            for rate, secs in phases:
                rep = loadgen(s.port, args.workload, rate, secs, warmup=0.0, timeline=True,
                              start=start)
                start = rep.get("next_line", 0)
                for row in rep["timeline"]:
                    timeline.append({"second": offset + row["second"], "offered": rate,
                                     "sent": row["sent"], "non_200": row["non_200"],
                                     "p99_ms": row["latency_ms"].get("p99")})
                offset += secs
            stop.set()
            poller.join()
            out[label] = {"timeline": timeline, "variant_samples": samples,
                          "switches": s.metric("tailcut_precision_switches_total")}
    return out


def plot_load_step(result: dict, png: Path) -> None:
    """Per-second P99 (controller vs pinned FP32) over the offered rate, with the variant the
    controller served shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, ax_rate) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    for label, color in (("controller", "tab:blue"), ("pinned_fp32", "tab:red")):
        tl = result[label]["timeline"]
        ax.plot([r["second"] for r in tl], [r["p99_ms"] for r in tl], color=color,
                label={"controller": "controller (slo)", "pinned_fp32": "pinned FP32"}[label])
    samples = result["controller"]["variant_samples"]
    for a, b in zip(samples, samples[1:]):
        if a["variant"] and a["variant"] != "fp32":
            ax.axvspan(a["t"], b["t"], color="tab:green", alpha=0.15, lw=0)
    ax.axhline(SLO_MS, color="grey", ls="--", lw=1, label=f"SLO {SLO_MS:g} ms")
    ax.set_ylabel("P99 per second (ms)")
    ax.set_title(f"load step on '{result['workload']}': shaded = controller serving int8")
    ax.legend(loc="upper left")
    tl = result["controller"]["timeline"]
    ax_rate.step([r["second"] for r in tl], [r["offered"] for r in tl], where="post", color="black")
    ax_rate.set_ylabel("offered req/s")
    ax_rate.set_xlabel("second")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def exp_overload(args, tmp: Path) -> dict:
    flags = ["--cache.enabled=false", "--precision.mode", "off", *args.flags]
    out: dict = {"workload": args.workload, "flags": flags}
    with Tailcut(flags, tmp / "overload.log", fp32_only_repo(tmp)) as s:
        sustainable = args.sustainable or capacity(s.port, args.workload, args.start_rate)
        out["sustainable_rate"] = sustainable
        base_rss = s.rss_kb()
        if args.neighbour:
            out["neighbour"] = Neighbour(args.neighbour, tmp).describe()
        for factor in (2, 5):
            # Enough client connections that the server, not the client's pool, decides what
            # waits: with 256 the excess queues inside the load generator (an open-loop client
            # with bounded concurrency), and every latency then includes that client-side
            # backlog. 1,000 stays under server.max_connections (1,024).
            # With --neighbour the compilers start just before the phase (the server has
            # measured its batches on a quiet machine) and run through the recovery.
            neighbour = Neighbour(args.neighbour, tmp) if args.neighbour else nullcontext()
            with neighbour:
                nice_before = Neighbour.nice_cpu_seconds()
                scrape = s.metrics()
                rep = loadgen(s.port, args.workload, sustainable * factor, args.seconds,
                              warmup=0.0, timeline=True, connections=args.connections)
                during = s.metrics()
                nice_cpu = Neighbour.nice_cpu_seconds() - nice_before
                # Recovery: back to 70 % at once; per-second P99 shows how soon it is normal.
                rec = loadgen(s.port, args.workload, sustainable * 0.7, 20, warmup=0.0,
                              timeline=True)
            out[f"x{factor}"] = {
                # CPU the niced neighbour got during the overload phase, per second.
                "neighbour_cpu_per_s": round(nice_cpu / args.seconds, 2),
                **summary(rep),
                "connections": args.connections,
                "max_connections_used": rep.get("max_connections_used"),
                # At the server, this phase only (bucket upper bounds): time in the model's
                # queue, and read-to-response-ready for every answer (200 and 429 alike).
                "server_queue_p99_ms": hist_quantile(during, "tailcut_stage_duration_seconds",
                                                     {"stage": "queue"}, 0.99, since=scrape),
                # One batch's run time: the "plus one batch" of the admitted-latency bound.
                "server_batch_p50_ms": hist_quantile(during, "tailcut_stage_duration_seconds",
                                                     {"stage": "infer"}, 0.50, since=scrape),
                "server_batch_p99_ms": hist_quantile(during, "tailcut_stage_duration_seconds",
                                                     {"stage": "infer"}, 0.99, since=scrape),
                "server_total_p50_ms": hist_quantile(during, "tailcut_request_stage_duration_seconds",
                                                     {"route": "/v1/embeddings", "stage": "total"},
                                                     0.50, since=scrape),
                "server_total_p99_ms": hist_quantile(during, "tailcut_request_stage_duration_seconds",
                                                     {"route": "/v1/embeddings", "stage": "total"},
                                                     0.99, since=scrape),
                "rejected_429": s.metric("tailcut_queue_rejected_total"),
                "peak_rss_mb": round(s.rss_kb("VmHWM") / 1024, 1),
                "recovery_p99_by_second": [r["latency_ms"].get("p99") for r in rec["timeline"]],
                "recovery": summary(rec),
            }
        out["rss_mb_before"] = round(base_rss / 1024, 1)
        out["slow_clients"] = slow_clients(s)
    return out


def slow_clients(s: Tailcut) -> dict:
    """Slowloris (headers trickled, bodies never finished) and many idle connections must not
    stop the server answering others."""
    socks = []
    refused = 0
    for i in range(1200):  # More than server.max_connections (1024).
        try:
            c = socket.create_connection(("127.0.0.1", s.port), timeout=2)
            if i % 3 == 0:
                c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")  # never finished
            elif i % 3 == 1:
                c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            socks.append(c)
        except OSError:
            refused += 1
    time.sleep(0.5)
    t0 = time.monotonic()
    ok = False
    body = json.dumps({"input": "still answering?"}).encode()
    for _ in range(50):
        try:
            req = urllib.request.Request(s.url("/v1/embeddings"), data=body,
                                         headers={"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=5) as r:
                ok = r.status == 200
                break
        except OSError:
            time.sleep(0.2)
    answered_after_s = round(time.monotonic() - t0, 2)
    for c in socks:
        c.close()
    # Once the hostile connections are gone, normal service.
    time.sleep(0.5)
    req = urllib.request.Request(s.url("/v1/embeddings"), data=body,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        after = r.status
    return {"hostile_connections": len(socks), "refused_at_connect": refused,
            "legit_request_ok_while_held": ok, "answered_after_s": answered_after_s,
            "after_release_status": after,
            "refused_connections_metric": s.metric("tailcut_http_refused_connections_total")}


def exp_soak(args, tmp: Path) -> dict:
    flags = ["--precision.mode", "off", *args.flags]
    out: dict = {"workload": "zipf", "minutes": args.minutes, "flags": flags}
    with Tailcut(flags, tmp / "soak.log") as s:
        rate = args.rate
        out["rate"] = rate
        samples = []
        start = 0
        for minute in range(args.minutes):
            rep = loadgen(s.port, "zipf", rate, 60, warmup=0.0, start=start)
            start = rep.get("next_line", 0)
            samples.append({"minute": minute + 1, **summary(rep),
                            "rss_mb": round(s.rss_kb() / 1024, 1)})
            print(f"  soak minute {minute + 1}: p99 {samples[-1]['p99_ms']:.1f} ms, "
                  f"rss {samples[-1]['rss_mb']} MB, errors {rep['sent'] - rep['ok']}", flush=True)
        first, last = samples[:5], samples[-5:]
        out["minutes_detail"] = samples
        out["first_5_p99_ms"] = max(x["p99_ms"] for x in first)
        out["last_5_p99_ms"] = max(x["p99_ms"] for x in last)
        out["errors"] = sum(x["sent"] - x["ok"] for x in samples)
        out["rss_mb_first"] = samples[0]["rss_mb"]
        out["rss_mb_max"] = max(x["rss_mb"] for x in samples)
        out["rss_mb_last"] = samples[-1]["rss_mb"]
        out["peak_rss_mb"] = round(s.rss_kb("VmHWM") / 1024, 1)
    return out


def exp_cache(args, tmp: Path) -> dict:
    out: dict = {"workload": "zipf"}
    fp32 = fp32_only_repo(tmp)
    with RedisServer(tmp) as redis:
        tiers = {
            "cache_off": ["--cache.enabled=false"],
            "l1_only": [],
            "l1_redis": ["--redis.enabled", "--redis.port", str(redis.port)],
            "redis_only": ["--redis.enabled", "--redis.port", str(redis.port),
                           "--cache.enabled=false"],
        }
        for name, tier_flags in tiers.items():
            flags = ["--precision.mode", "off", *tier_flags]
            with Tailcut(flags, tmp / f"cache-{name}.log", fp32) as s:
                # First responses: cold cache, one request at a time.
                first = []
                lines = (rb.WORKLOADS_DIR / "zipf.jsonl").read_text().splitlines()
                for line in lines[:50]:
                    t0 = time.monotonic()
                    req = urllib.request.Request(s.url("/v1/embeddings"), data=line.encode(),
                                                 headers={"content-type": "application/json"})
                    urllib.request.urlopen(req, timeout=30).read()
                    first.append((time.monotonic() - t0) * 1000)
                cap = capacity(s.port, "zipf", args.start_rate)
                rep = loadgen(s.port, "zipf", args.fixed_rate, 20)
                hits = s.metric("tailcut_cache_lookups_total", tier="l1", result="hit")
                misses = s.metric("tailcut_cache_lookups_total", tier="l1", result="miss")
                out[name] = {"flags": flags, "max_rate": cap,
                             "first_50_mean_ms": round(sum(first) / len(first), 2),
                             "at_fixed_rate": summary(rep),
                             "l1_hit_rate": round(hits / (hits + misses), 4) if hits + misses else None,
                             "l2_hits": s.metric("tailcut_l2_lookups_total", result="hit")}
                redis_flush(redis.port)
    # P99 of hits at the server: one text, repeated, after one miss.
    with Tailcut(["--precision.mode", "off"], tmp / "cache-hits.log", fp32) as s:
        body = json.dumps({"input": "What is the best way to learn machine learning?"})
        wl = tmp / "hit.jsonl"
        wl.write_text(body + "\n")
        shutil.copy(wl, rb.WORKLOADS_DIR / "_hit.jsonl")
        try:
            rep = loadgen(s.port, "_hit", 500, 10)
        finally:
            (rb.WORKLOADS_DIR / "_hit.jsonl").unlink()
        out["hit_latency_client"] = summary(rep)
        out["hit_server_total_p99_ms"] = hist_quantile(s.metrics(), "tailcut_request_stage_duration_seconds",
                                                       {"route": "/v1/embeddings", "stage": "total"}, 0.99)
    out["fixed_rate"] = args.fixed_rate
    return out


class Balancer:
    """HAProxy on the recipe deploy/haproxy/haproxy.cfg in front of `ports` (three server
    lines; with fewer replicas the lines repeat an address, so the balancer's own cost is in
    every configuration)."""

    def __init__(self, ports: list[int], log: Path):
        self.port, self.stats_port = rb.free_port(), rb.free_port()
        three = (ports * 3)[:3]
        env = dict(os.environ, TAILCUT_LB_ADDR=f"127.0.0.1:{self.port}",
                   TAILCUT_LB_STATS_ADDR=f"127.0.0.1:{self.stats_port}",
                   **{f"TAILCUT_REPLICA_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(three)})
        self.proc = rb._spawn([shutil.which("haproxy") or "/usr/sbin/haproxy", "-db", "-f",
                               str(rb.REPO / "deploy" / "haproxy" / "haproxy.cfg")],
                              env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=2) as r:
                    rows = [l.split(",") for l in r.read().decode().splitlines() if l.startswith("replicas,r")]
                if rows and all(row[17] == "UP" for row in rows):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"HAProxy's replicas not all UP; see {log}")

    def stop(self) -> None:
        rb._stop(self.proc)


def exp_replicas(args, tmp: Path) -> dict:
    """1 vs 3 replicas behind HAProxy (deploy/haproxy/haproxy.cfg): capacity on the short
    workload with the cache off (every request computed: the CPUs' ceiling), then the zipf
    workload at a fixed rate with L1 + a shared Redis, counting where hits came from."""
    if not shutil.which("haproxy") and not Path("/usr/sbin/haproxy").exists():
        raise SystemExit("haproxy is missing: apt-get install haproxy (scripts/setup.sh does)")
    fp32 = fp32_only_repo(tmp)
    out: dict = {"start_rate": args.start_rate, "fixed_rate": args.fixed_rate}
    for n in (1, 3):
        row: dict = {}
        base = ["--precision.mode", "off", *args.flags]
        servers = [Tailcut([*base, "--cache.enabled=false"], tmp / f"r{n}-{i}-short.log", fp32) for i in range(n)]
        for s in servers:
            s.start()
        lb = Balancer([s.port for s in servers], tmp / f"lb-{n}-short.log")
        try:
            row["short_capacity_cache_off"] = capacity(lb.port, "short", args.start_rate)
        finally:
            lb.stop()
            for s in servers:
                s.stop()
        with RedisServer(tmp) as redis:
            flags = [*base, "--redis.enabled", "--redis.port", str(redis.port)]
            servers = [Tailcut(flags, tmp / f"r{n}-{i}-zipf.log", fp32) for i in range(n)]
            for s in servers:
                s.start()
            lb = Balancer([s.port for s in servers], tmp / f"lb-{n}-zipf.log")
            try:
                rep = loadgen(lb.port, "zipf", args.fixed_rate, 30)
                def total(name: str, **labels) -> float:
                    return sum(s.metric(name, **labels) for s in servers)
                l1_hit = total("tailcut_cache_lookups_total", tier="l1", result="hit")
                l1_miss = total("tailcut_cache_lookups_total", tier="l1", result="miss")
                l2_hit = total("tailcut_l2_lookups_total", result="hit")
                rows = l1_hit + l1_miss
                row["zipf"] = {"at_fixed_rate": summary(rep), "rows": rows,
                               "l1_hit_rate": round(l1_hit / rows, 4) if rows else None,
                               # Rows an L1 missed and Redis had: computed by another replica
                               # (or by this one before its L1 evicted them).
                               "l2_hit_rate": round(l2_hit / rows, 4) if rows else None,
                               "computed_share": round((rows - l1_hit - l2_hit) / rows, 4) if rows else None}
            finally:
                lb.stop()
                for s in servers:
                    s.stop()
        out[f"replicas_{n}"] = row
        print(f"  {n} replica(s): {row}", flush=True)
    return out


def redis_flush(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        c.recv(64)


def metric_total(text: str, name: str, **labels) -> float | None:
    """The sum of a Prometheus metric's samples carrying `labels`; None when it has none (a
    server that does not export it)."""
    total = None
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, val = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total = (total or 0.0) + float(val)
    return total


def hist_buckets(text: str, name: str, labels: dict) -> dict[float, float]:
    """Cumulative bucket counts of a Prometheus histogram, by upper bound (seconds)."""
    out: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith(name + "_bucket{"):
            continue
        head, _, val = line.rpartition(" ")
        if not all(f'{k}="{v}"' in head for k, v in labels.items()):
            continue
        le = head.split('le="')[1].split('"')[0]
        le_f = float("inf") if le == "+Inf" else float(le)
        out[le_f] = out.get(le_f, 0.0) + float(val)
    return out


def hist_quantile(text: str, name: str, labels: dict, q: float,
                  since: str | None = None) -> float | None:
    """Upper bound of the bucket holding the q-quantile of a Prometheus histogram, in ms;
    with `since` (an earlier scrape), of the observations made after it."""
    now = hist_buckets(text, name, labels)
    before = hist_buckets(since, name, labels) if since else {}
    buckets = sorted((le, n - before.get(le, 0.0)) for le, n in now.items())
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    for le, count in buckets:
        if count >= q * total:
            return le * 1000
    return None


def exp_variants(args, tmp: Path) -> dict:
    out: dict = {}
    names = [ln.split(":", 1)[1].strip() for ln in (rb.MODEL_DIR / "model.yaml").read_text().splitlines()
             if ln.strip().startswith("- name:")]
    if args.variants:
        names = [n for n in names if n in args.variants.split(",")]
    for v in names:
        repo = variant_repo(tmp, v)
        with Tailcut(["--cache.enabled=false", "--precision.mode", "off"], tmp / f"variant-{v}.log",
                     repo) as s:
            out[v] = {}
            for wl, rate in (("short", args.short_rate), ("medium", args.medium_rate)):
                loadgen(s.port, wl, rate / 2, 3)
                out[v][wl] = summary(loadgen(s.port, wl, rate, 20))
                out[v][wl]["max_rate"] = capacity(s.port, wl, rate) if args.capacity else None
            print(f"  {v}: {out[v]}", flush=True)
    return out


def exp_precision_cache(args, tmp: Path) -> dict:
    """Zipf traffic (mostly repeats) with the cache on and every variant loaded: the highest
    rate at P99 <= 86 ms with the precision controller on (slo) vs off, and what served the
    requests. The controller must not cost capacity on the traffic the cache is for: while it
    serves the fast variant, lookups try the fp32 entries first."""
    out: dict = {"workload": args.workload}
    for label, mode in (("controller_off", "off"), ("controller_on", "slo")):
        flags = ["--precision.mode", mode, *args.flags]
        with Tailcut(flags, tmp / f"precision-cache-{label}.log") as s:
            loadgen(s.port, args.workload, args.start_rate / 2, 5)
            rate = capacity(s.port, args.workload, args.start_rate)
            served = {}
            for line in s.metrics().splitlines():
                if line.startswith("tailcut_precision_switches_total{"):
                    served[line.split('to="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
            out[label] = {"flags": flags, "max_rate": rate, "switches_to": served,
                          "l1_hits": s.metric("tailcut_cache_lookups_total", tier="l1", result="hit"),
                          "l1_misses": s.metric("tailcut_cache_lookups_total", tier="l1", result="miss")}
            print(f"  {label}: {out[label]}", flush=True)
    out["ratio_on_over_off"] = round(out["controller_on"]["max_rate"] / max(1.0, out["controller_off"]["max_rate"]), 3)
    return out


# --- faults -------------------------------------------------------------------------------------
class VerifiedLoad:
    """Closed-loop clients (keep-alive, 1-4 inputs per request, 60 % from a hot set, the rest
    fresh texts so that every fault also meets cache misses) that keep every answer, so each
    vector can be checked afterwards against a reference server. Outcomes are counted per
    phase: ok, failed (non-200 or transport error, with the reason) and, after checking,
    wrong."""

    def __init__(self, port: int, hot: list[str], clients: int = 8):
        self.port, self.hot, self.clients = port, hot, clients
        self.phase = "baseline"
        self.answers: list[tuple[str, list[str], list[list[float]]]] = []
        self.failures: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                        for i in range(clients)]

    def _client(self, i: int) -> None:
        import http.client
        import random
        rng = random.Random(i)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        n = 0
        while not self.stop.is_set():
            n += 1
            texts = [rng.choice(self.hot) if rng.random() < 0.6 else
                     f"fault probe {i}-{n}-{k}: " + rng.choice(self.hot) for k in range(rng.randint(1, 4))]
            phase = self.phase
            try:
                conn.request("POST", "/v1/embeddings", json.dumps({"input": texts}),
                             {"content-type": "application/json"})
                r = conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {body[:120]!r}")
                rows = [d["embedding"] for d in json.loads(body)["data"]]
                with self.lock:
                    self.answers.append((phase, texts, rows))
            except Exception as e:  # noqa: BLE001  (every failure is counted, none is fatal)
                with self.lock:
                    self.failures.append((phase, f"{type(e).__name__}: {str(e)[:160]}"))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                time.sleep(0.05)
        conn.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def reference_vectors(texts: list[str], tmp: Path) -> dict[str, list[float]]:
    """Each text alone, cache off, FP32: what every answer must equal."""
    out = {}
    with Tailcut(["--cache.enabled=false", "--precision.mode", "off"], tmp / "faults-reference.log",
                 fp32_only_repo(tmp)) as ref:
        for t in texts:
            req = urllib.request.Request(ref.url("/v1/embeddings"), data=json.dumps({"input": t}).encode(),
                                         headers={"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                out[t] = json.loads(r.read())["data"][0]["embedding"]
    return out


def exp_io_isolation(args, tmp: Path) -> dict:
    """Small requests on one connection while another sends 4 MiB bodies whose cost is all
    parsing (two million numbers in a field the route ignores): the small requests' latency
    alone and beside them, per repeat."""
    import http.client  # noqa: PLC0415
    import statistics  # noqa: PLC0415
    big = b'{"input": "still here", "pad": [' + b"0," * 1_999_990 + b'0]}'
    small = json.dumps({"input": "still here"}).encode()
    headers = {"Content-Type": "application/json"}

    def post(conn, body):
        conn.request("POST", "/v1/embeddings", body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status

    def smalls(port: int, count: int) -> list[float]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        out = []
        for _ in range(count):
            t0 = time.perf_counter()
            post(conn, small)
            out.append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.005)
        conn.close()
        return out

    def pct(xs: list[float]) -> dict:
        q = statistics.quantiles(xs, n=100)
        return {"p50": round(statistics.median(xs), 2), "p90": round(q[89], 2),
                "p99": round(q[98], 2), "max": round(max(xs), 2)}

    out: dict = {"flags": args.flags, "repeats": []}
    with Tailcut(args.flags, tmp / "io.log", fp32_only_repo(tmp)) as s:
        smalls(s.port, 20)  # The small input is cached from here on.
        for _ in range(args.repeats):
            alone = smalls(s.port, 200)
            stop = threading.Event()
            big_ms: list[float] = []

            def sender():
                conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
                while not stop.is_set():
                    t0 = time.perf_counter()
                    post(conn, big)
                    big_ms.append((time.perf_counter() - t0) * 1e3)
                conn.close()

            t = threading.Thread(target=sender)
            t.start()
            while not big_ms:
                time.sleep(0.01)
            beside = smalls(s.port, 200)
            stop.set()
            t.join()
            out["repeats"].append({"alone_ms": pct(alone), "beside_4mib_ms": pct(beside),
                                   "big_request_median_ms": round(statistics.median(big_ms), 1),
                                   "big_requests": len(big_ms)})
    return out


def exp_faults(args, tmp: Path) -> dict:
    import math
    lines = (rb.WORKLOADS_DIR / "zipf.jsonl").read_text().splitlines()
    inputs = [json.loads(ln)["input"] for ln in lines[:400]]
    hot = sorted({t for x in inputs for t in ([x] if isinstance(x, str) else x)})[:150]
    # A private copy of the fp32 model file, so that replacing it leaves models/ alone.
    repo = fp32_only_repo(tmp / "faults")
    model = repo / rb.MODEL_DIR.name / "model.onnx"
    shutil.copy(model.resolve(), tmp / "model-copy.onnx")
    os.replace(tmp / "model-copy.onnx", model)
    admin = "faults-admin-key"
    timeline: list[dict] = []
    with RedisServer(tmp) as redis:
        # L1 off so that every lookup goes to Redis: the faults hit every request.
        flags = ["--precision.mode", "off", "--cache.enabled=false", "--redis.enabled",
                 "--redis.port", str(redis.port), "--auth.admin_keys", admin,
                 "--server.shutdown_grace_millis", "10000"]
        s = Tailcut(flags, tmp / "faults.log", repo).__enter__()
        load = VerifiedLoad(s.port, hot, args.clients).__enter__()

        def phase(name: str, seconds: float) -> None:
            load.phase = name
            timeline.append({"phase": name, "t": time.monotonic()})
            print(f"  faults: {name}", flush=True)
            time.sleep(seconds)

        phase("baseline", args.phase_s)
        redis.kill()
        phase("redis_killed", 3)
        redis.start()
        phase("redis_restarted", args.phase_s)
        redis.proc.send_signal(signal.SIGSTOP)
        phase("redis_paused", 3)
        redis.proc.send_signal(signal.SIGCONT)
        phase("redis_resumed", args.phase_s)
        # Replace the model file (new inode, same weights) and reload it under load.
        shutil.copy(rb.MODEL_DIR / "model.onnx", tmp / "model-new.onnx")
        os.replace(tmp / "model-new.onnx", model)
        load.phase = "model_reload"
        req = urllib.request.Request(s.url("/admin/models/default/reload"), data=b"", method="POST",
                                     headers={"authorization": f"Bearer {admin}"})
        with urllib.request.urlopen(req, timeout=120) as r:
            reload_status = r.status
        phase("model_reload", args.phase_s)
        phase("before_sigterm", 2)
        load.phase = "after_sigterm"
        s.proc.send_signal(signal.SIGTERM)
        exit_code = s.proc.wait(60)
        load.__exit__()
        s.log_file.close()
    texts = sorted({t for _, ts, _ in load.answers for t in ts})
    print(f"  faults: checking {len(load.answers)} answers ({len(texts)} distinct texts)", flush=True)
    ref = reference_vectors(texts, tmp)
    per: dict[str, dict] = {}
    for ph, ts, rows in load.answers:
        row = per.setdefault(ph, {"ok": 0, "wrong": 0, "failed": 0, "failures": {}})
        worst = max(max(abs(a - b) for a, b in zip(v, ref[t])) for t, v in zip(ts, rows))
        if worst > 1e-5 or any(not math.isfinite(x) for v in rows for x in v):
            row["wrong"] += 1
        else:
            row["ok"] += 1
    for ph, why in load.failures:
        row = per.setdefault(ph, {"ok": 0, "wrong": 0, "failed": 0, "failures": {}})
        row["failed"] += 1
        key = why.split(":")[0] if not why.startswith("RuntimeError: HTTP") else why[:40]
        row["failures"][key] = row["failures"].get(key, 0) + 1
    return {"clients": args.clients, "phase_s": args.phase_s, "per_phase": per,
            "reload_status": reload_status, "exit_code_after_sigterm": exit_code,
            "answers": len(load.answers), "distinct_texts": len(texts),
            "wrong_total": sum(p["wrong"] for p in per.values()),
            "failed_before_sigterm": sum(p["failed"] for k, p in per.items() if k != "after_sigterm")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=["capacity", "load-step", "overload", "soak", "cache", "variants",
                                                   "faults", "precision-cache", "io-isolation", "replicas"])
    ap.add_argument("--workload", default="short")
    ap.add_argument("--start-rate", type=float, default=200)
    ap.add_argument("--sustainable", type=float, default=0, help="overload: skip the capacity search")
    ap.add_argument("--seconds", type=float, default=60, help="overload: seconds per overload level")
    ap.add_argument("--low", type=float, default=100)
    ap.add_argument("--high", type=float, default=900)
    ap.add_argument("--phase-s", type=float, default=30)
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--rate", type=float, default=500, help="soak: offered rate")
    ap.add_argument("--fixed-rate", type=float, default=300, help="cache: common fixed rate")
    ap.add_argument("--short-rate", type=float, default=300)
    ap.add_argument("--medium-rate", type=float, default=40)
    ap.add_argument("--capacity", action="store_true", help="variants: also search each one's capacity")
    ap.add_argument("--variants", default="", help="variants: only these (comma-separated names)")
    ap.add_argument("--connections", type=int, default=1000,
                    help="overload: load-generator connections during the overload phases")
    ap.add_argument("--repeats", type=int, default=3, help="io-isolation: repeats")
    ap.add_argument("--neighbour", type=int, default=0,
                    help="overload: this many nice-19 compiler loops run during each phase")
    ap.add_argument("--clients", type=int, default=8, help="faults: closed-loop client threads")
    ap.add_argument("--flags", default="",
                    help='extra `tailcut serve` flags, one string: --flags="--threads 1"')
    args = ap.parse_args()
    args.flags = shlex.split(args.flags)
    for name, path in rb.BIN.items():
        if not Path(path).exists():
            raise SystemExit(f"{path} is missing: run `make build`")
    if not (rb.WORKLOADS_DIR / "short.jsonl").exists():
        raise SystemExit("bench/workloads/ is missing: run `bench/setup.sh`")
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"tailcut-{args.experiment}-"))
    load = os.getloadavg()
    t0 = time.monotonic()
    try:
        fn = {"capacity": exp_capacity, "load-step": exp_load_step, "overload": exp_overload,
              "soak": exp_soak, "cache": exp_cache, "variants": exp_variants,
              "faults": exp_faults, "precision-cache": exp_precision_cache,
              "io-isolation": exp_io_isolation, "replicas": exp_replicas}[args.experiment]
        result = fn(args, tmp)
    finally:
        rb.stop_all()
    result["machine"] = rb.machine_note()
    result["loadavg_before"] = load
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["command"] = "bench/experiments.py " + " ".join(sys.argv[1:])
    path = RESULTS / f"{args.experiment}-{datetime.now().strftime('%Y-%m-%d-%H%M')}.json"
    if path.exists():  # Two runs in one minute: keep both.
        path = path.with_name(f"{args.experiment}-{datetime.now().strftime('%Y-%m-%d-%H%M%S')}.json")
    path.write_text(json.dumps(result, indent=1))
    if args.experiment == "load-step":
        plot_load_step(result, path.with_suffix(".png"))
    print(json.dumps({k: v for k, v in result.items() if k not in ("minutes_detail",)}, indent=1)[:6000])
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    raise SystemExit(main())
