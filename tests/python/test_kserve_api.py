"""KServe v2 API (/v2/...) with ONNX models the test generates: an image classifier with a
dynamic batch axis, a model with INT64 and FP16 tensors, and a model with a fixed first axis.
Results must equal onnxruntime-python's on the same model file and inputs."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import onnx_models
import onnxruntime as ort
import pytest
from conftest import DEFAULT_MODEL_NAME, DIMENSIONS, TailcutServer, make_model_repository, run_threads

RTOL = 1e-4
ATOL = 1e-6


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict[str, onnx.ModelProto]:
    return {
        "imgcls": onnx_models.image_classifier(),
        "mixed": onnx_models.mixed_types(),
        "fixed": onnx_models.fixed_shape(),
        "mixing": onnx_models.batch_mixing(),
    }


@pytest.fixture(scope="module")
def repo(tmp_path_factory, model_files, default_model_dir):
    return make_model_repository(tmp_path_factory.mktemp("kserve-models"), model_files)


@pytest.fixture(scope="module")
def kserve(repo, tailcut_bin, tmp_path_factory):
    with TailcutServer(model_repository=repo, name="kserve",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def ort_sessions(repo) -> dict[str, ort.InferenceSession]:
    return {name: ort.InferenceSession(str(repo / name / "model.onnx"),
                                       providers=["CPUExecutionProvider"])
            for name in ("imgcls", "mixed", "fixed")}


def images(seed: int, n: int) -> np.ndarray:
    # Small integer pixel values: exact in FP32 and short in JSON (the IO thread parses less).
    return np.random.default_rng(seed).integers(0, 10, size=(n, 3, 224, 224)).astype(np.float32)


def tensor(name: str, datatype: str, array: np.ndarray, nested: bool = False) -> dict:
    data = array.tolist() if nested else array.reshape(-1).tolist()
    if datatype in ("FP32", "FP16") and array.dtype.kind == "f" and np.all(array == np.round(array)):
        data = array.astype(np.int64).tolist() if nested else array.astype(np.int64).reshape(-1).tolist()
    return {"name": name, "datatype": datatype, "shape": list(array.shape), "data": data}


def output(body: dict, name: str) -> np.ndarray:
    out = next(o for o in body["outputs"] if o["name"] == name)
    dtype = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64}[out["datatype"]]
    return np.asarray(out["data"], dtype=dtype).reshape(out["shape"])


def infer(server, model: str, body: dict, **kwargs):
    return server.post(f"/v2/models/{model}/infer", body, **kwargs)


# --- Metadata ------------------------------------------------------------------------------------

def test_server_metadata_and_health(kserve):
    r = kserve.get("/v2")
    assert r.status_code == 200
    assert r.json()["name"] == "tailcut" and r.json()["version"]
    assert kserve.get("/v2/health/live").json() == {"live": True}
    r = kserve.get("/v2/health/ready")
    assert r.status_code == 200 and r.json()["ready"] is True


def test_model_metadata(kserve):
    m = kserve.get("/v2/models/imgcls").json()
    assert m["name"] == "imgcls" and m["kind"] == "tensor" and m["state"] == "READY"
    assert m["platform"] == "onnxruntime_onnx" and m["versions"] == ["1"]
    assert m["inputs"] == [{"name": "image", "datatype": "FP32", "shape": [-1, 3, 224, 224]}]
    assert m["outputs"] == [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]}]
    assert m["max_batch_size"] > 1

    m = kserve.get("/v2/models/mixed").json()
    assert {i["name"]: i["datatype"] for i in m["inputs"]} == {"ids": "INT64", "scale": "FP16"}
    assert {o["name"]: o["datatype"] for o in m["outputs"]} == {"scaled": "FP16", "total": "INT64",
                                                                "echo": "INT64"}

    m = kserve.get("/v2/models/fixed").json()
    assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [2, 3]}]
    assert m["max_batch_size"] == 1  # No batch axis: requests are never concatenated.

    m = kserve.get(f"/v2/models/{DEFAULT_MODEL_NAME}").json()
    assert m["kind"] == "text-embedding" and m["dimensions"] == DIMENSIONS
    assert m["max_sequence_length"] == 256

    for name in ("imgcls", "mixed", "fixed", DEFAULT_MODEL_NAME):
        r = kserve.get(f"/v2/models/{name}/ready")
        assert r.status_code == 200 and r.json() == {"name": name, "ready": True}


def test_unknown_model_is_404(kserve):
    for path in ("/v2/models/nope", "/v2/models/nope/ready"):
        r = kserve.get(path)
        assert r.status_code == 404 and "nope" in r.json()["error"]
    r = infer(kserve, "nope", {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                                           "data": [1]}]})
    assert r.status_code == 404 and "nope" in r.json()["error"]


def test_model_listed_by_openai_route(kserve):
    ids = {m["id"]: m["kind"] for m in kserve.get("/v1/models").json()["data"]}
    assert ids == {DEFAULT_MODEL_NAME: "text-embedding", "imgcls": "tensor", "mixed": "tensor",
                   "fixed": "tensor", "mixing": "tensor"}


# --- Inference equals onnxruntime ----------------------------------------------------------------

@pytest.mark.parametrize("nested", [False, True], ids=["flat", "nested"])
def test_image_classifier_matches_onnxruntime(kserve, ort_sessions, nested):
    x = images(1, 3)
    r = infer(kserve, "imgcls", {"id": "req-1", "inputs": [tensor("image", "FP32", x, nested)]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model_name"] == "imgcls" and body["id"] == "req-1"
    got = output(body, "probabilities")
    (want,) = ort_sessions["imgcls"].run(None, {"image": x})
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-5)


def test_mixed_int64_fp16_matches_onnxruntime(kserve, ort_sessions):
    rng = np.random.default_rng(3)
    ids = rng.integers(-1000, 1000, size=(5, 4)).astype(np.int64)
    scale = rng.choice([0.5, 0.25, -2.0, 1.5, 0.125], size=(5, 4)).astype(np.float16)
    body = {"inputs": [
        {"name": "ids", "datatype": "INT64", "shape": [5, 4], "data": ids.reshape(-1).tolist()},
        {"name": "scale", "datatype": "FP16", "shape": [5, 4],
         "data": scale.astype(np.float64).reshape(-1).tolist()},
    ]}
    r = infer(kserve, "mixed", body)
    assert r.status_code == 200, r.text
    want_scaled, want_total = ort_sessions["mixed"].run(["scaled", "total"],
                                                        {"ids": ids, "scale": scale})
    got_total = output(r.json(), "total")
    assert got_total.dtype == np.int64
    np.testing.assert_array_equal(got_total, want_total)
    np.testing.assert_array_equal(output(r.json(), "scaled"), want_scaled)

    # Inputs in the other order, nested data, only some outputs requested, and ids beyond
    # int32 and double precision that must survive as INT64 both ways (float16(ids)
    # overflows, so "scaled" is not asked for: JSON has no infinity).
    ids[0, 0] = 2**53 + 1
    ids[1, 1] = -(2**63)
    want_total, want_echo = ort_sessions["mixed"].run(["total", "echo"],
                                                      {"ids": ids, "scale": scale})
    body["inputs"][0]["data"] = ids.tolist()
    body["inputs"].reverse()
    body["inputs"][0]["data"] = scale.astype(np.float64).tolist()
    body["outputs"] = [{"name": "echo"}, {"name": "total"}]
    r = infer(kserve, "mixed", body)
    assert r.status_code == 200, r.text
    assert [o["name"] for o in r.json()["outputs"]] == ["echo", "total"]
    np.testing.assert_array_equal(output(r.json(), "total"), want_total)
    np.testing.assert_array_equal(output(r.json(), "echo"), ids)
    np.testing.assert_array_equal(want_echo, ids)


def test_fixed_first_axis_model(kserve, ort_sessions):
    x = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], dtype=np.float32)
    r = infer(kserve, "fixed", {"inputs": [tensor("x", "FP32", x)]})
    assert r.status_code == 200, r.text
    (want,) = ort_sessions["fixed"].run(None, {"x": x})
    np.testing.assert_allclose(output(r.json(), "y"), want, rtol=RTOL, atol=ATOL)
    r = infer(kserve, "fixed", {"inputs": [tensor("x", "FP32", np.zeros((1, 3), np.float32))]})
    assert r.status_code == 400 and "[2, 3]" in r.json()["error"]


def test_text_model_bytes_input_equals_openai(kserve, golden_items):
    texts = [g.text for g in golden_items[8:16]]
    r = infer(kserve, DEFAULT_MODEL_NAME,
              {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts)],
                           "data": texts}]})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"]
    assert len(out) == 1 and out[0]["name"] == "embedding" and out[0]["datatype"] == "FP32"
    assert out[0]["shape"] == [len(texts), DIMENSIONS]
    got = np.asarray(out[0]["data"]).reshape(len(texts), DIMENSIONS)
    np.testing.assert_allclose(got, kserve.embed(texts), atol=1e-6)
    # [n, 1] is the shape Triton clients send for a batch of strings.
    r = infer(kserve, DEFAULT_MODEL_NAME,
              {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts), 1],
                           "data": texts}]})
    assert r.status_code == 200, r.text


# --- Errors -------------------------------------------------------------------------------------

def small_image_body(shape=(1, 3, 224, 224), datatype="FP32", name="image", count=None):
    n = int(np.prod(shape)) if count is None else count
    return {"inputs": [{"name": name, "datatype": datatype, "shape": list(shape), "data": [0] * n}]}


def mixed_body(ids_shape=(1, 4), scale_shape=(1, 4)):
    return {"inputs": [
        {"name": "ids", "datatype": "INT64", "shape": list(ids_shape),
         "data": [1] * int(np.prod(ids_shape))},
        {"name": "scale", "datatype": "FP16", "shape": list(scale_shape),
         "data": [1.0] * int(np.prod(scale_shape))},
    ]}


TEXT_BODY = {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["a"]}]}

ERROR_CASES = {
    "wrong shape": ("imgcls", small_image_body(shape=(1, 3, 224, 225)), "shape"),
    "wrong rank": ("imgcls", small_image_body(shape=(3, 224, 224)), "rank"),
    "wrong datatype": ("imgcls", small_image_body(datatype="FP64"), "datatype FP64"),
    "unknown datatype": ("imgcls", small_image_body(datatype="FLOAT"), "'FLOAT'"),
    "too few elements": ("imgcls", small_image_body(count=10), "10 elements"),
    "too many elements": ("imgcls", small_image_body(shape=(1, 3, 2, 2), count=13), "13 elements"),
    "unknown input": ("imgcls", small_image_body(name="pixels"), "unknown input 'pixels'"),
    "missing input": ("mixed", {"inputs": mixed_body()["inputs"][:1]}, "missing input 'scale'"),
    "input twice": ("mixed", {"inputs": mixed_body()["inputs"][:1] * 2}, "given twice"),
    "batch axes disagree": ("mixed", mixed_body(scale_shape=(2, 4)), "batch dimension"),
    "negative shape": ("imgcls", small_image_body(shape=(-1, 3, 224, 224), count=0), "non-negative"),
    "float for INT64": ("mixed", {"inputs": [dict(mixed_body()["inputs"][0], data=[1, 2, 3.5, 4]),
                                             mixed_body()["inputs"][1]]}, "integer"),
    "string for FP32": ("imgcls", {"inputs": [dict(small_image_body(shape=(1, 3, 1, 1))["inputs"][0],
                                                   data=["a", 0, 0])]}, "number"),
    "BYTES to tensor model": ("imgcls", {"inputs": [{"name": "image", "datatype": "BYTES",
                                                     "shape": [1], "data": ["a cat"]}]}, "BYTES"),
    "unknown output": ("fixed", {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                                             "data": [0] * 6}], "outputs": [{"name": "z"}]},
                       "no output 'z'"),
    "no inputs": ("imgcls", {"inputs": []}, "inputs"),
    "tensor to text model": (DEFAULT_MODEL_NAME, small_image_body(shape=(1,), count=1), "BYTES"),
    "BYTES shape mismatch": (DEFAULT_MODEL_NAME, {"inputs": [{"name": "t", "datatype": "BYTES",
                                                             "shape": [3], "data": ["a"]}]},
                             "1 elements but shape [3] needs 3"),
    # "outputs" is checked for text models too (it used to be ignored there, any type).
    "text outputs a string": (DEFAULT_MODEL_NAME, dict(TEXT_BODY, outputs="embedding"),
                              "field 'outputs' must be an array of objects with a 'name', got "
                              "string"),
    "text outputs of strings": (DEFAULT_MODEL_NAME, dict(TEXT_BODY, outputs=["embedding"]),
                                "outputs[0] needs a string 'name', got string"),
    "text outputs an object": (DEFAULT_MODEL_NAME, dict(TEXT_BODY, outputs={"name": "embedding"}),
                               "got object"),
    "text unknown output": (DEFAULT_MODEL_NAME, dict(TEXT_BODY, outputs=[{"name": "logits"}]),
                            "no output 'logits'"),
    "text output name a number": (DEFAULT_MODEL_NAME, dict(TEXT_BODY, outputs=[{"name": 0}]),
                                  "outputs[0] needs a string 'name'"),
    "text input name a number": (DEFAULT_MODEL_NAME,
                                 {"inputs": [dict(TEXT_BODY["inputs"][0], name=5)]},
                                 "inputs[0].name is required and must be a string"),
    "tensor outputs of strings": ("fixed", {"inputs": [{"name": "x", "datatype": "FP32",
                                                        "shape": [2, 3], "data": [0] * 6}],
                                            "outputs": ["y"]},
                                  "outputs[0] needs a string 'name', got string"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES), ids=lambda c: c.replace(" ", "-"))
def test_invalid_requests_are_400(kserve, case):
    model, body, needle = ERROR_CASES[case]
    r = infer(kserve, model, body)
    assert r.status_code == 400, f"{case}: {r.status_code} {r.text[:300]}"
    err = r.json()
    assert needle in err["error"], f"{case}: {err}"


def test_text_model_accepts_its_one_output_by_name(kserve):
    r = infer(kserve, DEFAULT_MODEL_NAME, dict(TEXT_BODY, outputs=[{"name": "embedding"}]))
    assert r.status_code == 200, r.text
    assert [o["name"] for o in r.json()["outputs"]] == ["embedding"]


@pytest.mark.parametrize("model", ["fixed", DEFAULT_MODEL_NAME])
def test_huge_timeout_parameter_is_no_deadline(kserve, model):
    # received + timeout overflowed (undefined behaviour; UBSan stops the server in CI): a
    # timeout beyond the clock's range saturates to "no deadline".
    body = TEXT_BODY if model == DEFAULT_MODEL_NAME else {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [0] * 6}]}
    for timeout in (2**63 - 1, 2**63 - 2, 2**62):
        r = infer(kserve, model, dict(body, parameters={"timeout": timeout}))
        assert r.status_code == 200, f"{timeout}: {r.status_code} {r.text[:300]}"
    assert kserve.alive()


# --- Batching ------------------------------------------------------------------------------------

def histogram(metrics_text: str, name: str, labels: str) -> dict[str, float]:
    """{le: cumulative count} plus '_count' and '_sum' of one labelled histogram series."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        m = re.match(rf'{name}_bucket\{{{re.escape(labels)},le="([^"]+)"\}} (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
        for suffix in ("_count", "_sum"):
            if line.startswith(f"{name}{suffix}{{{labels}}} "):
                out[suffix] = float(line.split()[-1])
    return out


def test_concurrent_requests_are_batched_and_correct(start_server, repo, ort_sessions):
    # Batches form when max_batch_size rows are queued or when the oldest request has waited
    # the batch timeout. With a timeout far beyond the test's duration, only full batches of 4
    # can form, whatever the machine's speed: 32 concurrent one-image requests make 8 batches.
    s = start_server("--max-batch-size", "4", "--batch-timeout-micros", "20000000",
                     model_repository=repo, name="batching")
    count = 32
    batch = images(5, count)
    (want,) = ort_sessions["imgcls"].run(None, {"image": batch})
    bodies = [json.dumps({"id": str(i), "inputs": [tensor("image", "FP32", batch[i:i + 1])]})
              for i in range(count)]
    results: dict[int, np.ndarray] = {}

    def send(i: int) -> None:
        r = s.post("/v2/models/imgcls/infer", data=bodies[i],
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        assert r.json()["id"] == str(i)
        results[i] = output(r.json(), "probabilities")

    run_threads(send, count)
    for i in range(count):
        np.testing.assert_allclose(results[i][0], want[i], rtol=RTOL, atol=ATOL,
                                   err_msg=f"request {i} got another request's answer")
    h = histogram(s.metrics(), "tailcut_batch_size", 'model="imgcls"')
    assert h["_count"] == count / 4 and h["_sum"] == count, h
    assert h["2"] == 0 and h["4"] == count / 4, f"expected only batches of 4: {h}"


def test_deeply_nested_data_is_refused_not_a_crash(kserve):
    # Regression: "data" was walked recursively, so ~2 MB of "[[[[..." overflowed the IO
    # thread's stack and killed the server; and a deep object as a leaf was dumped (also
    # recursively) into the error message.
    depth = 600_000  # Bodies of 1.2 and 3.6 MB, within the default 4 MiB limit.
    deep_arrays = "[" * depth + "]" * depth
    deep_object = '{"a":' * depth + "1" + "}" * depth
    for data, needle in ((deep_arrays, "nested deeper than its shape's 2 dimensions"),
                         (f"[0,0,0,0,0,{deep_object}]", "holds object where a number")):
        body = ('{"inputs":[{"name":"x","datatype":"FP32","shape":[2,3],"data":' + data + "}]}")
        r = kserve.post("/v2/models/fixed/infer", data=body,
                        headers={"Content-Type": "application/json"})
        assert r.status_code == 400, r.text[:300]
        assert needle in r.json()["error"]
    body = '{"input":"x","user":' + deep_object + "}"
    r = kserve.post("/v1/embeddings", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "'user' must be a string" in r.text
    assert kserve.alive()
    assert kserve.get("/v2/health/live").status_code == 200


def test_outputs_that_do_not_split_by_row_are_not_mixed_across_requests(start_server, repo):
    # Regression: "twice" = concat(x, x) has a free first axis that is not the batch. Batched
    # requests were concatenated and the output cut by position, so each request got rows of
    # the others (and a shape that did not match its data).
    s = start_server("--max-batch-size", "4", "--batch-timeout-micros", "20000000",
                     model_repository=repo, name="mixing")
    results: dict[int, dict] = {}

    def send(i: int) -> None:
        x = np.full((1, 4), float(i + 1), dtype=np.float32)
        r = s.post("/v2/models/mixing/infer", {"inputs": [tensor("x", "FP32", x)]})
        assert r.status_code == 200, r.text
        results[i] = r.json()

    run_threads(send, 4)  # One batch of 4 forms.
    for i, body in results.items():
        x = np.full((1, 4), float(i + 1), dtype=np.float32)
        np.testing.assert_array_equal(output(body, "twice"), np.concatenate([x, x]))
        np.testing.assert_array_equal(output(body, "sum"), x + 1)
    h = histogram(s.metrics(), "tailcut_batch_size", 'model="mixing"')
    assert h["4"] - h["2"] == 1, f"the four requests were not batched first: {h}"
