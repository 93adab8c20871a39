#!/usr/bin/env python3
"""The image model's precision variants side by side (BENCHMARKS.md, "Image model: precision
variants"): the source's Pareto table (precision, top-1, speed), measured on this machine.

For each variant model.yaml lists (tools/quantize_image_model.py writes them and their top-1):
  engine   ONNX Runtime alone on preprocessed tensors, --threads intra-op threads: images/s at
           batch 1 and 8 (median of --repeats timed runs of 32 images);
  server   `tailcut serve` (one server, controller off) with JPEGs through KServe's binary
           extension, the variant pinned with parameters.precision: latency of one photo at a
           time (P50 / P99 of --sequential requests), and images/s with --clients concurrent
           clients for --duration seconds; variants interleaved, --rounds times, medians kept.
Top-1 figures are model.yaml's (the set-up measurement); the check photos are those of the
tool (the wheels in set-up's cache).

Usage: .venv/bin/python bench/image_variants_bench.py [--out bench/results/X.json]
"""
from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tools"))
from server_process import ServerProcess, free_port  # noqa: E402

import quantize_image_model as qim  # noqa: E402

MODEL = "efficientnet-lite0"


def variants(model_dir: Path) -> list[dict]:
    out, cur = [], None
    for line in (model_dir / "model.yaml").read_text().splitlines():
        s = line.strip()
        if s.startswith("- name:"):
            cur = {"name": s.split(":", 1)[1].strip()}
            out.append(cur)
        elif cur is not None and ":" in s and line.startswith("    "):
            k, v = (x.strip() for x in s.split(":", 1))
            cur[k] = v
    return out


def jpegs(wheel: Path) -> list[bytes]:
    """The check photos (ai-benchmark 50..99) as JPEG bytes, as a client would send them."""
    import zipfile  # noqa: PLC0415
    with zipfile.ZipFile(wheel) as z:
        return [z.read(f"ai_benchmark/data/classification/{i}.jpg") for i in qim.CHECK]


def server_round(port: int, variant: str, photos: list[bytes], args) -> dict:
    import tritonclient.http as thttp  # noqa: PLC0415

    def infer(c, photo: bytes) -> None:
        inp = thttp.InferInput("input", [1], "BYTES")
        inp.set_data_from_numpy(np.array([photo], dtype=object))
        r = c.infer(MODEL, [inp], parameters={"precision": variant},
                    outputs=[thttp.InferRequestedOutput("logits", class_count=1)])
        assert r.get_response()["parameters"]["variant"] == variant

    c = thttp.InferenceServerClient(f"127.0.0.1:{port}")
    for p in photos[:10]:
        infer(c, p)
    lat = []
    for i in range(args.sequential):
        t = time.perf_counter()
        infer(c, photos[i % len(photos)])
        lat.append((time.perf_counter() - t) * 1e3)
    done = [0] * args.clients
    stop = time.perf_counter() + args.duration

    def loop(k: int) -> None:
        cc = thttp.InferenceServerClient(f"127.0.0.1:{port}")
        i = k
        while time.perf_counter() < stop:
            infer(cc, photos[i % len(photos)])
            done[k] += 1
            i += args.clients

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "images_per_s": sum(done) / (time.perf_counter() - t0)}


def main() -> int:
    cache = Path.home() / ".cache" / "tailcut" / "dl"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", type=Path, default=REPO / "models" / MODEL)
    ap.add_argument("--tailcut", type=Path, default=REPO / "build" / "tailcut")
    ap.add_argument("--ai-benchmark-wheel", type=Path, default=cache / "ai_benchmark-0.1.2-py3-none-any.whl")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sequential", type=int, default=100)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    listed = variants(args.model_dir)
    photos = jpegs(args.ai_benchmark_wheel)
    x = np.stack([qim.preprocess(p) for p in photos])
    rows = {v["name"]: dict(v) for v in listed}
    for v in listed:
        sess = qim.session(args.model_dir / v["file"], args.threads)
        rows[v["name"]]["engine_b1"] = round(qim.images_per_s(sess, x, 1, args.repeats), 1)
        rows[v["name"]]["engine_b8"] = round(qim.images_per_s(sess, x, 8, args.repeats), 1)
        print(v["name"], "engine", rows[v["name"]]["engine_b1"], rows[v["name"]]["engine_b8"], flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        (repo / MODEL).symlink_to(args.model_dir.resolve(), target_is_directory=True)
        port = free_port()
        argv = [str(args.tailcut), "serve", "--host", "127.0.0.1", "--port", str(port), "--grpc-port", "0",
                "--model-repository", str(repo), "--precision.mode", "off"]
        rounds: dict[str, list[dict]] = {v["name"]: [] for v in listed}
        with ServerProcess("tailcut", argv, port, Path(tmp) / "tailcut.log") as server:
            for r in range(args.rounds):
                order = listed[r % len(listed):] + listed[:r % len(listed)]  # Rotate the order.
                for v in order:
                    rounds[v["name"]].append(server_round(port, v["name"], photos, args))
                    print(v["name"], "server", rounds[v["name"]][-1], flush=True)
            rss = server.peak_rss_mb()
    for name, rs in rounds.items():
        for k in ("p50_ms", "p99_ms", "images_per_s"):
            rows[name][f"server_{k}"] = round(statistics.median(r[k] for r in rs), 1)
            rows[name][f"server_{k}_all"] = [round(r[k], 1) for r in rs]
    result = {"command": " ".join(sys.argv), "threads": args.threads, "clients": args.clients,
              "peak_rss_mb": rss, "variants": list(rows.values())}
    print("| variant | top-1 (20 labelled) | top-1 agreement with fp32 (72) | engine img/s b1 / b8 |"
          " server P50 / P99 ms, one at a time | server img/s, 4 clients |")
    print("|---|---:|---:|---:|---:|---:|")
    for v in rows.values():
        print(f"| {v['name']} | {float(v['top1_accuracy']):.2f} | {float(v['top1_agreement']):.3f} | "
              f"{v['engine_b1']} / {v['engine_b8']} | {v['server_p50_ms']} / {v['server_p99_ms']} | "
              f"{v['server_images_per_s']} ({', '.join(map(str, v['server_images_per_s_all']))}) |")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
