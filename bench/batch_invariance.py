#!/usr/bin/env python3
"""Whether continuous batching changes greedy answers: eight chat questions asked one at a
time, then all at once (three times), against `tailcut serve` with the packaged SmolLM2 GGUF
in each KV-cache layout (model.yaml `kv_cache: per_sequence`, the default, and `shared`).
Prints, per layout, how many of the concurrent answers differ from the lone ones (whole
answers, --max-tokens tokens each). Prefix reuse is on in both (a lone answer's sequence keeps
its tokens), so the concurrent ones start from kept prompts as a client's repeat would.

  .venv/bin/python bench/batch_invariance.py [--max-tokens 48] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
GGUF = REPO / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTIONS = [
    "Hi", "What is the capital of France?",
    "Name three colours of the rainbow and say one thing about each of them.",
    "Write one sentence about the sea, the wind, the boats in the harbour and the fishermen who "
    "go out before dawn every morning of the year, in any weather.",
    "Explain in two sentences why the sky is blue.", "List four animals that live in the ocean.",
    "What is 12 times 7?", "Tell me a short story about a robot learning to paint."]


def run(layout: str, args: argparse.Namespace, tmp: Path) -> tuple[int, int]:
    folder = tmp / layout / "smol"
    folder.mkdir(parents=True)
    (folder / GGUF.name).symlink_to(GGUF)
    (folder / "model.yaml").write_text(
        f"name: smol\nkind: generative\nfile: {GGUF.name}\ncontext_tokens: 4096\n"
        f"max_sequences: 8\nkv_cache: {layout}\n")
    build = Path(os.environ.get("TAILCUT_BUILD_DIR", REPO / "build"))
    log = open(tmp / f"{layout}.log", "w")
    port = 18000 + os.getpid() % 1000
    proc = subprocess.Popen([str(build / "tailcut"), "serve", "--port", str(port), "--grpc-port", "0",
                             "--model-repository", str(folder.parent)], stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if requests.get(url + "/v2/health/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        else:
            sys.exit(f"{layout}: the server did not start (log {tmp / (layout + '.log')})")

        def chat(q: str) -> str:
            r = requests.post(url + "/v1/chat/completions", timeout=300, json={
                "model": "smol", "messages": [{"role": "user", "content": q}],
                "max_tokens": args.max_tokens, "temperature": 0})
            r.raise_for_status()
            return r.json()["choices"][0]["message"]["content"]

        alone = [chat(q) for q in QUESTIONS]
        differ = 0
        for _ in range(args.repeats):
            with ThreadPoolExecutor(len(QUESTIONS)) as pool:
                together = list(pool.map(chat, QUESTIONS))
            differ += sum(a != t for a, t in zip(alone, together))
        return differ, args.repeats * len(QUESTIONS)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        for layout in ("per_sequence", "shared"):
            differ, total = run(layout, args, Path(t))
            print(f"kv_cache: {layout}: {differ} of {total} concurrent answers differ from "
                  f"the lone ones ({args.max_tokens} tokens each)")


if __name__ == "__main__":
    main()
