"""TEI's /rerank on the real server with the real cross-encoder (models/minilm-l6-qqp-reranker,
exported by scripts/setup.sh): scores match ONNX Runtime on the same file with Hugging Face's
tokenizer (pair template, token types), the answer is ordered and shaped as TEI's, the
variants and the embedding cache apply, and bad input gets a clear error without harming the
server.
"""

from __future__ import annotations

import numpy as np
import pytest
import requests
from conftest import (RERANKER_NAME, TailcutServer, make_model_repository, require_reranker_model,
                      scrape, value)

QUERY = "How do I learn Python quickly?"
TEXTS = ["What is the fastest way to learn Python?", "How do I learn French quickly?",
         "What is Python?", "How can I learn Python fast?"]


@pytest.fixture(scope="module")
def server(tailcut_bin, tmp_path_factory):
    repo = make_model_repository(tmp_path_factory.mktemp("models"))
    (repo / RERANKER_NAME).symlink_to(require_reranker_model(), target_is_directory=True)
    with TailcutServer(model_repository=repo, name="rerank",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


def rerank(server, body, headers=None) -> requests.Response:
    return requests.post(server.url("/rerank"), json=body, headers=headers or {}, timeout=30)


def onnx_logits(variant_file: str, pairs: list[tuple[str, str]]) -> np.ndarray:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    folder = require_reranker_model()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.enable_truncation(256)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(pairs)
    feeds = {"input_ids": np.array([e.ids for e in enc], np.int64),
             "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
             "token_type_ids": np.array([e.type_ids for e in enc], np.int64)}
    session = ort.InferenceSession(str(folder / variant_file), providers=["CPUExecutionProvider"])
    return session.run(["logit"], feeds)[0][:, 0]


def test_scores_are_the_models_and_come_highest_first(server):
    r = rerank(server, {"query": QUERY, "texts": TEXTS, "return_text": True})
    assert r.status_code == 200, r.text
    assert r.headers["X-Tailcut-Variant"] == "fp32"
    got = r.json()
    assert [e["text"] for e in got] == [TEXTS[e["index"]] for e in got]
    assert sorted(e["index"] for e in got) == list(range(len(TEXTS)))
    scores = [e["score"] for e in got]
    assert scores == sorted(scores, reverse=True)
    expected = onnx_logits("model.onnx", [(QUERY, t) for t in TEXTS])
    by_index = {e["index"]: e["score"] for e in got}
    np.testing.assert_allclose([by_index[i] for i in range(len(TEXTS))],
                               1 / (1 + np.exp(-expected)), atol=1e-4)
    # The paraphrases rank above the other questions.
    assert {got[0]["index"], got[1]["index"]} == {0, 3}

    raw = rerank(server, {"query": QUERY, "texts": TEXTS, "raw_scores": True}).json()
    assert "text" not in raw[0]
    np.testing.assert_allclose([{e["index"]: e["score"] for e in raw}[i] for i in range(len(TEXTS))],
                               expected, atol=1e-4)


def test_the_int8_variant_serves_when_pinned_and_a_repeat_is_a_cache_hit(server):
    body = {"query": QUERY, "texts": TEXTS[:2], "raw_scores": True, "precision": "int8"}
    first = rerank(server, body)
    assert first.status_code == 200, first.text
    assert first.headers["X-Tailcut-Variant"] == "int8-per-token"
    expected = onnx_logits("model.int8-per-token.onnx", [(QUERY, t) for t in TEXTS[:2]])
    np.testing.assert_allclose([{e["index"]: e["score"] for e in first.json()}[i] for i in (0, 1)],
                               expected, atol=2e-3)
    again = rerank(server, body)
    assert again.json() == first.json()
    assert again.headers["X-Tailcut-Cache-Hits"] == "2"
    # The pair, not the texts alone, is the key: the same two texts the other way round are
    # another input.
    swapped = rerank(server, {"query": TEXTS[0], "texts": [QUERY], "precision": "int8"})
    assert swapped.headers["X-Tailcut-Cache-Hits"] == "0"


def test_a_long_pair_is_refused_unless_truncation_is_asked_for(server):
    long_text = "word " * 400
    r = rerank(server, {"query": QUERY, "texts": [long_text]})
    assert r.status_code == 413, r.text
    assert "256 tokens" in r.json()["error"]
    ok = rerank(server, {"query": QUERY, "texts": [long_text], "truncate": True})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("body, status, names", [
    ({"texts": ["a"]}, 400, "'query' is required"),
    ({"query": "a"}, 400, "'texts' is required"),
    ({"query": "a", "texts": []}, 400, "'texts' must not be empty"),
    ({"query": 3, "texts": ["a"]}, 400, "'query'"),
    ({"query": "a", "texts": ["b", 7]}, 400, "'texts[1]'"),
    ({"query": "a", "texts": ["b"], "raw_scores": "yes"}, 400, "'raw_scores'"),
    ({"query": "a", "texts": ["b"], "truncation_direction": "Left"}, 400, "truncation_direction"),
    ({"query": "a", "texts": ["b"], "model": "all-MiniLM-L6-v2"}, 400, "not a reranker"),
    ({"query": "a", "texts": ["b"], "model": "nope"}, 404, "'nope' does not exist"),
    ({"query": "a", "texts": ["b"], "precision": "int3"}, 400, "int3"),
])
def test_bad_requests_get_an_error_naming_the_problem(server, body, status, names):
    r = rerank(server, body)
    assert r.status_code == status, r.text
    assert names in r.json()["error"], r.text
    assert rerank(server, {"query": "a", "texts": ["b"]}).status_code == 200


def test_other_routes_send_a_reranker_to_rerank(server):
    r = requests.post(server.url("/embed"), json={"inputs": "a", "model": RERANKER_NAME},
                      timeout=10)
    assert r.status_code == 400 and "/rerank" in r.json()["error"], r.text
    r = requests.post(server.url("/v1/embeddings"), json={"input": "a", "model": RERANKER_NAME},
                      timeout=10)
    assert r.status_code == 400 and "/rerank" in r.text, r.text
    r = requests.post(server.url(f"/v2/models/{RERANKER_NAME}/infer"),
                      json={"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                                        "data": ["a"]}]}, timeout=10)
    assert r.status_code == 400 and "/rerank" in r.text, r.text
    meta = requests.get(server.url(f"/v2/models/{RERANKER_NAME}"), timeout=10).json()
    assert meta["kind"] == "reranker"
    # The embedding model is still the default for /embed.
    assert requests.post(server.url("/embed"), json={"inputs": "a"}, timeout=10).status_code == 200
    fams = scrape(server)
    assert value(fams, "tailcut_requests_total", route="/rerank", status="200") >= 1
