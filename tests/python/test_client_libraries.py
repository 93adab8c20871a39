"""The client libraries users bring, unmodified, against the real server: tritonclient.http
(metadata, config, repository index, statistics, errors, infer with its default binary
tensors and with JSON) and huggingface_hub's
InferenceClient pointed at the server's URL (TEI's root route). Each test is the library's
quick-start call; what it gets back is checked against the server's own answer."""

from __future__ import annotations

import json

import numpy as np
import onnx_models
import pytest
import requests
import tritonclient.http as triton
from conftest import DEFAULT_MODEL_NAME, DIMENSIONS, TailcutServer, make_model_repository
from huggingface_hub import InferenceClient
from tritonclient.utils import InferenceServerException


@pytest.fixture(scope="module")
def server(tmp_path_factory, default_model_dir, tailcut_bin):
    repo = make_model_repository(tmp_path_factory.mktemp("client-models"),
                                 {"imgcls": onnx_models.image_classifier(),
                                  "mixed": onnx_models.mixed_types()})
    with TailcutServer(model_repository=repo, name="clients",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return triton.InferenceServerClient(f"127.0.0.1:{server.port}")


def test_tritonclient_reads_metadata_that_says_what_infer_takes(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready(DEFAULT_MODEL_NAME)
    meta = client.get_model_metadata(DEFAULT_MODEL_NAME)
    # One BYTES tensor of texts in, "embedding" out: what infer accepts, not the ONNX graph's
    # token tensors (those are under engine_inputs).
    assert meta["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert meta["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, DIMENSIONS]}]
    assert {t["name"] for t in meta["engine_inputs"]} >= {"input_ids", "attention_mask"}
    tensor = client.get_model_metadata("imgcls")
    assert tensor["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}]


def test_tritonclient_infers_texts_with_the_advertised_tensors(client, server):
    meta = client.get_model_metadata(DEFAULT_MODEL_NAME)
    texts = ["hello world", "tail latency is what users feel"]
    inp = triton.InferInput(meta["inputs"][0]["name"], [len(texts)], meta["inputs"][0]["datatype"])
    inp.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object), binary_data=False)
    out = triton.InferRequestedOutput(meta["outputs"][0]["name"], binary_data=False)
    got = client.infer(DEFAULT_MODEL_NAME, [inp], outputs=[out]).as_numpy("embedding")
    want = requests.post(f"{server.base_url}/v1/embeddings",
                         json={"input": texts, "model": DEFAULT_MODEL_NAME}, timeout=30).json()
    assert got.shape == (2, DIMENSIONS)
    np.testing.assert_allclose(got, [d["embedding"] for d in want["data"]], rtol=1e-5, atol=1e-6)


def test_tritonclient_reads_config_index_and_statistics(client):
    config = client.get_model_config(DEFAULT_MODEL_NAME)
    assert config["name"] == DEFAULT_MODEL_NAME and config["max_batch_size"] > 0
    # Triton's convention with a batch axis: dims leave it out.
    assert config["input"] == [{"name": "text", "data_type": "TYPE_STRING", "dims": [1]}]
    assert config["output"] == [{"name": "embedding", "data_type": "TYPE_FP32", "dims": [DIMENSIONS]}]
    assert client.get_model_config("imgcls")["input"][0]["dims"] == [3, 224, 224]

    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert {DEFAULT_MODEL_NAME, "imgcls"} <= set(index)
    assert index[DEFAULT_MODEL_NAME]["state"] == "READY"

    before = client.get_inference_statistics(DEFAULT_MODEL_NAME)["model_stats"][0]
    inp = triton.InferInput("text", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"count me"], dtype=object), binary_data=False)
    client.infer(DEFAULT_MODEL_NAME, [inp], outputs=[triton.InferRequestedOutput("embedding", binary_data=False)])
    with pytest.raises(InferenceServerException):  # A bad request counts as a failure.
        client.infer(DEFAULT_MODEL_NAME, [triton.InferInput("text", [1], "BYTES")])
    after = client.get_inference_statistics(DEFAULT_MODEL_NAME)["model_stats"][0]
    assert after["name"] == DEFAULT_MODEL_NAME
    s0, s1 = before["inference_stats"], after["inference_stats"]
    assert s1["success"]["count"] == s0["success"]["count"] + 1
    assert s1["success"]["ns"] > s0["success"]["ns"]
    assert s1["compute_infer"]["ns"] > s0["compute_infer"]["ns"]
    assert s1["fail"]["count"] == s0["fail"]["count"] + 1
    assert after["last_inference"] > 0
    # Metadata reads are not inferences.
    client.get_model_metadata(DEFAULT_MODEL_NAME)
    again = client.get_inference_statistics(DEFAULT_MODEL_NAME)["model_stats"][0]["inference_stats"]
    assert again["success"]["count"] == s1["success"]["count"]
    every = {m["name"] for m in client.get_inference_statistics()["model_stats"]}
    assert {DEFAULT_MODEL_NAME, "imgcls"} <= every


def test_tritonclient_formats_the_servers_errors(client, server):
    # KServe's error body is {"error": "<message>"}; tritonclient builds its exception text from
    # it (an object there made its own str() raise). Unknown routes under /v2 answer the same way.
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("no-such-model")
    assert "no-such-model" in str(e.value)
    r = requests.get(f"{server.base_url}/v2/no/such/route", timeout=10)
    assert r.status_code == 404 and isinstance(r.json()["error"], str)
    r = requests.delete(f"{server.base_url}/v2/models/{DEFAULT_MODEL_NAME}", timeout=10)
    assert r.status_code == 405 and isinstance(r.json()["error"], str)
    r = requests.post(f"{server.base_url}/v2/repository/index", data="[1]", timeout=10)
    assert r.status_code == 400 and "JSON object" in r.json()["error"]


