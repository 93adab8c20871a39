#!/usr/bin/env python3
"""KServe v2 over gRPC against KServe v2 over HTTP/JSON, on one tailcut server: what the gRPC
front-end costs (or saves) per request at the same offered rates, for the text model.

One `tailcut serve` (cache off, so every request is computed; precision controller off) takes
both loads in turn, for each rate and repeat:
  - gRPC: ghz (Go, github.com/bojand/ghz; `go install github.com/bojand/ghz/cmd/ghz@v0.120.0`
    through the Go module proxy) calling inference.GRPCInferenceService/ModelInfer at a constant
    rate, with the texts as raw_input_contents (what tritonclient.grpc sends), round-robin over
    the first --texts questions of the short workload, one text per request;
  - HTTP: tailcut-loadgen (open loop, constant rate) posting the same texts as KServe JSON to
    /v2/models/{model}/infer.
The two clients differ (Go gRPC vs C++ HTTP/1.1), so the comparison is of the whole path a
user sees, not of the front-ends alone. Reports median P50/P99 over the repeats.

    .venv-bench/bin/python bench/grpc_bench.py --rates 100,200,300 --duration 20 --repeats 3
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
PROTO = REPO / "src" / "server" / "grpc" / "grpc_service.proto"
MODEL = "all-MiniLM-L6-v2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def texts(n: int) -> list[str]:
    lines = (REPO / "bench" / "workloads" / "short.jsonl").read_text().splitlines()[:n]
    return [json.loads(line)["input"] for line in lines]


def start_server(log: Path, http_port: int, grpc_port: int, threads: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [str(BUILD / "tailcut"), "serve", "--host", "127.0.0.1", "--port", str(http_port),
         "--grpc-port", str(grpc_port), "--model-repository", str(REPO / "models"),
         "--threads", str(threads), "--cache.enabled=false", "--precision.mode", "off"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"tailcut exited: see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"tailcut not ready: see {log}")


def run_grpc(ghz: str, port: int, data: Path, rate: int, duration: float, warmup: float) -> dict:
    total = int(rate * (duration + warmup))
    cmd = [ghz, "--insecure", "--proto", str(PROTO), "--import-paths", str(PROTO.parent),
           "--call", "inference.GRPCInferenceService/ModelInfer", "--data-file", str(data),
           "--rps", str(rate), "--total", str(total), "--skipFirst", str(int(rate * warmup)),
           "--concurrency", "64", "--connections", "4", "--timeout", "15s", "--format", "json",
           f"127.0.0.1:{port}"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    pct = {p["percentage"]: p["latency"] / 1e6 for p in out.get("latencyDistribution") or []}
    # ghz's own rps counts the warm-up's time but not its requests.
    measured = sum((out.get("statusCodeDistribution") or {}).values())
    return {"achieved": round(measured / duration, 1), "p50_ms": pct.get(50), "p99_ms": pct.get(99),
            "status": out.get("statusCodeDistribution", {}),
            "errors": out.get("errorDistribution", {})}


def run_http(port: int, workload: Path, rate: int, duration: float, warmup: float) -> dict:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    subprocess.run([str(BUILD / "tailcut-loadgen"), "--port", str(port), "--path",
                    f"/v2/models/{MODEL}/infer", "--workload", str(workload), "--rate", str(rate),
                    "--duration", str(duration), "--warmup", str(warmup), "--connections", "256",
                    "--timeout", "15", "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    rep = json.loads(out.read_text())
    out.unlink()
    lat = rep.get("latency_ms", {})
    return {"achieved": round(rep["achieved_rate"], 1), "p50_ms": lat.get("p50"),
            "p99_ms": lat.get("p99"), "status": rep.get("status_counts", {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="100,200,300")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--texts", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ghz", default=str(Path.home() / "go" / "bin" / "ghz"))
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if not Path(a.ghz).exists():
        sys.exit(f"ghz not found at {a.ghz}: go install github.com/bojand/ghz/cmd/ghz@v0.120.0")

    tmp = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    qs = texts(a.texts)
    grpc_data = tmp / "grpc.json"
    grpc_data.write_text(json.dumps([{
        "model_name": MODEL,
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
        "raw_input_contents": [base64.b64encode(struct.pack("<I", len(q.encode())) + q.encode()).decode()],
    } for q in qs]))
    http_data = tmp / "http.jsonl"
    http_data.write_text("".join(json.dumps({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                                                         "data": [q]}]}) + "\n" for q in qs))
    http_port, grpc_port = free_port(), free_port()
    proc = start_server(tmp / "tailcut.log", http_port, grpc_port, a.threads)
    rows = []
    try:
        for rate in [int(r) for r in a.rates.split(",")]:
            runs = {"grpc": [], "http": []}
            for i in range(a.repeats):
                # Alternate which goes first, so drift (thermal, neighbours) favours neither.
                order = ("grpc", "http") if i % 2 == 0 else ("http", "grpc")
                for kind in order:
                    r = (run_grpc(a.ghz, grpc_port, grpc_data, rate, a.duration, a.warmup) if kind == "grpc"
                         else run_http(http_port, http_data, rate, a.duration, a.warmup))
                    runs[kind].append(r)
                    print(f"{rate}/s {kind}: {r}", flush=True)
            row = {"rate": rate}
            for kind, rs in runs.items():
                row[kind] = {"p50_ms": statistics.median(r["p50_ms"] for r in rs),
                             "p99_ms": statistics.median(r["p99_ms"] for r in rs),
                             "achieved": statistics.median(r["achieved"] for r in rs),
                             "runs": rs}
            rows.append(row)
    finally:
        proc.terminate()
        proc.wait(30)
    print("\n| offered | gRPC P50 | gRPC P99 | HTTP P50 | HTTP P99 | gRPC / HTTP P99 |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        g, h = r["grpc"], r["http"]
        print(f"| {r['rate']}/s | {g['p50_ms']:.1f} ms | {g['p99_ms']:.1f} ms | {h['p50_ms']:.1f} ms | "
              f"{h['p99_ms']:.1f} ms | {g['p99_ms'] / h['p99_ms']:.2f} |")
    out = a.out or REPO / "bench" / "results" / f"grpc-{datetime.now(timezone.utc):%Y-%m-%d-%H%M}.json"
    out.write_text(json.dumps({"args": vars(a) | {"out": str(out)}, "rows": rows}, indent=1, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
