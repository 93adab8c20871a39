"""KServe v2 over gRPC (inference.GRPCInferenceService) against the real server, driven by
Triton's own gRPC client (tritonclient.grpc) unmodified: health, metadata and infer for a
text model and for tensor models, with the answers checked against the HTTP front-end's; the
protocol's typed contents as well as raw bytes; bad requests answered with KServe's status
codes while the server stays up; API keys in metadata; Triton's timeout parameter; the
request metrics; a clean SIGTERM with calls in flight; a taken port failing start-up; and our
.proto checked field by field against the one tritonclient was generated from."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import grpc
import numpy as np
import onnx_models
import pytest
import requests
import tritonclient.grpc as tgrpc
from conftest import (DEFAULT_MODEL_NAME, DIMENSIONS, REPO_ROOT, TailcutServer, assert_proto_subset,
                      compile_proto, make_model_repository, proto_fields, scrape, value, wait_until)
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

PROTO = REPO_ROOT / "src" / "server" / "grpc" / "grpc_service.proto"


@pytest.fixture(scope="module")
def server(tmp_path_factory, default_model_dir, tailcut_bin):
    repo = make_model_repository(tmp_path_factory.mktemp("grpc-models"),
                                 {"imgcls": onnx_models.image_classifier(),
                                  "mixed": onnx_models.mixed_types()})
    with TailcutServer(model_repository=repo, name="grpc", grpc=True,
                       args=["--server.max_body_bytes", str(2 << 20)],
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return tgrpc.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")


@pytest.fixture(scope="module")
def stub(server):
    """The generated stub, for requests tritonclient does not build (typed contents, bad ones)."""
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def http_embeddings(server, texts):
    r = requests.post(f"{server.base_url}/v1/embeddings",
                      json={"input": texts, "model": DEFAULT_MODEL_NAME}, timeout=30)
    assert r.status_code == 200, r.text
    return np.array([d["embedding"] for d in r.json()["data"]], dtype=np.float32)


def text_input(texts, name="text"):
    inp = tgrpc.InferInput(name, [len(texts)], "BYTES")
    inp.set_data_from_numpy(np.array([t.encode() for t in texts], dtype=object))
    return inp


def assert_up(server):
    assert server.alive()
    assert requests.get(f"{server.base_url}/v2/health/ready", timeout=10).status_code == 200


def test_health_and_metadata_tell_what_infer_takes(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready(DEFAULT_MODEL_NAME)
    assert client.get_server_metadata(as_json=True)["name"] == "tailcut"
    meta = client.get_model_metadata(DEFAULT_MODEL_NAME, as_json=True)
    assert meta["versions"] == ["1"] and meta["platform"] == "onnxruntime_onnx"
    assert meta["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": ["-1"]}]
    assert meta["outputs"] == [{"name": "embedding", "datatype": "FP32",
                                "shape": ["-1", str(DIMENSIONS)]}]
    image = client.get_model_metadata("imgcls", as_json=True)
    assert image["inputs"] == [{"name": "image", "datatype": "FP32",
                                "shape": ["-1", "3", "224", "224"]}]
    # The same description as over HTTP.
    assert client.get_model_metadata("mixed", model_version="1").name == "mixed"


def test_default_infer_of_texts_matches_http(client, server):
    texts = ["hello world", "caf\u00e9 \u2615", "tail latency is what users feel"]
    result = client.infer(DEFAULT_MODEL_NAME, [text_input(texts)], request_id="req-7")
    got = result.as_numpy("embedding")
    assert got.dtype == np.float32 and got.shape == (3, DIMENSIONS)
    np.testing.assert_allclose(got, http_embeddings(server, texts), rtol=1e-5, atol=1e-6)
    response = result.get_response()
    assert response.id == "req-7" and response.model_name == DEFAULT_MODEL_NAME
    assert response.parameters["variant"].string_param == "fp32"
    # Asking for the output by name gives the same.
    named = client.infer(DEFAULT_MODEL_NAME, [text_input(texts)],
                         outputs=[tgrpc.InferRequestedOutput("embedding")])
    np.testing.assert_array_equal(named.as_numpy("embedding"), got)


def test_tensor_models_infer_every_width_as_http_does(client, server):
    rng = np.random.default_rng(5)
    ids = rng.integers(-8000, 8000, size=(3, 4)).astype(np.int64)
    scale = rng.standard_normal((3, 4)).astype(np.float16)
    a = tgrpc.InferInput("ids", list(ids.shape), "INT64")
    a.set_data_from_numpy(ids)
    b = tgrpc.InferInput("scale", list(scale.shape), "FP16")
    b.set_data_from_numpy(scale)
    got = client.infer("mixed", [a, b])
    np.testing.assert_array_equal(got.as_numpy("echo"), ids)
    body = {"inputs": [{"name": "ids", "datatype": "INT64", "shape": [3, 4], "data": ids.ravel().tolist()},
                       {"name": "scale", "datatype": "FP16", "shape": [3, 4],
                        "data": scale.astype(np.float32).ravel().tolist()}]}
    http = requests.post(f"{server.base_url}/v2/models/mixed/infer", json=body, timeout=30).json()
    by_name = {o["name"]: o for o in http["outputs"]}
    scaled = got.as_numpy("scaled")
    assert scaled.dtype == np.float16
    np.testing.assert_array_equal(scaled.astype(np.float32).ravel(), by_name["scaled"]["data"])

    image = rng.integers(0, 10, size=(2, 3, 224, 224)).astype(np.float32)
    x = tgrpc.InferInput("image", list(image.shape), "FP32")
    x.set_data_from_numpy(image)
    out_name = client.get_model_metadata("imgcls").outputs[0].name
    logits = client.infer("imgcls", [x]).as_numpy(out_name)
    http = requests.post(f"{server.base_url}/v2/models/imgcls/infer", timeout=60, json={
        "inputs": [{"name": "image", "datatype": "FP32", "shape": list(image.shape),
                    "data": image.ravel().tolist()}]}).json()
    np.testing.assert_allclose(logits.ravel(), http["outputs"][0]["data"], rtol=1e-5, atol=1e-5)


def test_typed_contents_are_read_like_raw_bytes(stub, server):
    ids = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    req = service_pb2.ModelInferRequest(model_name="mixed")
    t = req.inputs.add(name="ids", datatype="INT64", shape=[3, 4])
    t.contents.int64_contents.extend(ids.ravel().tolist())
    # FP16 has no typed field, so that input must come raw, and raw_input_contents is all the
    # inputs or none: a typed input beside raw bytes is refused, not silently ignored.
    req.inputs.add(name="scale", datatype="FP16", shape=[3, 4])
    req.raw_input_contents.extend([ids.tobytes(), np.ones((3, 4), np.float16).tobytes()])
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "both contents and raw_input_contents" in e.value.details()

    texts = ["typed texts", "come in bytes_contents"]
    req = service_pb2.ModelInferRequest(model_name=DEFAULT_MODEL_NAME)
    req.inputs.add(name="text", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(
        [x.encode() for x in texts])
    res = stub.ModelInfer(req, timeout=30)
    assert list(res.outputs[0].shape) == [2, DIMENSIONS] and not res.outputs[0].contents.fp32_contents
    got = np.frombuffer(res.raw_output_contents[0], dtype=np.float32).reshape(2, DIMENSIONS)
    np.testing.assert_allclose(got, http_embeddings(server, texts), rtol=1e-5, atol=1e-6)

    req = service_pb2.ModelInferRequest(model_name="imgcls")
    image = np.full((1, 3, 224, 224), 0.5, np.float32)
    req.inputs.add(name="image", datatype="FP32", shape=list(image.shape)).contents.fp32_contents.extend(
        image.ravel().tolist())
    typed = stub.ModelInfer(req, timeout=30)
    raw = service_pb2.ModelInferRequest(model_name="imgcls")
    raw.inputs.add(name="image", datatype="FP32", shape=list(image.shape))
    raw.raw_input_contents.append(image.tobytes())
    assert stub.ModelInfer(raw, timeout=30).raw_output_contents == typed.raw_output_contents


def _request(model, *inputs, raw=None, **fields):
    req = service_pb2.ModelInferRequest(model_name=model, **fields)
    for name, datatype, shape in inputs:
        req.inputs.add(name=name, datatype=datatype, shape=shape)
    req.raw_input_contents.extend(raw or [])
    return req


def _fp16_in_int_contents():
    req = _request("mixed", ("ids", "INT64", [1, 4]), ("scale", "FP16", [1, 4]))
    req.inputs[0].contents.int64_contents.extend([1, 2, 3, 4])
    req.inputs[1].contents.int_contents.extend([1, 2, 3, 4])
    return req


BAD_REQUESTS = {
    "unknown model": (_request("nope", ("text", "BYTES", [1]), raw=[b"\x01\x00\x00\x00a"]),
                      grpc.StatusCode.NOT_FOUND, "model 'nope'"),
    "unknown version": (_request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]), raw=[b"\x01\x00\x00\x00a"],
                                 model_version="7"), grpc.StatusCode.NOT_FOUND, "no version '7'"),
    "no inputs": (_request(DEFAULT_MODEL_NAME), grpc.StatusCode.INVALID_ARGUMENT, "no inputs"),
    "shape disagrees with texts": (_request(DEFAULT_MODEL_NAME, ("text", "BYTES", [3]),
                                            raw=[b"\x01\x00\x00\x00a"]),
                                   grpc.StatusCode.INVALID_ARGUMENT, "shape [3] needs 3"),
    "truncated string": (_request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]), raw=[b"\x05\x00\x00\x00ab"]),
                         grpc.StatusCode.INVALID_ARGUMENT, "element 0 says 5 bytes"),
    "text model given numbers": (_request(DEFAULT_MODEL_NAME, ("text", "FP32", [1]), raw=[bytes(4)]),
                                 grpc.StatusCode.INVALID_ARGUMENT, "BYTES tensor of texts"),
    "unknown output": (_request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]), raw=[b"\x01\x00\x00\x00a"],
                                outputs=[{"name": "logits"}]),
                       grpc.StatusCode.INVALID_ARGUMENT, "no output 'logits'"),
    "raw for some inputs only": (_request("mixed", ("ids", "INT64", [1, 4]), ("scale", "FP16", [1, 4]),
                                          raw=[bytes(32)]),
                                 grpc.StatusCode.INVALID_ARGUMENT, "1 entries but the request has 2"),
    "raw size disagrees": (_request("mixed", ("ids", "INT64", [1, 4]), ("scale", "FP16", [1, 4]),
                                    raw=[bytes(31), bytes(8)]),
                           grpc.StatusCode.INVALID_ARGUMENT, "31 bytes but shape [1, 4] of INT64 needs 32"),
    "unknown datatype": (_request("mixed", ("ids", "INT128", [1]), ("scale", "FP16", [1]),
                                  raw=[bytes(16), bytes(2)]),
                         grpc.StatusCode.INVALID_ARGUMENT, "datatype 'INT128'"),
    "negative dimension": (_request("mixed", ("ids", "INT64", [-1, 4]), ("scale", "FP16", [1, 4]),
                                    raw=[bytes(32), bytes(8)]),
                           grpc.StatusCode.INVALID_ARGUMENT, "non-negative"),
    "wrong contents field": (_fp16_in_int_contents(), grpc.StatusCode.INVALID_ARGUMENT,
                             "a FP16 tensor's elements go in raw_input_contents"),
    "timeout of the wrong kind": (_request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]),
                                           raw=[b"\x01\x00\x00\x00a"],
                                           parameters={"timeout": {"string_param": "soon"}}),
                                  grpc.StatusCode.INVALID_ARGUMENT, "parameter 'timeout'"),
    "normalize of the wrong kind": (_request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]),
                                             raw=[b"\x01\x00\x00\x00a"],
                                             parameters={"normalize": {"int64_param": 1}}),
                                    grpc.StatusCode.INVALID_ARGUMENT, "'normalize' must be a bool_param"),
}


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_requests_get_kserve_codes_and_the_server_stays_up(stub, server, case):
    req, code, detail = BAD_REQUESTS[case]
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req, timeout=30)
    assert e.value.code() == code, (e.value.code(), e.value.details())
    assert detail in e.value.details(), e.value.details()
    assert_up(server)


def test_stream_infer_answers_every_request_by_id(server):
    # Triton's streaming extension, as tritonclient drives it: requests go out on one stream,
    # each answer (or error) comes back carrying its request's id.
    texts = [f"streamed text {i}" for i in range(6)]
    want = http_embeddings(server, texts)
    results: dict[str, object] = {}
    done = threading.Condition()

    def on_answer(result, error):
        with done:
            if error is not None:
                results[f"error {len(results)}"] = error
            else:
                results[result.get_response().id] = result.as_numpy("embedding")
            done.notify_all()

    c = tgrpc.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    c.start_stream(callback=on_answer)
    try:
        for i, text in enumerate(texts):
            c.async_stream_infer(DEFAULT_MODEL_NAME, [text_input([text])], request_id=f"r{i}")
        bad = tgrpc.InferInput("text", [2], "BYTES")  # Says two texts, carries one.
        bad.set_data_from_numpy(np.array([b"one", b"two"], dtype=object))
        bad._raw_content = b"\x03\x00\x00\x00one"
        c.async_stream_infer(DEFAULT_MODEL_NAME, [bad], request_id="bad")
        c.async_stream_infer("nope", [text_input(["x"])], request_id="unknown")
        with done:
            assert done.wait_for(lambda: len(results) == len(texts) + 2, timeout=60), results
    finally:
        c.stop_stream()
    for i in range(len(texts)):
        np.testing.assert_allclose(results[f"r{i}"], want[i:i + 1], rtol=1e-5, atol=1e-6)
    errors = sorted(str(e) for k, e in results.items() if k.startswith("error"))
    assert any("1 elements but shape [2] needs 2" in e for e in errors), errors
    assert any("model 'nope' does not exist" in e for e in errors), errors
    assert_up(server)


def test_protocol_limits_and_methods_not_served(client, stub, server):
    # Larger than server.max_body_bytes (2 MiB here): refused by gRPC before it is parsed.
    big = _request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]),
                   raw=[(3 << 20).to_bytes(4, "little") + bytes(3 << 20)])
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(big, timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Triton's model-repository methods are HTTP-only here: gRPC says so itself.
    with pytest.raises(InferenceServerException) as e:
        client.get_model_config(DEFAULT_MODEL_NAME)
    assert e.value.status() == "StatusCode.UNIMPLEMENTED"
    with pytest.raises(InferenceServerException) as e:
        client.is_model_ready("nope")
    assert e.value.status() == "StatusCode.NOT_FOUND"
    assert_up(server)


def test_triton_timeout_parameter_bounds_the_request(client, server):
    # One microsecond: gone before the batch can run, whatever the machine's speed.
    with pytest.raises(InferenceServerException) as e:
        client.infer(DEFAULT_MODEL_NAME, [text_input(["too late"] * 4)], timeout=1)
    assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED", e.value
    # A roomy one changes nothing.
    ok = client.infer(DEFAULT_MODEL_NAME, [text_input(["in time"])], timeout=30_000_000)
    assert ok.as_numpy("embedding").shape == (1, DIMENSIONS)


def test_grpc_deadline_is_the_requests_deadline(tmp_path, default_model_dir):
    """A call whose gRPC deadline passes while it waits behind a big request is not computed:
    the server answers it DEADLINE_EXCEEDED (or drops it as cancelled when gRPC ends the call
    first), never 200 after the client stopped waiting. Admission by queue delay is off here,
    so the call is queued rather than refused at once as overload."""
    repo = make_model_repository(tmp_path / "models")
    s = TailcutServer(["--requests.max_queue_delay_millis", "0"], model_repository=repo,
                      name="grpc-deadline", log_dir=tmp_path, grpc=True)
    with s:
        c = tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")

        def statuses():
            out: dict[str, float] = {}
            for line in s.metrics().splitlines():
                if (line.startswith("tailcut_requests_total{") and
                        'route="/inference.GRPCInferenceService/ModelInfer"' in line):
                    status = line.split('status="')[1].split('"')[0]
                    out[status] = out.get(status, 0.0) + float(line.rsplit(" ", 1)[1])
            return out

        long_text = " ".join(["tail latency is what the users of a service feel"] * 20)
        big = text_input([f"{i} {long_text}" for i in range(256)])  # Seconds of work on 2 cores.
        done = threading.Event()

        def send_big():
            try:
                c.infer(DEFAULT_MODEL_NAME, [big], client_timeout=300)
            finally:
                done.set()

        threading.Thread(target=send_big, daemon=True).start()
        try:
            # Its rows beyond the first batch wait in the queue: the short call queues behind.
            wait_until(lambda: value(scrape(s), "tailcut_queue_rows", model=DEFAULT_MODEL_NAME) > 0,
                       timeout=30, interval=0.005, what="the big request's rows in the queue")
            before = statuses()
            with pytest.raises(InferenceServerException) as e:
                c.infer(DEFAULT_MODEL_NAME, [text_input(["queued behind the big one"])],
                        client_timeout=0.05)
            assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED", e.value
        finally:
            assert done.wait(300)
        after = statuses()
        grew = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        # The big one's 200, and the short one as 504 (deadline) or 499 (cancelled).
        assert grew.get("200") == 1 and grew.get("504", 0) + grew.get("499", 0) == 1, grew


def test_calls_are_counted_with_the_http_requests(client, server):
    def count(status):
        total = 0.0
        for line in server.metrics().splitlines():
            if (line.startswith("tailcut_requests_total{") and
                    'route="/inference.GRPCInferenceService/ModelInfer"' in line and
                    f'model="{DEFAULT_MODEL_NAME}"' in line and f'status="{status}"' in line):
                total += float(line.rsplit(" ", 1)[1])
        return total
    ok_before, bad_before = count(200), count(400)
    for _ in range(3):
        client.infer(DEFAULT_MODEL_NAME, [text_input(["counted"])])
    with pytest.raises(InferenceServerException):
        client.infer(DEFAULT_MODEL_NAME, [tgrpc.InferInput("text", [2], "BYTES")])
    assert count(200) == ok_before + 3 and count(400) == bad_before + 1
    metrics = server.metrics()
    assert 'tailcut_request_stage_duration_seconds_count{route="/inference.GRPCInferenceService/ModelInfer",stage="total"}' in metrics
    # Triton's statistics over HTTP count the gRPC calls too: one model, whatever the transport.
    stats = requests.get(f"{server.base_url}/v2/models/{DEFAULT_MODEL_NAME}/stats", timeout=10).json()
    assert stats["model_stats"][0]["inference_stats"]["success"]["count"] >= 3


def test_trace_context_and_stages_come_back_in_metadata(stub):
    req = _request(DEFAULT_MODEL_NAME, ("text", "BYTES", [1]), raw=[b"\x05\x00\x00\x00trace"])
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    _, call = stub.ModelInfer.with_call(req, timeout=30,
                                        metadata=[("traceparent", f"00-{trace}-00f067aa0ba902b7-01")])
    initial = dict(call.initial_metadata())
    assert initial["traceparent"].startswith(f"00-{trace}-") and initial["traceparent"].endswith("-01")
    trailing = dict(call.trailing_metadata())
    assert "total;dur=" in trailing["server-timing"] and "parse;dur=" in trailing["server-timing"]


def test_api_keys_in_metadata(start_server, tmp_path, default_model_dir):
    repo = make_model_repository(tmp_path / "models")
    s = TailcutServer(["--auth.api_keys", "grpc-key-1"], model_repository=repo, name="grpc-auth",
                      log_dir=tmp_path, grpc=True)
    with s:
        c = tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
        assert c.is_server_ready()  # Health is public, as over HTTP.
        for headers, want in ((None, "missing API key"),
                              ({"authorization": "Bearer wrong"}, "invalid API key")):
            with pytest.raises(InferenceServerException) as e:
                c.infer(DEFAULT_MODEL_NAME, [text_input(["guarded"])], headers=headers)
            assert e.value.status() == "StatusCode.UNAUTHENTICATED" and want in e.value.message()
            with pytest.raises(InferenceServerException) as e:
                c.get_model_metadata(DEFAULT_MODEL_NAME, headers=headers)
            assert e.value.status() == "StatusCode.UNAUTHENTICATED"
        got = c.infer(DEFAULT_MODEL_NAME, [text_input(["guarded"])],
                      headers={"authorization": "Bearer grpc-key-1"})
        assert got.as_numpy("embedding").shape == (1, DIMENSIONS)


def test_sigterm_with_calls_in_flight_answers_them_and_exits_zero(tmp_path, default_model_dir):
    repo = make_model_repository(tmp_path / "models")
    s = TailcutServer(model_repository=repo, name="grpc-drain", log_dir=tmp_path, grpc=True).start()
    c = tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    outcomes: list[tuple[float, str]] = []  # (when the call was sent, how it ended)
    started = threading.Event()

    def load():
        while True:
            sent = time.monotonic()
            try:
                c.infer(DEFAULT_MODEL_NAME, [text_input([f"drain {len(outcomes)}"] * 8)],
                        client_timeout=30)
                outcomes.append((sent, "ok"))
                started.set()
            except InferenceServerException as e:
                outcomes.append((sent, e.status()))
                return

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    assert started.wait(60)
    signalled = time.monotonic()
    s.stop(expect_code=0, timeout=30)
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    # Every call sent before the signal is answered: the listener keeps serving through the
    # drain. Later ones may be refused (gRPC answers calls that meet its shutdown UNAVAILABLE
    # or CANCELLED); none hangs.
    assert all(outcome == "ok" for sent, outcome in outcomes if sent < signalled), outcomes
    assert sum(outcome == "ok" for _, outcome in outcomes) >= 4
    assert {o for _, o in outcomes} <= {"ok", "StatusCode.UNAVAILABLE", "StatusCode.CANCELLED"}, outcomes
    assert "stopped cleanly" in s.log_text(), s.log_tail()


def test_a_taken_grpc_port_fails_start_up(tailcut_bin, default_model_dir, tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([str(tailcut_bin), "serve", "--host", "127.0.0.1", "--port", "0",
                            "--grpc-port", str(port), "--model-repository", str(default_model_dir.parent)],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert f"cannot listen for gRPC on 127.0.0.1:{port}" in r.stderr, r.stderr


def test_our_proto_is_the_one_triton_clients_speak(tmp_path):
    """Every message, field number and type, and method of our grpc_service.proto is the same
    as in the descriptor tritonclient.grpc was generated from (ours is a subset)."""
    from google.protobuf import descriptor_pb2
    ours = compile_proto(PROTO, tmp_path)
    theirs = descriptor_pb2.FileDescriptorProto()
    service_pb2.DESCRIPTOR.CopyToProto(theirs)
    assert ours.package == theirs.package == "inference"
    mine = proto_fields([ours])
    assert len(mine) > 20
    assert_proto_subset(mine, proto_fields([theirs]))
    their_methods = {m.name: m for m in theirs.service[0].method}
    assert ours.service[0].name == theirs.service[0].name == "GRPCInferenceService"
    for m in ours.service[0].method:
        t = their_methods[m.name]
        assert (m.input_type, m.output_type, m.client_streaming, m.server_streaming) == \
               (t.input_type, t.output_type, t.client_streaming, t.server_streaming), m.name
