"""Hugging Face TEI-compatible API (/embed, /info, /health), partly driven by the `curl` binary
so that a client other than Python's talks to the server (its Expect: 100-continue handling of
large bodies included)."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
from conftest import DEFAULT_MODEL_NAME, DIMENSIONS, MAX_TOKENS, cosine_rows

GOLDEN_COSINE = 0.9999


def curl(server, path: str, body: object | bytes | None = None, *headers: str,
         method: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """Runs curl; returns (status, lower-cased headers of the final response, body)."""
    exe = shutil.which("curl")
    if exe is None:
        pytest.fail("the curl binary is not installed (apt-get install curl)", pytrace=False)
    cmd = [exe, "-sS", "-D", "-", "--max-time", "60", server.url(path)]
    if method:
        cmd += ["-X", method]
    for h in headers:
        cmd += ["-H", h]
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    out = subprocess.run(cmd, input=data, capture_output=True, check=True, timeout=90).stdout
    # -D - prints every header block (a 100 Continue first, when there is one).
    status, headers_out = 0, {}
    while out.startswith(b"HTTP/"):
        head, _, out = out.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers_out = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers_out, out


def golden_by_text(golden_items, text: str):
    return next(g for g in golden_items if g.text == text)


def test_curl_embed_single_and_batch(server, golden_items):
    item = golden_by_text(golden_items, "A man is eating food.")
    status, headers, body = curl(server, "/embed", {"inputs": item.text})
    assert status == 200, body
    assert headers["content-type"].startswith("application/json")
    assert "server-timing" in headers
    vecs = np.array(json.loads(body))
    assert vecs.shape == (1, DIMENSIONS)  # Always an array of arrays, as TEI answers.
    assert cosine_rows(vecs, item.embedding)[0] >= GOLDEN_COSINE
    assert np.linalg.norm(vecs[0]) == pytest.approx(1.0, abs=1e-5)

    items = golden_items[8:16]
    status, _, body = curl(server, "/embed", {"inputs": [g.text for g in items]})
    assert status == 200, body
    vecs = np.array(json.loads(body))
    assert vecs.shape == (len(items), DIMENSIONS)
    assert cosine_rows(vecs, np.array([g.embedding for g in items])).min() >= GOLDEN_COSINE


def test_curl_info(server):
    status, _, body = curl(server, "/info")
    assert status == 200, body
    info = json.loads(body)
    assert info["model_id"] == DEFAULT_MODEL_NAME
    assert info["max_input_length"] == MAX_TOKENS
    assert info["max_client_batch_size"] >= 1
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert isinstance(info["version"], str) and info["version"]


def test_curl_health(server):
    status, _, body = curl(server, "/health")
    assert status == 200
    assert json.loads(body) == {"status": "ok"}


def test_curl_openai_embeddings(server, golden_items):
    item = golden_by_text(golden_items, "How do I reset my password?")
    status, headers, body = curl(server, "/v1/embeddings",
                                 {"input": [item.text], "model": DEFAULT_MODEL_NAME})
    assert status == 200, body
    assert headers.get("x-tailcut-variant") == "fp32"
    j = json.loads(body)
    assert j["object"] == "list" and j["model"] == DEFAULT_MODEL_NAME
    assert j["data"][0]["object"] == "embedding" and j["data"][0]["index"] == 0
    assert cosine_rows(np.array(j["data"][0]["embedding"]), item.embedding)[0] >= GOLDEN_COSINE
    assert j["usage"]["prompt_tokens"] == j["usage"]["total_tokens"] > 0


def test_curl_large_body_with_expect_continue(server):
    # Over 1 MiB: curl sends "Expect: 100-continue" and waits for the interim response.
    texts = ["lorem ipsum dolor " * 9000] * 8
    payload = json.dumps({"inputs": texts, "truncate": True}).encode()
    assert len(payload) > 1024 * 1024
    status, _, body = curl(server, "/embed", payload, "Expect: 100-continue")
    assert status == 200, body[:500]
    vecs = np.array(json.loads(body))
    assert vecs.shape == (8, DIMENSIONS)
    np.testing.assert_allclose(vecs, np.repeat(vecs[:1], 8, axis=0), atol=1e-5)


def test_normalize_false_gives_raw_vectors(server, golden_items):
    texts = [g.text for g in golden_items[8:14]]
    normalized = np.array(server.post("/embed", {"inputs": texts}).json())
    r = server.post("/embed", {"inputs": texts, "normalize": False})
    assert r.status_code == 200, r.text
    raw = np.array(r.json())
    norms = np.linalg.norm(raw, axis=1)
    assert np.all(np.abs(norms - 1.0) > 1e-3), f"normalize=false gave unit vectors: {norms}"
    np.testing.assert_allclose(raw / norms[:, None], normalized, atol=2e-6)
    explicit = np.array(server.post("/embed", {"inputs": texts, "normalize": True}).json())
    np.testing.assert_allclose(explicit, normalized, atol=2e-6)


def test_truncate_defaults_to_false(server):
    long_text = "word " * 400  # 402 tokens with [CLS] and [SEP].
    r = server.post("/embed", {"inputs": long_text})
    assert r.status_code == 413, r.text
    body = r.json()
    assert body["error_type"] == "Validation"
    assert "256" in body["error"] and "tokens" in body["error"]
    # One over-long input fails the whole request, wherever it is.
    r = server.post("/embed", {"inputs": ["short", long_text]})
    assert r.status_code == 413 and "input 1" in r.json()["error"]


def test_truncate_true_embeds_the_first_256_tokens(server, golden_items, hf_tokenizer):
    long_items = [g for g in golden_items if len(hf_tokenizer.encode(g.text).ids) >= MAX_TOKENS]
    assert long_items, "golden data should hold texts longer than 256 tokens"
    r = server.post("/embed", {"inputs": [g.text for g in long_items], "truncate": True})
    assert r.status_code == 200, r.text
    got = np.array(r.json())
    assert cosine_rows(got, np.array([g.embedding for g in long_items])).min() >= GOLDEN_COSINE
    # A text of exactly 256 tokens is not "too long" even without truncation.
    exact = "word " * (MAX_TOKENS - 2)
    assert len(hf_tokenizer.encode(exact).ids) == MAX_TOKENS
    assert server.post("/embed", {"inputs": exact}).status_code == 200
    assert server.post("/embed", {"inputs": exact + " word"}).status_code == 413


def test_tei_and_openai_agree(server, golden_items):
    texts = [g.text for g in golden_items[20:30]]
    tei = np.array(server.post("/embed", {"inputs": texts}).json())
    oa = server.embed(texts)
    np.testing.assert_allclose(tei, oa, atol=1e-6)


def test_tei_error_shape(server):
    r = server.post("/embed", {"inputs": 5})
    assert r.status_code == 400
    assert r.json()["error_type"] == "Validation" and "inputs" in r.json()["error"]