def test_repository_index_can_list_only_ready_models(server):
    r = requests.post(f"{server.base_url}/v2/repository/index", json={"ready": True}, timeout=10)
    assert r.status_code == 200 and all(m["state"] == "READY" for m in r.json())
    r = requests.post(f"{server.base_url}/v2/repository/index", json={"ready": "yes"}, timeout=10)
    assert r.status_code == 400 and "'ready'" in r.json()["error"]


def test_huggingface_inference_client_gets_the_same_vectors_as_embed(server):
    # InferenceClient(model=<URL>) posts TEI's root route.
    got = InferenceClient(model=server.base_url).feature_extraction("hello world")
    want = requests.post(f"{server.base_url}/embed", json={"inputs": "hello world"}, timeout=30).json()
    assert got.shape == (1, DIMENSIONS)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    r = requests.post(f"{server.base_url}/", json={"inputs": 3}, timeout=10)
    assert r.status_code == 400 and isinstance(r.json()["error"], str) and "error_type" in r.json()


def test_tritonclient_default_infer_sends_and_gets_binary_tensors(client):
    # tritonclient.http's defaults: inputs in binary, outputs asked in binary.
    texts = np.array([b"hello world", "caf\u00e9 \u2615".encode()], dtype=object)
    inp = triton.InferInput("text", [2], "BYTES")
    inp.set_data_from_numpy(texts)
    binary = client.infer(DEFAULT_MODEL_NAME, [inp]).as_numpy("embedding")
    inp_json = triton.InferInput("text", [2], "BYTES")
    inp_json.set_data_from_numpy(texts, binary_data=False)
    as_json = client.infer(DEFAULT_MODEL_NAME, [inp_json],
                           outputs=[triton.InferRequestedOutput("embedding", binary_data=False)])
    assert binary.dtype == np.float32 and binary.shape == (2, DIMENSIONS)
    np.testing.assert_array_equal(binary, as_json.as_numpy("embedding"))


def test_binary_tensors_of_every_width_round_trip_through_a_tensor_model(client):
    rng = np.random.default_rng(3)
    ids = rng.integers(-8000, 8000, size=(3, 4)).astype(np.int64)  # float16(ids) * scale stays finite.
    scale = rng.standard_normal((3, 4)).astype(np.float16)
    def infer(binary: bool):
        a = triton.InferInput("ids", list(ids.shape), "INT64")
        a.set_data_from_numpy(ids, binary_data=binary)
        b = triton.InferInput("scale", list(scale.shape), "FP16")
        b.set_data_from_numpy(scale, binary_data=binary)
        outs = [triton.InferRequestedOutput(n, binary_data=binary) for n in ("echo", "scaled")]
        return client.infer("mixed", [a, b], outputs=outs)
    binary, as_json = infer(True), infer(False)
    np.testing.assert_array_equal(binary.as_numpy("echo"), ids)
    np.testing.assert_array_equal(as_json.as_numpy("echo"), ids)
    np.testing.assert_array_equal(binary.as_numpy("scaled"), as_json.as_numpy("scaled"))
    assert binary.as_numpy("scaled").dtype == np.float16
    image = rng.integers(0, 10, size=(2, 3, 224, 224)).astype(np.float32)
    x = triton.InferInput("image", list(image.shape), "FP32")
    x.set_data_from_numpy(image)
    assert client.infer("imgcls", [x]).as_numpy(
        client.get_model_metadata("imgcls")["outputs"][0]["name"]).shape[0] == 2


@pytest.mark.parametrize("case", ["size past the body", "bytes left over", "shape disagrees",
                                  "truncated string", "header not a number", "data and binary"])
def test_malformed_binary_requests_get_a_400_naming_the_problem(server, case):
    header = {"inputs": [{"name": "ids", "datatype": "INT64", "shape": [1, 4],
                          "parameters": {"binary_data_size": 32}},
                         {"name": "scale", "datatype": "FP16", "shape": [1, 4],
                          "parameters": {"binary_data_size": 8}}]}
    model, blob, want = "mixed", bytes(40), ""
    if case == "size past the body":
        blob, want = bytes(39), "only 7 follow"
    elif case == "bytes left over":
        blob, want = bytes(41), "belong to no input"
    elif case == "shape disagrees":
        header["inputs"][0]["shape"] = [1, 3]
        want = "needs 24"
    elif case == "truncated string":
        model = DEFAULT_MODEL_NAME
        header = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                              "parameters": {"binary_data_size": 6}}]}
        blob, want = b"\x05\x00\x00\x00ab", "element 0 says 5 bytes"
    elif case == "data and binary":
        header["inputs"][1]["data"] = [1, 2, 3, 4]
        want = "both given"
    body = json.dumps(header).encode()
    length = "ten" if case == "header not a number" else str(len(body))
    if case == "header not a number":
        want = "decimal byte count"
    r = requests.post(f"{server.base_url}/v2/models/{model}/infer", data=body + blob, timeout=10,
                      headers={"Inference-Header-Content-Length": length,
                               "Content-Type": "application/octet-stream"})
    assert r.status_code == 400, r.text
    assert want in r.json()["error"], r.json()
    assert requests.get(f"{server.base_url}/v2/health/ready", timeout=10).status_code == 200
