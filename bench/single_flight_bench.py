#!/usr/bin/env python3
"""Single-flight across replicas: how many computations do N concurrent duplicates of K cold
keys cost when they are spread over several tailcut servers sharing one Redis?

Starts a private redis-server (persistence off) and --servers `tailcut serve` processes on it,
then sends --dup requests for each of --keys cold texts, one text per request, the duplicates of a
key round-robin over the servers and submitted together (a pool of --workers client threads, so
about workers/dup keys are in flight at once). Counts, from the servers' metrics:

  computations  rows the models actually ran (sum of tailcut_batch_size_sum deltas)
  intercepted   1 - (computations - keys) / (requests - keys): the share of the duplicate
                requests that did not cost a computation (1.0 = exactly one per key)

and checks that every duplicate of a key got the bit-identical row. Latency is per request,
client side (send to full response), for all requests and for the duplicates (every request of
a key but the first submitted).

The servers run with --precision.mode off (pass --extra to change it): with the controller on, a
server that switches to its int8 variant under load starts computing other keys (the variant is
part of the key), which is not a single-flight miss. With --count-locks the benchmark also
watches Redis (MONITOR; it slows Redis down) and reports how many times a key's cross-replica
lock was taken again after its first holder had released it: each of those found the row already
stored when it re-checked L2, and computed it again before that re-check existed.

Prints one JSON object. Example (the numbers in BENCHMARKS.md):
  .venv/bin/python bench/single_flight_bench.py --keys 200 --dup 32
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import requests

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
MODEL_DIR = REPO / "models" / "all-MiniLM-L6-v2"
MODEL = "all-MiniLM-L6-v2"
WORDS = ("river mountain quantum pickle orbit violin cascade lantern harvest tundra saffron granite "
         "whisper circuit meadow falcon ember glacier paradox velvet compass nectar thunder mosaic "
         "puzzle beacon canyon orchid plasma voyage willow zenith anchor biscuit carnival dolphin "
         "eclipse fjord gazebo hammock igloo jigsaw kettle lagoon marble nebula oasis").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric_sum(text: str, name: str, **labels) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'([a-zA-Z_]\w*)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


class Proc:
    def __init__(self, argv: list[str], log: Path):
        self.log = log
        with open(log, "wb") as f:
            self.p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def start_redis(tmp: Path) -> tuple[Proc, int]:
    binary = os.environ.get("TAILCUT_REDIS_SERVER") or shutil.which("redis-server")
    if not binary:
        sys.exit("redis-server not found (apt-get install redis-server)")
    port = free_port()
    proc = Proc([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(tmp)], tmp / "redis.log")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.02)
    sys.exit(f"redis-server did not start: {(tmp / 'redis.log').read_text()[-2000:]}")


def start_tailcut(binary: Path, repo: Path, flags: list[str], log: Path) -> tuple[Proc, str]:
    proc = Proc([str(binary), "serve", "--host", "127.0.0.1", "--port", "0", "--grpc-port", "0",
                 "--model-repository", str(repo), *flags], log)
    deadline = time.monotonic() + 90
    url = None
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            sys.exit(f"tailcut exited: {log.read_text()[-3000:]}")
        if url is None:
            m = re.search(r"listening on http://[^\s:]+:(\d+)", log.read_text(errors="replace"))
            if m:
                url = f"http://127.0.0.1:{m.group(1)}"
        if url:
            try:
                if requests.get(url + "/v2/health/ready", timeout=5).status_code == 200:
                    return proc, url
            except requests.ConnectionError:
                pass
        time.sleep(0.05)
    sys.exit(f"tailcut not ready: {log.read_text()[-3000:]}")


class Monitor:
    """Redis MONITOR into a file, on its own connection and thread."""

    def __init__(self, port: int, path: Path):
        self.path = path
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
        self.file = open(path, "wb")
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            while data := self.sock.recv(1 << 20):
                self.file.write(data)
        except OSError:
            pass

    def unlocks_per_key(self) -> dict[str, int]:
        """How often each lock was released (= taken: every holder releases its lock)."""
        self.file.flush()
        counts: dict[str, int] = {}
        for m in re.finditer(rb'"EVAL" "[^"]*" "1" "([^"]*:lock:[^"]*)"', self.path.read_bytes()):
            k = m.group(1).decode()
            counts[k] = counts.get(k, 0) + 1
        return counts


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--dup", type=int, default=32, help="concurrent requests per key")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--workers", type=int, default=64, help="client threads")
    ap.add_argument("--batch-timeout-micros", type=int, default=20000)
    ap.add_argument("--remote-wait-millis", type=int, default=5000)
    ap.add_argument("--redis-command-timeout-millis", type=int, default=None,
                    help="default: the server's (50 ms)")
    ap.add_argument("--extra", default="", help="more tailcut flags, space separated")
    ap.add_argument("--count-locks", action="store_true",
                    help="count lock acquisitions per key with Redis MONITOR")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tailcut-sf-bench-"))
    # A copy of the binary: a rebuild of build/ during the run must not swap it.
    binary = tmp / "tailcut"
    shutil.copy2(BUILD / "tailcut", binary)
    repo = tmp / "models"
    repo.mkdir()
    (repo / MODEL).symlink_to(MODEL_DIR, target_is_directory=True)

    redis, redis_port = start_redis(tmp)
    flags = ["--redis.enabled", "--redis.port", str(redis_port), "--precision.mode", "off",
             "--batch-timeout-micros", str(args.batch_timeout_micros),
             "--cache.remote_wait_millis", str(args.remote_wait_millis), *args.extra.split()]
    monitor = None
    if args.count_locks:
        monitor = Monitor(redis_port, tmp / "monitor.log")
    if args.redis_command_timeout_millis:
        flags += ["--redis.command_timeout_millis", str(args.redis_command_timeout_millis)]
    servers: list[tuple[Proc, str]] = []
    try:
        for i in range(args.servers):
            servers.append(start_tailcut(binary, repo, flags, tmp / f"tailcut{i}.log"))
        urls = [u for _, u in servers]

        rng = random.Random(args.seed)
        run_tag = f"sfb{int(time.time())}"
        keys = [f"{run_tag} {k}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14)))
                for k in range(args.keys)]
        jobs = [(k, d, urls[(k + d) % len(urls)]) for k in range(args.keys) for d in range(args.dup)]
        before = [requests.get(u + "/metrics", timeout=30).text for u in urls]
        local = threading.local()

        def one(job):
            k, d, url = job
            if not hasattr(local, "s"):
                local.s = requests.Session()
            t0 = time.perf_counter()
            try:
                r = local.s.post(url + "/v1/embeddings", timeout=120,
                                 json={"input": [keys[k]], "encoding_format": "base64"})
                ms = (time.perf_counter() - t0) * 1000
                if r.status_code != 200:
                    return k, d, ms, None, f"HTTP {r.status_code}"
                row = base64.b64decode(r.json()["data"][0]["embedding"])
                return k, d, ms, row, None
            except requests.RequestException as e:
                return k, d, (time.perf_counter() - t0) * 1000, None, type(e).__name__

        load_before = os.getloadavg()
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            results = list(pool.map(one, jobs))
        wall = time.perf_counter() - start
        load_after = os.getloadavg()
        time.sleep(0.2)  # Stores and unlocks are sent just after the responses.
        after = [requests.get(u + "/metrics", timeout=30).text for u in urls]

        def delta(name, **labels):
            return sum(metric_sum(a, name, **labels) - metric_sum(b, name, **labels)
                       for a, b in zip(after, before))

        errors = [e for *_, e in results if e]
        rows: dict[int, set[bytes]] = {}
        for k, _, _, row, _ in results:
            if row is not None:
                rows.setdefault(k, set()).add(row)
        disagreeing = sum(1 for v in rows.values() if len(v) > 1)
        lat_all = [ms for _, _, ms, _, _ in results]
        lat_dup = [ms for _, d, ms, _, _ in results if d > 0]
        computations = int(delta("tailcut_batch_size_sum", model=MODEL))
        n_req, distinct = len(jobs), args.keys
        out = {
            "benchmark": "single_flight_across_replicas",
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "loadavg_1m_before": round(load_before[0], 2),
                        "loadavg_1m_after": round(load_after[0], 2)},
            "config": {"servers": args.servers, "keys": args.keys, "dup": args.dup,
                       "client_threads": args.workers, "server_flags": flags[3:]},
            "requests": n_req,
            "distinct_keys": distinct,
            "computations": computations,
            "extra_computations": computations - distinct,
            "intercepted_fraction": round(1 - (computations - distinct) / (n_req - distinct), 5),
            "claim": 0.997,
            "failed_requests": len(errors),
            "keys_with_disagreeing_rows": disagreeing,
            "latency_ms": {"all_p50": round(pct(lat_all, 50), 2),
                           "all_p99": round(pct(lat_all, 99), 2),
                           "duplicates_p50": round(pct(lat_dup, 50), 2),
                           "duplicates_p99": round(pct(lat_dup, 99), 2)},
            "wall_seconds": round(wall, 2),
            "single_flight": {o: int(delta("tailcut_single_flight_total", outcome=o))
                              for o in ("leader", "joined", "remote_hit", "remote_timeout",
                                        "lock_error", "fallback")},
            "l1_hits": int(delta("tailcut_cache_lookups_total", tier="l1", result="hit")),
            "l2_lookups": {r: int(delta("tailcut_l2_lookups_total", result=r))
                           for r in ("hit", "miss", "error", "corrupt")},
            "redis_commands": {r: int(delta("tailcut_redis_commands_total", result=r))
                               for r in ("ok", "error", "timeout", "rejected")},
            "batches": int(delta("tailcut_batches_total", model=MODEL)),
        }
        if monitor:
            unlocks = monitor.unlocks_per_key()
            out["locks"] = {"keys_locked": len(unlocks),
                            "keys_locked_more_than_once": sum(1 for n in unlocks.values() if n > 1),
                            "acquisitions_beyond_first": sum(n - 1 for n in unlocks.values())}
        print(json.dumps(out, indent=2))
    finally:
        for p, _ in servers:
            p.stop()
        redis.p.kill()
        redis.p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
