#!/usr/bin/env python3
"""Greedy parity: tailcut's /v1/completions against llama.cpp's own server on the same GGUF.

Starts `tailcut serve` (the repository's models/) and `llama-server` (bench/build_llama_server.sh
builds it from the same pinned source) on loopback, sends each fixed prompt to both with
temperature 0, and prints whether the generated texts and prompt token counts are identical.
Raw completions only: for chat, llama-server renders the GGUF's Jinja template (SmolLM2's adds
a default system prompt), tailcut llama.cpp's built-in ChatML, so the prompts differ.

Usage: .venv-bench/bin/python bench/greedy_parity.py [--max-tokens 24] [--llama-server PATH]
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generation_bench as gb  # noqa: E402  (server processes, paths)

PROMPTS = ["The capital of France is", "Once upon a time", "Count from 1 to 10: 1, 2,",
           "def fibonacci(n):", "The three primary colours are"]


def complete(port: int, prompt: str, max_tokens: int) -> dict:
    body = {"model": gb.MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--gguf", type=Path, default=gb.DEFAULT_GGUF)
    ap.add_argument("--llama-server", type=Path,
                    default=gb.REPO / "build-llama-server" / "bin" / "llama-server")
    args = ap.parse_args()
    import tempfile
    tmp = Path(tempfile.mkdtemp(prefix="tailcut-parity-"))
    same = 0
    with gb.tailcut(tmp, args.gguf, 4, 512, 1, "tailcut") as t, \
            gb.llama_server(tmp, args.llama_server, args.gguf, 4, 512, 1) as ls:
        for p in PROMPTS:
            a, b = complete(t.port, p, args.max_tokens), complete(ls.port, p, args.max_tokens)
            ta, tb = a["choices"][0]["text"], b["choices"][0]["text"]
            ok = ta == tb and a["usage"]["prompt_tokens"] == b["usage"]["prompt_tokens"]
            same += ok
            print(f"{'same' if ok else 'DIFFERENT'}  {p!r}: {ta!r}" + ("" if ok else f" vs {tb!r}"))
    print(f"greedy_parity: {same} of {len(PROMPTS)} identical ({args.max_tokens} tokens each)")
    return 0 if same == len(PROMPTS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
