#!/usr/bin/env python3
"""The Python baseline for the image model: the source article's stack (FastAPI + uvicorn +
ONNX Runtime, an asyncio dynamic batcher) serving KServe v2 infer for the same ONNX file as
tailcut (models/efficientnet-lite0), with the same request and answer shapes:

  POST /v2/models/efficientnet-lite0/infer, Triton's binary extension: a JSON header
  (Inference-Header-Content-Length bytes) naming one BYTES input of encoded images, then the
  images, each prefixed by its 4-byte little-endian length. Answer: JSON, the output "logits"
  as the classification extension's top-k "score:index:label" strings when the request asks
  for "classification", else the logits.

Images are decoded and preprocessed with Pillow the way the model was evaluated (shorter side
256, bicubic, centre crop 224, (x / 255 - 127 / 255) / (128 / 255), NCHW), on the inference
thread, batch by batch: Pillow's decoders and numpy release the GIL, so the event loop keeps
reading requests meanwhile. One inference runs at a time, ONNX Runtime with --threads intra-op
threads, no spinning (as tailcut).

  --mode batch    requests wait up to --window-ms (2 ms) for others, up to --max-batch (32)
  --mode single   each request alone

Usage: python bench/baselines/python_image_server.py --port 18002 [--mode batch|single]
"""
from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batcher import Batcher, lifespan  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = "efficientnet-lite0"
MEAN, STD = 127.0 / 255.0, 128.0 / 255.0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=["batch", "single"], default="batch")
    ap.add_argument("--model-dir", type=Path, default=REPO / "models" / MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--window-ms", type=float, default=2.0)
    return ap.parse_args(argv)


def preprocess(encoded: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(encoded)).convert("RGB")
    w, h = img.size
    if w <= h:
        size = (256, int(256 * h / w))
    else:
        size = (int(256 * w / h), 256)
    img = img.resize(size, Image.BICUBIC)
    left, top = round((size[0] - 224) / 2), round((size[1] - 224) / 2)
    img = img.crop((left, top, left + 224, top + 224))
    x = (np.asarray(img, dtype=np.float32) / 255.0 - MEAN) / STD
    return x.transpose(2, 0, 1)


class Model:
    def __init__(self, args):
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(args.model_dir / "model.onnx"), so,
                                            providers=["CPUExecutionProvider"])
        self.labels = (args.model_dir / "labels.txt").read_text().splitlines()

    def run(self, images: list[bytes]):
        """Each image's logits, or the exception that its decoding raised."""
        rows, out, good = [], [None] * len(images), []
        for i, encoded in enumerate(images):
            try:
                rows.append(preprocess(encoded))
                good.append(i)
            except Exception as e:  # noqa: BLE001 (a bad image fails its request only)
                out[i] = e
        if rows:
            logits = self.session.run(["logits"], {"input": np.stack(rows)})[0]
            for j, i in enumerate(good):
                out[i] = logits[j]
        return out


def split_binary(body: bytes, header_length: int):
    header = orjson.loads(body[:header_length])
    raw = memoryview(body)[header_length:]
    images, pos = [], 0
    while pos + 4 <= len(raw):
        n = int.from_bytes(raw[pos : pos + 4], "little")
        images.append(bytes(raw[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return header, images


def create_app(args) -> FastAPI:
    model = Model(args)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
    for n in (1, args.max_batch):  # Warm up both ends of the batch range.
        model.session.run(["logits"], {"input": np.zeros((n, 3, 224, 224), np.float32)})
    batcher = (Batcher(model.run, executor, args.max_batch, args.window_ms / 1000.0)
               if args.mode == "batch" else None)
    state = {"ready": False}
    app = FastAPI(lifespan=lifespan(batcher, executor, state))

    @app.post(f"/v2/models/{MODEL}/infer")
    async def infer(request: Request):
        body = await request.body()
        try:
            header, images = split_binary(body, int(request.headers["inference-header-content-length"]))
        except (KeyError, ValueError, orjson.JSONDecodeError) as e:
            return Response(orjson.dumps({"error": f"bad request: {e}"}), status_code=400)
        if not images:
            return Response(orjson.dumps({"error": "no images"}), status_code=400)
        if batcher is not None:
            logits = await batcher.submit(images)
        else:
            logits = await asyncio.get_running_loop().run_in_executor(executor, model.run, images)
        bad = [i for i, r in enumerate(logits) if isinstance(r, Exception)]
        if bad:
            return Response(orjson.dumps({"error": f"image {bad[0]}: {logits[bad[0]]}"}), status_code=400)
        k = 0
        for o in header.get("outputs", []):
            k = int(o.get("parameters", {}).get("classification", 0)) or k
        if k:
            data = []
            for row in logits:
                top = np.argsort(-row, kind="stable")[:k]
                data += [f"{row[c]:f}:{c}:{model.labels[c]}" for c in top]
            out = {"name": "logits", "datatype": "BYTES", "shape": [len(logits), k], "data": data}
        else:
            out = {"name": "logits", "datatype": "FP32", "shape": [len(logits), 1000],
                   "data": np.stack(logits).reshape(-1)}
        return Response(orjson.dumps({"model_name": MODEL, "outputs": [out]},
                                     option=orjson.OPT_SERIALIZE_NUMPY),
                        media_type="application/json")

    @app.get("/v2/health/ready")
    async def ready():
        return Response(b'{"ready":true}' if state["ready"] else b'{"ready":false}',
                        status_code=200 if state["ready"] else 503)

    print(f"python image baseline: onnxruntime {ort.__version__}, mode={args.mode}, "
          f"max batch {args.max_batch}, pid {os.getpid()}", flush=True)
    return app


def main() -> int:
    args = parse_args()
    uvicorn.run(create_app(args), host=args.host, port=args.port, loop="uvloop", http="httptools",
                workers=1, access_log=False, log_level="warning", backlog=2048, timeout_keep_alive=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
