#!/usr/bin/env python3
"""Image model benchmark (issue 16), one command: the source's backend table, measured here on
EfficientNet-Lite0 (models/efficientnet-lite0, set-up's export) with JPEG photos sent the way
tritonclient sends them (KServe v2 infer, binary extension, top-5 classification asked).

Systems, each on the same ONNX file, 2 compute threads:
  tailcut            `tailcut serve`, the model's own batching (max_batch_size 32)
  tailcut-nobatch    the same with --max-batch-size 1: one image per model run
  tailcut-batchN     the same with --max-batch-size N
  python             FastAPI + uvicorn + ONNX Runtime + Pillow with an asyncio batcher
                     (bench/baselines/python_image_server.py --mode batch, max 32, 2 ms)
  python-single      the same, each request alone (--mode single)
and, apart, the engine ceiling: ONNX Runtime alone on already-preprocessed tensors (images/s by
batch size), and the decode + preprocess cost of one photo in Pillow.

Workload: --images distinct JPEGs made from scikit-learn's two sample photos (a temple, a
flower) by seeded random crops, sizes (longer side 400-800 px) and JPEG qualities (80-95), one
image a request. The load generator (build/tailcut-loadgen --envelope) is open-loop: constant
rate, every request sent on time whatever the answers do; latency from the scheduled send.
Every point reports P50/P99 of all requests, the achieved rate, errors, and the server's CPU
seconds and peak RSS (VmHWM) over the run. The load generator runs on the same cores.

Usage: .venv-bench/bin/python bench/image_bench.py [--rates 10,20,40,60] [--duration 20]
         [--systems tailcut,tailcut-nobatch,python,python-single] [--photos DIR]
Writes bench/results/image-<date>.json and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
from PIL import Image
from server_process import BenchError, ServerProcess, free_port

REPO = Path(__file__).resolve().parents[1]
MODEL = "efficientnet-lite0"
SYSTEMS = ("tailcut", "tailcut-nobatch", "python", "python-single")


def find_photos(folder: Path | None) -> list[Path]:
    if folder is None:
        found = sorted(REPO.glob(".venv/lib/python*/site-packages/sklearn/datasets/images/*.jpg"))
    else:
        found = sorted(folder.glob("*.jpg"))
    if not found:
        raise BenchError("no photos: scikit-learn's sample images are in .venv (scripts/setup.sh); "
                         "or give --photos DIR of JPEG files")
    return found


def make_images(photos: list[Path], n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    sources = [Image.open(p).convert("RGB") for p in photos]
    out = []
    for i in range(n):
        img = sources[i % len(sources)]
        w, h = img.size
        frac = rng.uniform(0.55, 1.0)
        cw, ch = int(w * frac ** 0.5), int(h * frac ** 0.5)
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        crop = img.crop((x, y, x + cw, y + ch))
        longer = rng.randint(400, 800)
        scale = longer / max(cw, ch)
        crop = crop.resize((max(1, round(cw * scale)), max(1, round(ch * scale))), Image.BICUBIC)
        buf = io.BytesIO()
        crop.save(buf, format="JPEG", quality=rng.randint(80, 95))
        out.append(buf.getvalue())
    return out


def envelope(image: bytes) -> str:
    header = json.dumps({
        "inputs": [{"name": "input", "datatype": "BYTES", "shape": [1],
                    "parameters": {"binary_data_size": 4 + len(image)}}],
        "outputs": [{"name": "logits", "parameters": {"classification": 5, "binary_data": False}}],
    }).encode()
    body = header + len(image).to_bytes(4, "little") + image
    return json.dumps({"body_base64": base64.b64encode(body).decode(),
                       "headers": {"Inference-Header-Content-Length": str(len(header)),
                                   "Content-Type": "application/octet-stream"}})


def server_for(name: str, args, tmp: Path) -> ServerProcess:
    port = free_port()
    if name.startswith("tailcut"):
        repo = tmp / "repo"
        if not repo.exists():
            repo.mkdir()
            (repo / MODEL).symlink_to(args.model_dir.resolve(), target_is_directory=True)
        argv = [str(args.tailcut), "serve", "--host", "127.0.0.1", "--port", str(port),
                "--grpc-port", "0", "--model-repository", str(repo), "--threads", str(args.threads)]
        if name == "tailcut-nobatch":
            argv += ["--max-batch-size", "1"]
        elif name.startswith("tailcut-batch"):  # tailcut-batchN: batches of at most N images.
            argv += ["--max-batch-size", name.removeprefix("tailcut-batch")]
        return ServerProcess(name, argv, port, tmp / f"{name}.log")
    mode = "single" if name == "python-single" else "batch"
    argv = [sys.executable, str(REPO / "bench" / "baselines" / "python_image_server.py"),
            "--port", str(port), "--mode", mode, "--threads", str(args.threads),
            "--model-dir", str(args.model_dir)]
    return ServerProcess(name, argv, port, tmp / f"{name}.log")


def run_point(server: ServerProcess, workload: Path, rate: float, args, tag: str, tmp: Path) -> dict:
    report = tmp / f"{tag}.json"
    cpu0 = server.cpu_seconds()
    cmd = [str(args.loadgen), "--port", str(server.port),
           "--path", f"/v2/models/{MODEL}/infer", "--workload", str(workload), "--envelope",
           "--rate", str(rate), "--duration", str(args.duration), "--warmup", "2",
           "--timeout", "20", "--out", str(report)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    cpu = server.cpu_seconds() - cpu0
    r = json.loads(report.read_text())
    lat = r.get("ok_latency_ms") or {}
    errors = {k: v for k, v in r.get("status_counts", {}).items() if k != "200"}
    return {"rate": rate, "p50_ms": lat.get("p50"), "p99_ms": lat.get("p99"),
            "achieved": r.get("achieved_rate"), "ok": r.get("ok", 0), "errors": errors,
            "transport_errors": r.get("transport_error_kinds", {}),
            "cpu_s_per_image": cpu / max(1, r.get("sent", 1)),
            "peak_rss_mb": server.peak_rss_mb()}


def engine_ceiling(args, images: list[bytes]) -> dict:
    """ONNX Runtime alone on preprocessed tensors (the engine ceiling), and Pillow's decode +
    preprocess time per image (what serving JPEGs adds on the same cores)."""
    import onnxruntime as ort  # noqa: PLC0415
    sys.path.insert(0, str(REPO / "bench" / "baselines"))
    from python_image_server import preprocess  # noqa: PLC0415

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(args.model_dir / "model.onnx"), so,
                                   providers=["CPUExecutionProvider"])
    t0 = time.perf_counter()
    tensors = [preprocess(i) for i in images]
    prep_ms = (time.perf_counter() - t0) * 1000 / len(images)
    out = {"pillow_decode_preprocess_ms_per_image": prep_ms, "images_per_s_by_batch": {}}
    for batch in (1, 8, 32):
        x = np.stack((tensors * (batch // len(tensors) + 1))[:batch])
        session.run(["logits"], {"input": x})
        runs = []
        for _ in range(3):
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 3:
                session.run(["logits"], {"input": x})
                n += batch
            runs.append(n / (time.perf_counter() - t0))
        out["images_per_s_by_batch"][batch] = statistics.median(runs)
    return out


def fmt(v, digits=1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def markdown(results: dict) -> str:
    lines = ["| system | offered img/s | achieved | P50 / P99 ms | errors | CPU s/img | peak RSS MB |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for name, rows in results["systems"].items():
        for r in rows:
            errs = ", ".join(f"{k}: {v}" for k, v in {**r["errors"], **r["transport_errors"]}.items()) or "0"
            lines.append(f"| {name} | {r['rate']:g} | {fmt(r['achieved'])} | {fmt(r['p50_ms'])} / "
                         f"{fmt(r['p99_ms'])} | {errs} | {r['cpu_s_per_image']:.3f} | {r['peak_rss_mb']:.0f} |")
    c = results["engine"]
    lines.append("")
    lines.append("ONNX Runtime alone (preprocessed tensors): " + ", ".join(
        f"batch {b}: {v:.1f} img/s" for b, v in c["images_per_s_by_batch"].items())
        + f"; Pillow decode + preprocess: {c['pillow_decode_preprocess_ms_per_image']:.2f} ms per image")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--rates", default="10,20,40,60")
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--photos", type=Path)
    ap.add_argument("--model-dir", type=Path, default=REPO / "models" / MODEL)
    ap.add_argument("--tailcut", type=Path, default=REPO / "build" / "tailcut")
    ap.add_argument("--loadgen", type=Path, default=REPO / "build" / "tailcut-loadgen")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    for need in (args.model_dir / "model.onnx", args.tailcut, args.loadgen):
        if not need.exists():
            raise BenchError(f"{need} is missing: run scripts/setup.sh (and bench/setup.sh)")
    started = time.monotonic()
    images = make_images(find_photos(args.photos), args.images, args.seed)
    results = {"date": datetime.now().isoformat(timespec="seconds"), "args": {
        k: str(v) for k, v in vars(args).items()}, "cpu": os.cpu_count(), "systems": {}}
    with tempfile.TemporaryDirectory(prefix="tailcut-image-bench-") as d:
        tmp = Path(d)
        workload = tmp / "images.jsonl"
        workload.write_text("\n".join(envelope(i) for i in images) + "\n")
        print(f"image_bench: {len(images)} JPEGs, {np.mean([len(i) for i in images]) / 1024:.0f} KiB "
              f"on average; logs in {tmp}", flush=True)
        results["engine"] = engine_ceiling(args, images)
        print(f"  engine: {results['engine']}", flush=True)
        rates = [float(r) for r in args.rates.split(",") if r]
        for name in args.systems.split(","):
            rows = []
            with server_for(name, args, tmp) as server:
                for rate in rates:
                    row = run_point(server, workload, rate, args, f"{name}-{rate:g}", tmp)
                    rows.append(row)
                    print(f"  {name:16} {rate:6g} img/s: achieved {fmt(row['achieved'])}, "
                          f"P50/P99 {fmt(row['p50_ms'])} / {fmt(row['p99_ms'])} ms, "
                          f"errors {row['errors'] or 0} {row['transport_errors'] or ''}, "
                          f"RSS {row['peak_rss_mb']:.0f} MB", flush=True)
            results["systems"][name] = rows
    table = markdown(results)
    print("\n" + table)
    out = args.out or REPO / "bench" / "results" / f"image-{datetime.now():%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=float) + "\n")
    print(f"\nimage_bench: wrote {out} ({(time.monotonic() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as e:
        print(f"image_bench: {e}", file=sys.stderr)
        raise SystemExit(1)
