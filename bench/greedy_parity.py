#!/usr/bin/env python3
"""Greedy parity: tailcut's /v1/completions against llama.cpp's own server on the same GGUF
(and llama-cpp-python's server, where bench/build_llama_cpp_python.sh has built it).

Starts `tailcut serve` (the repository's models/) and `llama-server` (bench/build_llama_server.sh
builds it from the same pinned source) on loopback, sends each fixed prompt to both with
temperature 0, and prints whether the generated texts and prompt token counts are identical.
Raw completions only: for chat, llama-server renders the GGUF's Jinja template (SmolLM2's adds
a default system prompt), tailcut llama.cpp's built-in ChatML, so the prompts differ.

Usage: .venv-bench/bin/python bench/greedy_parity.py [--max-tokens 24] [--llama-server PATH]
         [--tailcut PATH]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generation_bench as gb  # noqa: E402  (server processes, paths)

PROMPTS = ["The capital of France is", "Once upon a time", "Count from 1 to 10: 1, 2,",
           "def fibonacci(n):", "The three primary colours are"]


def complete(port: int, prompt: str, max_tokens: int) -> dict:
    body = {"model": gb.MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "repeat_penalty": 1.0}  # llama-cpp-python's server defaults to 1.1, the others to none
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
    ap.add_argument("--tailcut", type=Path, default=gb.BUILD / "tailcut")
    ap.add_argument("--llama-cpp-python", type=Path, default=gb.REPO / "build-llama-cpp-python",
                    help="also llama-cpp-python's server (bench/build_llama_cpp_python.sh), if built")
    args = ap.parse_args()
    import tempfile
    tmp = Path(tempfile.mkdtemp(prefix="tailcut-parity-"))
    same = 0
    systems = gb.Systems(argparse.Namespace(
        gguf=args.gguf, tailcut=args.tailcut, llama_server=args.llama_server,
        llama_cpp_python=args.llama_cpp_python, parallel=4, slot_tokens=512, prefill_chunk=256, threads=1), tmp)
    others = ["llama-server"]
    if (args.llama_cpp_python / "llama_cpp" / "lib" / "libllama.so").exists():
        others.append("llama-cpp-python")
    with contextlib.ExitStack() as stack:
        t = stack.enter_context(systems.make("tailcut", "tailcut"))
        servers = {n: stack.enter_context(systems.make(n, n)) for n in others}
        for p in PROMPTS:
            a = complete(t.port, p, args.max_tokens)
            ta, ok, why = a["choices"][0]["text"], True, ""
            for n, server in servers.items():
                b = complete(server.port, p, args.max_tokens)
                if b["choices"][0]["text"] != ta or b["usage"]["prompt_tokens"] != a["usage"]["prompt_tokens"]:
                    ok, why = False, why + f" vs {n} {b['choices'][0]['text']!r}"
            same += ok
            print(f"{'same' if ok else 'DIFFERENT'}  {p!r}: {ta!r}{why}")
    print(f"greedy_parity: {same} of {len(PROMPTS)} identical across tailcut, {', '.join(others)} "
          f"({args.max_tokens} tokens each)")
    return 0 if same == len(PROMPTS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
