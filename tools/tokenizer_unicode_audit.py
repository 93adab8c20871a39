#!/usr/bin/env python3
"""Audits the C++ tokenizer against Hugging Face `tokenizers` over every Unicode scalar value.

Every code point except surrogates (1,112,064 of them) is encoded in a few contexts (alone,
between letters, next to a combining mark and uppercase letters, around a literal special token
and a CJK ideograph) by HF's Tokenizer and by the C++ WordPieceTokenizer (through the
tokenize_dump binary); the ids must be identical. Any difference is printed with the code point,
its context and both id lists, and the tool exits 1.

When it fails after a `tokenizers` or utf8proc upgrade, regenerate the override table with
tools/gen_unicode_overrides.py (it pins down which property differs), rebuild, and rerun this.

Usage:
  .venv/bin/python tools/tokenizer_unicode_audit.py [--tokenizer PATH] [--build-dir DIR]
Defaults: $TAILCUT_MODEL_DIR (else <repo>/models/all-MiniLM-L6-v2)/tokenizer.json and
$TAILCUT_BUILD_DIR (else <repo>/build)/tests/text/tokenize_dump.
"""

import argparse
import base64
import json
import os
import subprocess
import sys
import time

from tokenizers import Tokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LENGTH = 256

# Each context puts the code point `c` where a different pipeline step can see it.
CONTEXTS = [
    lambda c: c,
    lambda c: f"a{c}b",
    # Uppercase neighbours (lowercasing), a following combining mark (NFD reordering against
    # c's combining class, mark stripping), repetition (runs), trailing punctuation.
    lambda c: f"X{c}\u0301y {c}{c}Z.",
    # Precomposed accent, literal special token, CJK padding.
    lambda c: f"\u00c9{c}[SEP]{c}\u4e2d",
]


def default_tokenizer():
    model_dir = os.environ.get("TAILCUT_MODEL_DIR") or os.path.join(
        REPO, "models", "all-MiniLM-L6-v2")
    return os.path.join(model_dir, "tokenizer.json")


def default_dump():
    build = os.environ.get("TAILCUT_BUILD_DIR") or os.path.join(REPO, "build")
    return os.path.join(build, "tests", "text", "tokenize_dump")


def hf_ids(tokenizer_path, texts):
    tok = Tokenizer.from_file(tokenizer_path)
    tok.no_padding()
    tok.enable_truncation(MAX_LENGTH)
    out = []
    batch = 65536
    for i in range(0, len(texts), batch):
        out.extend(e.ids for e in tok.encode_batch(texts[i:i + batch]))
    return out


def cpp_ids(dump, tokenizer_path, texts):
    payload = "".join(base64.b64encode(t.encode("utf-8")).decode("ascii") + "\n"
                      for t in texts).encode("ascii")
    proc = subprocess.run([dump, "--tokenizer", tokenizer_path, "--max-length", str(MAX_LENGTH)],
                          input=payload, capture_output=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"tokenize_dump failed ({proc.returncode}): {proc.stderr.decode()[:2000]}")
    lines = proc.stdout.decode().splitlines()
    if len(lines) != len(texts):
        sys.exit(f"tokenize_dump printed {len(lines)} lines for {len(texts)} inputs")
    return [json.loads(line)["ids"] for line in lines]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", default=default_tokenizer())
    ap.add_argument("--dump", default=default_dump(), help="path of the tokenize_dump binary")
    ap.add_argument("--show", type=int, default=40, help="mismatches to print")
    args = ap.parse_args()
    for path, what in ((args.tokenizer, "tokenizer.json"), (args.dump, "tokenize_dump")):
        if not os.path.exists(path):
            sys.exit(f"{what} not found at {path}")

    code_points = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    texts = [ctx(chr(cp)) for cp in code_points for ctx in CONTEXTS]
    start = time.time()
    expected = hf_ids(args.tokenizer, texts)
    hf_s = time.time() - start
    start = time.time()
    actual = cpp_ids(args.dump, args.tokenizer, texts)
    cpp_s = time.time() - start

    bad_cps = {}
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            bad_cps.setdefault(code_points[i // len(CONTEXTS)], []).append((texts[i], e, a))
    print(f"{len(code_points)} code points x {len(CONTEXTS)} contexts = {len(texts)} texts "
          f"(HF {hf_s:.1f}s, C++ {cpp_s:.1f}s)")
    if not bad_cps:
        print("OK: ids identical for every code point in every context")
        return 0
    print(f"MISMATCH at {len(bad_cps)} code points")
    for cp, cases in list(bad_cps.items())[:args.show]:
        text, e, a = cases[0]
        print(f"  U+{cp:04X} in {text!r}: HF {e} C++ {a} ({len(cases)} contexts)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
