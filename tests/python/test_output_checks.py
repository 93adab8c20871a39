"""What the server answers when a model's output cannot be sent: JSON has no NaN or infinity,
so a model that produces them is broken, and the answer must say so (500, a JSON error naming
the output) rather than send made-up numbers. Text-embedding rows that are not finite must
never reach the cache either: the next identical request would be served the broken row as a
hit."""

from __future__ import annotations

import shutil

import numpy as np
import onnx_models
import pytest
from conftest import TailcutServer, make_model_repository, require_default_model, scrape, value

INFER_ROUTE = "/v2/models/{name}/infer"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = make_model_repository(tmp_path_factory.mktemp("models"),
                                 {"broken": onnx_models.non_finite()}, include_default=False)
    # A text model whose embeddings are NaN, with the default model's tokenizer.
    text = repo / "nanbed"
    text.mkdir()
    (text / "model.onnx").write_bytes(onnx_models.non_finite_text().SerializeToString())
    shutil.copy(require_default_model() / "tokenizer.json", text / "tokenizer.json")
    (text / "model.yaml").write_text("kind: text-embedding\nfile: model.onnx\n"
                                     "tokenizer: tokenizer.json\noutput: sentence_embedding\n"
                                     "pooling: none\nnormalize: true\n")
    with TailcutServer(model_repository=repo, name="output-checks",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


def x_body(rows, outputs=None):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [len(rows), 3],
                        "data": [v for row in rows for v in row]}]}
    if outputs is not None:
        body["outputs"] = [{"name": n} for n in outputs]
    return body


def assert_non_finite_error(r, *needles):
    assert r.status_code == 500, f"{r.status_code}: {r.text[:300]}"
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    message = body["error"]["message"] if isinstance(body["error"], dict) else body["error"]
    assert "non-finite value (NaN or infinity)" in message, message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return body


@pytest.mark.parametrize("output,row,element", [
    ("ratio", [1, 2, 3], 0),          # +inf
    ("ratio", [0, 0, 0], 0),          # NaN
    ("ratio", [-0.0, 0, 0], 0),       # NaN (0 / 0)
    ("ratio16", [1, 1, 1], 0),
    ("ratio64", [1, 1, 1], 0),
])
def test_kserve_non_finite_output_is_500_naming_the_output(server, output, row, element):
    r = server.post("/v2/models/broken/infer", x_body([row], outputs=[output]))
    body = assert_non_finite_error(r, f"output '{output}'", f"element {element}")
    assert body["type"] == "internal_error"


def test_kserve_all_outputs_fail_on_the_first_broken_one(server):
    r = server.post("/v2/models/broken/infer", x_body([[1, 2, 3]]))
    assert_non_finite_error(r, "output 'ratio'")


def test_kserve_finite_output_of_the_same_model_is_served(server):
    r = server.post("/v2/models/broken/infer", x_body([[1, 2, 3], [0, 0, 0]], outputs=["finite"]))
    assert r.status_code == 200, r.text
    (out,) = r.json()["outputs"]
    assert out["name"] == "finite" and out["shape"] == [2, 3]
    np.testing.assert_array_equal(out["data"], [2, 3, 4, 1, 1, 1])


def test_kserve_non_finite_outputs_are_counted_as_500(server):
    before = value(scrape(server), "tailcut_requests_total", route=INFER_ROUTE, model="broken",
                   status="500")
    for _ in range(3):
        assert server.post("/v2/models/broken/infer", x_body([[1, 1, 1]])).status_code == 500
    after = value(scrape(server), "tailcut_requests_total", route=INFER_ROUTE, model="broken",
                  status="500")
    assert after - before == 3


TEXT_PATHS = {
    "openai": ("/v1/embeddings", lambda text: {"input": [text], "model": "nanbed"}),
    "tei": ("/embed", lambda text: {"inputs": [text], "model": "nanbed"}),
    "tei not normalised": ("/embed", lambda text: {"inputs": [text], "model": "nanbed",
                                                   "normalize": False}),
    "kserve": ("/v2/models/nanbed/infer",
               lambda text: {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1],
                                         "data": [text]}]}),
    "openai base64": ("/v1/embeddings", lambda text: {"input": text, "model": "nanbed",
                                                      "encoding_format": "base64"}),
}


@pytest.mark.parametrize("path", list(TEXT_PATHS), ids=lambda p: p.replace(" ", "-"))
def test_text_embedding_non_finite_is_500_and_never_cached(server, path):
    route, body = TEXT_PATHS[path]
    text = f"a sentence for {path}"
    for attempt in range(2):
        # The second, identical request must compute again (no cache hit) and fail again.
        r = server.post(route, body(text))
        assert_non_finite_error(r, "model 'nanbed'", "output 'sentence_embedding'")
    fams = scrape(server)
    assert value(fams, "tailcut_cache_lookups_total", tier="l1", result="hit") == 0
    assert value(fams, "tailcut_cache_entries", tier="l1") == 0


def test_server_is_still_healthy(server):
    assert server.get("/v2/health/ready").status_code == 200
    r = server.post("/v2/models/broken/infer", x_body([[1, 2, 3]], outputs=["finite"]))
    assert r.status_code == 200, r.text
