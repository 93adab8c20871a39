"""The README's tour, run as written: every fenced `sh` block of its "A short tour" section,
against a real `tailcut serve` on the repository's models/ folder (what `make run` serves), from
the repository root, with bash. The only edits are the address (the README's localhost:8080
becomes this server's port) and the scratch photo's path (a temporary folder instead of /tmp).

Each block must exit 0 and print what the README says it prints; every block has a check here
and every check a block, so a block added to the tour, or one that stops working, fails the
suite until this file and the README agree again."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from conftest import REPO_ROOT, TailcutServer, model_dir, require_file

README = REPO_ROOT / "README.md"
TOUR_HEADING = "## A short tour"
README_ADDRESS = "localhost:8080"
README_PHOTO = "/tmp/photo.jpg"
# The models the tour names, as set-up installs them beside the default one.
TOUR_MODELS = ("minilm-l6-qqp-reranker", "efficientnet-lite0", "smollm2-135m-instruct")
DIMENSIONS = 384


def tour_blocks() -> list[str]:
    """The fenced sh blocks between the tour's heading and the next second-level heading."""
    text = README.read_text(encoding="utf-8")
    start = text.find("\n" + TOUR_HEADING + "\n")
    assert start >= 0, f"README.md has no '{TOUR_HEADING}' section"
    section = text[start + len(TOUR_HEADING) + 2:]
    end = section.find("\n## ")
    section = section if end < 0 else section[:end]
    return re.findall(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)


# --- What each block must print ------------------------------------------------------------


def check_embeddings(out: str) -> None:
    body = json.loads(out)
    rows = sorted(body["data"], key=lambda d: d["index"])
    assert len(rows) == 2, body
    vectors = [r["embedding"] for r in rows]
    for v in vectors:
        assert len(v) == DIMENSIONS and all(math.isfinite(x) for x in v)
        assert abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-3  # L2-normalised
    assert vectors[0] != vectors[1], "two different texts got the same vector"
    assert body["usage"]["prompt_tokens"] > 0, body


def check_streamed_chat(out: str) -> None:
    events = [line[len("data: "):] for line in out.splitlines() if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", out[-500:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant", chunks[0]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text.strip(), f"the streamed answer is empty: {out[-500:]}"
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length"), chunks[-1]


def check_rerank(out: str) -> None:
    ranked = json.loads(out)
    assert [r["index"] for r in ranked] == [1, 0], ranked  # the paraphrase first
    assert 0 <= ranked[1]["score"] < ranked[0]["score"] <= 1, ranked


def check_image(out: str) -> None:
    # numpy prints the BYTES tensor as [[b'score:index:label' ...]], highest score first.
    entries = re.findall(r"b'(-?[\d.e+-]+):(\d+):([^']+)'", out)
    assert len(entries) == 3, out
    scores = [float(s) for s, _, _ in entries]
    assert scores == sorted(scores, reverse=True), out
    assert entries[0][2] == "palace", out  # scikit-learn's china.jpg: a Chinese temple


def check_openai(out: str) -> None:
    lines = out.strip().splitlines()
    assert lines[0] == f"2 vectors of {DIMENSIONS} numbers", out
    assert len(lines) >= 2 and "".join(lines[1:]).strip(), f"no streamed answer: {out}"


# A block is recognised by a string only it holds; each check applies to exactly one block.
CHECKS: dict[str, tuple[str, Callable[[str], None]]] = {
    "embeddings": ("curl -s localhost:8080/v1/embeddings", check_embeddings),
    "streamed-chat": ("curl -sN localhost:8080/v1/chat/completions", check_streamed_chat),
    "rerank": ("curl -s localhost:8080/rerank", check_rerank),
    "image": ("import numpy as np, tritonclient.http", check_image),
    "openai": ("from openai import OpenAI", check_openai),
}


def check_name(block: str) -> str:
    names = [name for name, (marker, _) in CHECKS.items() if marker in block]
    assert len(names) == 1, f"a tour block matches {names or 'no'} check(s):\n{block}"
    return names[0]


BLOCKS = tour_blocks()


def test_every_tour_block_has_a_check_and_every_check_a_block():
    assert sorted(check_name(b) for b in BLOCKS) == sorted(CHECKS)


@pytest.fixture(scope="module")
def server(tmp_path_factory, tailcut_bin, default_model_dir):
    repository = model_dir().parent  # models/, as `make run` serves it
    for name in TOUR_MODELS:
        require_file(repository / name / "model.yaml", f"the tour's model {name}",
                     "Run scripts/setup.sh (make run and make test do): it installs every model "
                     "the README's tour uses.")
    with TailcutServer(model_repository=repository, name="readme-tour",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.mark.parametrize("block", BLOCKS, ids=[check_name(b) for b in BLOCKS])
def test_the_tour_block_runs_as_written(block, server, tmp_path):
    command = (block.replace(README_ADDRESS, f"127.0.0.1:{server.port}")
               .replace(README_PHOTO, str(tmp_path / "photo.jpg")))
    # As a user's shell would run it, without TAILCUT_* settings the test's environment may hold.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAILCUT_")}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (f"exit {done.returncode}\n--- command ---\n{command}\n"
                                  f"--- stdout ---\n{done.stdout[-2000:]}\n"
                                  f"--- stderr ---\n{done.stderr[-2000:]}")
    CHECKS[check_name(block)][1](done.stdout)
    assert server.alive()
