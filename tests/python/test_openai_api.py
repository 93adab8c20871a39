"""OpenAI-compatible API (/v1/embeddings, /v1/models) driven by the official `openai` client
against the real server: embeddings equal the PyTorch golden vectors, usage counts equal
Hugging Face tokenizers', and errors map to the client's exception types."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest
from conftest import DEFAULT_MODEL_NAME, DIMENSIONS, cosine_rows

GOLDEN_COSINE = 0.9999


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0,
                         timeout=60)


def vectors(response) -> np.ndarray:
    data = sorted(response.data, key=lambda d: d.index)
    return np.array([d.embedding for d in data], dtype=np.float64)


def test_single_input_matches_golden(client, golden_items):
    item = next(g for g in golden_items if g.text == "The cat sat on the mat.")
    r = client.embeddings.create(input=item.text, model="default", encoding_format="float")
    assert len(r.data) == 1 and r.data[0].index == 0
    got = vectors(r)
    assert got.shape == (1, DIMENSIONS)
    assert cosine_rows(got, item.embedding)[0] >= GOLDEN_COSINE
    assert np.linalg.norm(got[0]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("model", ["default", DEFAULT_MODEL_NAME])
def test_every_golden_text_in_one_list(client, golden_items, hf_tokenizer, model):
    # The empty string is not a valid OpenAI input; the server accepts it, and golden holds it.
    texts = [g.text for g in golden_items]
    r = client.embeddings.create(input=texts, model=model, encoding_format="float")
    assert r.model == model  # Answered with the name the client used, as OpenAI does.
    assert [d.index for d in r.data] == list(range(len(texts)))
    got = vectors(r)
    want = np.array([g.embedding for g in golden_items])
    cos = cosine_rows(got, want)
    worst = int(np.argmin(cos))
    assert cos.min() >= GOLDEN_COSINE, f"text {texts[worst]!r}: cosine {cos[worst]:.6f}"
    tokens = sum(len(hf_tokenizer.encode(t).ids) for t in texts)
    assert r.usage.prompt_tokens == tokens
    assert r.usage.total_tokens == tokens


def test_base64_default_decodes_to_float_vectors(client, golden_items):
    texts = [g.text for g in golden_items[8:20]]
    as_float = client.embeddings.create(input=texts, model="default", encoding_format="float")
    # The client asks for base64 by default and decodes it to floats itself. Float JSON holds
    # the shortest decimal that rounds to each float32, so compare as float32: bit-identical.
    implicit = client.embeddings.create(input=texts, model="default")
    np.testing.assert_array_equal(vectors(implicit).astype(np.float32),
                                  vectors(as_float).astype(np.float32))


def test_base64_wire_format_is_little_endian_float32(client, server, golden_items):
    text = golden_items[9].text
    raw = server.post("/v1/embeddings", {"input": [text, text], "encoding_format": "base64"})
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert [d["object"] for d in body["data"]] == ["embedding", "embedding"]
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in body["data"]]
    assert all(v.shape == (DIMENSIONS,) for v in decoded)
    # The same request shape (one batch of two equal texts) gives the same numbers.
    as_float = client.embeddings.create(input=[text, text], model="default",
                                        encoding_format="float")
    np.testing.assert_array_equal(np.stack(decoded), vectors(as_float).astype(np.float32))
    np.testing.assert_array_equal(decoded[0], decoded[1])


def test_usage_counts_match_hf_tokenizer(client, hf_tokenizer, sample_texts):
    texts = sample_texts[:40] + ["x " * 400]  # The last one is truncated to 256 tokens.
    r = client.embeddings.create(input=texts, model="default", encoding_format="float")
    want = sum(len(hf_tokenizer.encode(t).ids) for t in texts)
    assert r.usage.prompt_tokens == want == r.usage.total_tokens
    single = client.embeddings.create(input="Hello", model="default", encoding_format="float")
    assert single.usage.prompt_tokens == len(hf_tokenizer.encode("Hello").ids) == 3


def test_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.embeddings.create(input="hi", model="no-such-model")
    assert e.value.status_code == 404
    assert "no-such-model" in str(e.value)


def test_dimensions(client):
    ok = client.embeddings.create(input="hi", model="default", dimensions=DIMENSIONS,
                                  encoding_format="float")
    assert len(ok.data[0].embedding) == DIMENSIONS
    for dims in (128, 512):
        with pytest.raises(openai.BadRequestError) as e:
            client.embeddings.create(input="hi", model="default", dimensions=dims)
        assert e.value.status_code == 400
        assert "dimensions" in str(e.value)


def test_models_list_and_retrieve(client):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert DEFAULT_MODEL_NAME in ids
    m = client.models.retrieve(DEFAULT_MODEL_NAME)
    assert m.id == DEFAULT_MODEL_NAME and m.object == "model" and m.owned_by == "tailcut"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_error_body_shape(server):
    r = server.post("/v1/embeddings", {"input": "hi", "model": "nope"})
    assert r.status_code == 404
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert "nope" in err["message"] and err["code"] == 404
