#!/usr/bin/env python3
"""Greedy parity: tailcut's /v1/completions and /v1/chat/completions against llama.cpp's own
server on the same GGUF (and llama-cpp-python's server, where bench/build_llama_cpp_python.sh
has built it).

Starts `tailcut serve` (the repository's models/) and `llama-server` (bench/build_llama_server.sh
builds it from the same pinned source) on loopback, sends each fixed prompt (raw completions)
and each fixed conversation (chat completions, with and without a system message) to both with
temperature 0, and prints whether the generated texts and prompt token counts are identical.
tailcut and llama-server render chat with the GGUF's Jinja template through llama.cpp's
common/chat.h (SmolLM2's adds a default system prompt to a conversation without one).

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
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "Answer in one word."},
     {"role": "user", "content": "What colour is the sky?"}],
    [{"role": "system", "content": "You are a pirate."},
     {"role": "user", "content": "Tell me about your ship."}],
    [{"role": "user", "content": "Name a fruit."}, {"role": "assistant", "content": "Apple."},
     {"role": "user", "content": "Name another one."}],
]


def post(port: int, path: str, body: dict) -> dict:
    body = {"model": gb.MODEL_NAME, "temperature": 0,
            "repeat_penalty": 1.0,  # llama-cpp-python's server defaults to 1.1, the others to none
            **body}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def complete(port: int, prompt: str, max_tokens: int) -> tuple[str, int]:
    r = post(port, "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens})
    return r["choices"][0]["text"], r["usage"]["prompt_tokens"]


def chat(port: int, messages: list[dict], max_tokens: int) -> tuple[str, int]:
    r = post(port, "/v1/chat/completions", {"messages": messages, "max_tokens": max_tokens})
    return r["choices"][0]["message"]["content"], r["usage"]["prompt_tokens"]


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
    cases = [(complete, p, repr(p)) for p in PROMPTS] + \
        [(chat, m, "chat " + " | ".join(f"{x['role']}: {x['content']}" for x in m)) for m in CHATS]
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
        for ask, request, name in cases:
            ta, na = ask(t.port, request, args.max_tokens)
            ok, why = True, ""
            for n, server in servers.items():
                tb, nb = ask(server.port, request, args.max_tokens)
                if tb != ta or nb != na:
                    ok, why = False, why + f" vs {n}'s ({nb} prompt tokens) {tb!r}"
            same += ok
            print(f"{'same' if ok else 'DIFFERENT'}  {name} ({na} prompt tokens): {ta!r}{why}")
    print(f"greedy_parity: {same} of {len(cases)} identical across tailcut, {', '.join(others)} "
          f"({len(PROMPTS)} completions, {len(CHATS)} chats; {args.max_tokens} tokens each)")
    return 0 if same == len(cases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
