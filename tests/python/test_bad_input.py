"""A catalogue of malformed and hostile requests, sent over raw sockets so that nothing on the
client side tidies them up. Each must get its exact status and a JSON body that names the
problem; afterwards the server must still be alive and answer correctly."""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass, field

import onnx_models
import pytest
from conftest import DEFAULT_MODEL_NAME, TailcutServer, cosine_rows, make_model_repository

MAX_BODY = 64 * 1024
MAX_INPUTS = 8
HEADER_TIMEOUT_MILLIS = 1000


@pytest.fixture(scope="module")
def hostile_server(tailcut_bin, default_model_dir, tmp_path_factory):
    repo = make_model_repository(tmp_path_factory.mktemp("models"),
                                 {"fixed": onnx_models.fixed_shape(),
                                  "mixed": onnx_models.mixed_types()})
    flags = ["--server.max_body_bytes", str(MAX_BODY),
             "--requests.max_inputs_per_request", str(MAX_INPUTS),
             "--server.header_timeout_millis", str(HEADER_TIMEOUT_MILLIS)]
    with TailcutServer(flags, model_repository=repo, name="hostile",
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def read_response(sock: socket.socket, buf: bytes = b"", head: bool = False) -> tuple[RawResponse, bytes]:
    """Reads one response from `sock` (after `buf`); returns it and the bytes after it."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed before a full response head: {buf[:200]!r}")
        buf += chunk
    head_bytes, _, buf = buf.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if head else int(headers.get("content-length", "0"))
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed mid-body")
        buf += chunk
    return RawResponse(status, headers, buf[:length]), buf[length:]


def raw_exchange(port: int, data: bytes, timeout: float = 30) -> RawResponse:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        response, _ = read_response(sock)
        return response


def http_request(method: str, path: str, body: bytes | str | object = b"",
                 headers: dict[str, str] | None = None) -> bytes:
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if "Transfer-Encoding" not in all_headers and "Content-Length" not in all_headers:
        all_headers["Content-Length"] = str(len(body))
    lines += [f"{k}: {v}" for k, v in all_headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class Case:
    name: str
    request: bytes
    status: int
    needles: tuple[str, ...]  # Substrings of the error message.
    headers: dict[str, str] = field(default_factory=dict)  # Expected response headers.


def post(path, body, status, *needles, headers=None, expect_headers=None, name=None):
    return Case(name or "", http_request("POST", path, body, headers), status, needles,
                expect_headers or {})


E, T, K = "/v1/embeddings", "/embed", f"/v2/models/{DEFAULT_MODEL_NAME}/infer"
FIXED, MIXED = "/v2/models/fixed/infer", "/v2/models/mixed/infer"


def fixed_input(**override):
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [0] * 6,
                        **override}]}


CASES: dict[str, Case] = {
    # -- OpenAI /v1/embeddings: JSON shape and every field's type --
    "openai malformed json": post(E, '{"input": "hi",', 400, "not valid JSON"),
    "openai empty body": post(E, b"", 400, "body is empty"),
    "openai body is an array": post(E, ["hi"], 400, "must be a JSON object, got array"),
    "openai body is a string": post(E, '"hi"', 400, "must be a JSON object, got string"),
    "openai missing input": post(E, {"model": "default"}, 400, "'input' is required"),
    "openai null input": post(E, {"input": None}, 400, "'input' is required"),
    "openai number input": post(E, {"input": 42}, 400, "'input' must be a string or an array"),
    "openai object input": post(E, {"input": {"text": "hi"}}, 400, "got object"),
    "openai empty input list": post(E, {"input": []}, 400, "'input' must not be empty"),
    "openai token array": post(E, {"input": [101, 7592, 102]}, 400, "'input[0]' is a token array"),
    "openai token arrays": post(E, {"input": [[101, 102]]}, 400, "token array"),
    "openai null in list": post(E, {"input": ["a", None]}, 400, "'input[1]' must be a string"),
    "openai model not a string": post(E, {"input": "hi", "model": 3}, 400,
                                      "'model' must be a string"),
    "openai unknown model": post(E, {"input": "hi", "model": "no-such-model"}, 404,
                                 "'no-such-model' does not exist"),
    "openai tensor model": post(E, {"input": "hi", "model": "fixed"}, 400,
                                "not a text-embedding model"),
    "openai bad encoding_format": post(E, {"input": "hi", "encoding_format": "binary"}, 400,
                                       "'encoding_format' must be 'float' or 'base64'", "binary"),
    "openai encoding_format type": post(E, {"input": "hi", "encoding_format": 1}, 400,
                                        "'encoding_format' must be a string"),
    "openai dimensions string": post(E, {"input": "hi", "dimensions": "384"}, 400,
                                     "'dimensions' must be an integer"),
    "openai dimensions float": post(E, {"input": "hi", "dimensions": 383.5}, 400,
                                    "'dimensions' must be an integer"),
    "openai dimensions negative": post(E, {"input": "hi", "dimensions": -1}, 400, "positive"),
    "openai dimensions other": post(E, {"input": "hi", "dimensions": 256}, 400,
                                    "384 dimensions"),
    "openai unknown precision": post(E, {"input": "hi", "precision": "int4"}, 400,
                                     "no precision variant 'int4'", "available: fp32"),
    "openai precision type": post(E, {"input": "hi", "precision": 8}, 400,
                                  "'precision' must be a string"),
    "openai user type": post(E, {"input": "hi", "user": 12}, 400, "'user' must be a string"),
    "openai invalid utf-8": post(E, b'{"input": "caf\xc3\x28"}', 400, "not valid JSON", "UTF-8"),
    "openai lone surrogate escape": post(E, '{"input": "\\ud800"}', 400, "not valid JSON",
                                         "surrogate"),
    # Beyond a double: nlohmann::json reports it as out_of_range, not parse_error (this used
    # to end the server; found by fuzz_openai_json).
    "openai number overflow": post(E, '{"input": "hi", "dimensions": 1e400}', 400,
                                   "not valid JSON", "number overflow"),
    "kserve number overflow": post(K, '{"inputs": [], "id": -1e999}', 400, "not valid JSON"),
    "openai too many inputs": post(E, {"input": ["a"] * (MAX_INPUTS + 1)}, 413,
                                   f"{MAX_INPUTS + 1} inputs", f"limit is {MAX_INPUTS}"),
    "openai bad timeout header": post(E, {"input": "hi"}, 400, "X-Request-Timeout-Ms",
                                      headers={"X-Request-Timeout-Ms": "soon"}),
    "openai zero timeout header": post(E, {"input": "hi"}, 400, "X-Request-Timeout-Ms",
                                       headers={"X-Request-Timeout-Ms": "0"}),
    "openai fractional timeout header": post(E, {"input": "hi"}, 400, "whole number",
                                             headers={"X-Request-Timeout-Ms": "2.5"}),
    # -- TEI /embed --
    "tei missing inputs": post(T, {"input": "hi"}, 400, "'inputs' is required"),
    "tei normalize type": post(T, {"inputs": "hi", "normalize": "yes"}, 400,
                               "'normalize' must be a boolean"),
    "tei truncate type": post(T, {"inputs": "hi", "truncate": 1}, 400,
                              "'truncate' must be a boolean"),
    "tei truncation direction": post(T, {"inputs": "hi", "truncation_direction": "Left"}, 400,
                                     "'truncation_direction' supports only 'Right'"),
    "tei token array": post(T, {"inputs": [[101, 102]]}, 400, "token array"),
    "tei too long": post(T, {"inputs": ["ok", "word " * 300]}, 413, "input 1",
                         "more than the limit of 256 tokens"),
    "tei too many inputs": post(T, {"inputs": ["a"] * (MAX_INPUTS + 1)}, 413,
                                f"limit is {MAX_INPUTS}"),
    "tei unknown model": post(T, {"inputs": "a", "model": "nope"}, 404, "'nope' does not exist"),
    # -- KServe v2 --
    "kserve malformed json": post(K, "{inputs: []}", 400, "not valid JSON"),
    "kserve missing inputs": post(K, {"id": "1"}, 400, "'inputs' is required"),
    "kserve inputs not array": post(K, {"inputs": {"name": "x"}}, 400, "'inputs' is required"),
    "kserve id type": post(K, {"id": 7, "inputs": [{}]}, 400, "'id' must be a string"),
    "kserve parameters type": post(K, {"inputs": [{}], "parameters": [1]}, 400,
                                   "'parameters' must be an object"),
    "kserve negative timeout": post(K, {"inputs": [{}], "parameters": {"timeout": -5}}, 400,
                                    "parameters.timeout must be a positive integer"),
    "kserve text datatype not a string": post(
        K, {"inputs": [{"name": "t", "datatype": 5, "shape": [1], "data": ["hi"]}]}, 400,
        "datatype BYTES"),
    "kserve text input not an object": post(K, {"inputs": ["hi"]}, 400, "datatype BYTES"),
    "kserve text shape mismatch": post(
        K, {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [2], "data": ["hi"]}]}, 400,
        "'data' has 1 elements but shape [2] needs 2"),
    "kserve text missing shape": post(
        K, {"inputs": [{"name": "t", "datatype": "BYTES", "data": ["hi"]}]}, 400,
        "'shape' is required"),
    "kserve text two inputs": post(
        K, {"inputs": [{"name": "a", "datatype": "BYTES", "shape": [1], "data": ["x"]}] * 2}, 400,
        "exactly one input"),
    "kserve text normalize type": post(
        K, {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["hi"]}],
            "parameters": {"normalize": "no"}}, 400, "'normalize' must be a boolean"),
    "kserve negative shape": post(FIXED, fixed_input(shape=[-2, 3]), 400,
                                  "'shape' must hold non-negative integers"),
    "kserve shape overflow": post(FIXED, fixed_input(shape=[2**62, 2**62]), 400,
                                  "'shape' overflows"),
    "kserve shape not integers": post(FIXED, fixed_input(shape=[2, "3"]), 400,
                                      "'shape' must hold non-negative integers"),
    "kserve missing datatype": post(FIXED, {"inputs": [{"name": "x", "shape": [2, 3],
                                                        "data": [0] * 6}]}, 400,
                                    "'datatype' is required"),
    "kserve missing name": post(FIXED, {"inputs": [{"datatype": "FP32", "shape": [2, 3],
                                                    "data": [0] * 6}]}, 400,
                                "inputs[0].name is required"),
    "kserve data not array": post(FIXED, fixed_input(data="0,0,0,0,0,0"), 400,
                                  "'data' is required and must be an array"),
    "kserve bytes to tensor model": post(FIXED, fixed_input(datatype="BYTES", data=["a"] * 6), 400,
                                         "datatype BYTES, the model expects FP32"),
    "kserve wrong datatype": post(FIXED, fixed_input(datatype="INT32"), 400,
                                  "datatype INT32, the model expects FP32"),
    "kserve element count": post(FIXED, fixed_input(data=[0] * 5), 400,
                                 "'data' has 5 elements but shape [2, 3] needs 6"),
    "kserve nested too deep": post(FIXED, fixed_input(data=[[[0, 0, 0]], [[0, 0, 0]]]), 400,
                                   "nested deeper than its shape's 2 dimensions"),
    "kserve object leaf": post(FIXED, fixed_input(data=[0, 0, 0, 0, 0, {"a": [[[1]]]}]), 400,
                               "holds object where a number is expected"),
    "kserve bool for float": post(FIXED, fixed_input(data=[0, 0, True, 0, 0, 0]), 400,
                                  "holds boolean where a number is expected"),
    "kserve int64 out of range": post(MIXED, {"inputs": [
        {"name": "ids", "datatype": "INT64", "shape": [1, 4], "data": [2**64 - 1, 0, 0, 0]},
        {"name": "scale", "datatype": "FP16", "shape": [1, 4], "data": [1, 1, 1, 1]}]}, 400,
        "out of range for its datatype"),
    "kserve unknown input": post(FIXED, fixed_input(name="y"), 400, "unknown input 'y'",
                                 "inputs are: x"),
    "kserve missing input": post(MIXED, {"inputs": [
        {"name": "ids", "datatype": "INT64", "shape": [1, 4], "data": [0, 0, 0, 0]}]}, 400,
        "missing input 'scale'"),
    "kserve unknown model": post("/v2/models/nope/infer", fixed_input(), 404,
                                 "'nope' does not exist"),
    "kserve outputs type": post(FIXED, {**fixed_input(), "outputs": "y"}, 400,
                                "'outputs' must be an array"),
    "kserve output without name": post(FIXED, {**fixed_input(), "outputs": [{}]}, 400,
                                       "needs a string 'name'"),
    "kserve text outputs type": post(
        K, {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["hi"]}],
            "outputs": "embedding"}, 400, "'outputs' must be an array", "got string"),
    "kserve text output without name": post(
        K, {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["hi"]}],
            "outputs": [{"name": None}]}, 400, "outputs[0] needs a string 'name'"),
    # -- HTTP layer --
    "unknown route": Case("", http_request("GET", "/v1/audio/speech"), 404,
                          ("no route for GET /v1/audio/speech",)),
    "wrong method": Case("", http_request("GET", "/v1/completions"), 405,
                         ("method GET is not allowed on /v1/completions; allowed: POST",)),
    "unknown model metadata": Case("", http_request("GET", "/v1/models/nope"), 404,
                                   ("'nope' does not exist",)),
    "wrong method delete": Case("", http_request("DELETE", E), 405,
                                ("method DELETE is not allowed on /v1/embeddings",),
                                {"allow": "POST"}),
    "wrong method get": Case("", http_request("GET", T), 405, ("allowed: POST",),
                             {"allow": "POST"}),
    "wrong method post": Case("", http_request("POST", "/v1/models", {}), 405, ("allowed: GET",),
                              {"allow": "GET"}),
    "garbage request line": Case("", b"HELLO THERE\r\n\r\n", 400, ("malformed HTTP request",)),
    "binary garbage": Case("", bytes(range(256)) * 4, 400, ("malformed HTTP request",)),
    "bad http version": Case("", b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 400,
                             ("malformed HTTP request",)),
    "bad content-length": Case("", http_request("POST", E, b"{}", {"Content-Length": "ten"}),
                               400, ("malformed HTTP request",)),
    "bad chunk": Case("", http_request("POST", E, b"zz\r\nxx\r\n0\r\n\r\n",
                                       {"Transfer-Encoding": "chunked"}),
                      400, ("malformed HTTP request",)),
    "oversize header": Case("", http_request("GET", "/health", b"",
                                             {"X-Padding": "p" * 20_000}),
                            431, ("request headers are too large",)),
    "huge body declared": Case("", http_request("POST", E, b'{"input": "x"}',
                                                {"Content-Length": str(MAX_BODY * 100)}),
                               413, (f"exceeds the limit of {MAX_BODY} bytes",)),
    "huge body sent": post(E, {"input": "x" * (MAX_BODY + 10)}, 413,
                           f"exceeds the limit of {MAX_BODY} bytes"),
    # RFC 9112 framing (found by this catalogue: each was served, or framed as plain, before).
    "http/1.1 without host": Case("", b"POST /v1/embeddings HTTP/1.1\r\nContent-Length: 2\r\n"
                                      b"\r\n{}", 400, ("need a Host header",)),
    "two host headers": Case("", b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
                             ("more than one Host header",)),
    "target without a slash": Case("", b"GET health HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                                   ("request target must be a path starting with '/'",)),
    "gzip then chunked": Case("", http_request("POST", E, b"2\r\n{}\r\n0\r\n\r\n",
                                               {"Transfer-Encoding": "gzip, chunked"}),
                              501, ("transfer coding 'gzip' is not supported",)),
    "chunked not last": Case("", http_request("POST", E, b"2\r\n{}\r\n0\r\n\r\n",
                                              {"Transfer-Encoding": "chunked, gzip"}),
                             400, ("must end with 'chunked'",)),
    "huge chunked body": Case("", http_request(
        "POST", E, b"".join([b"4000\r\n" + b"a" * 0x4000 + b"\r\n"] * 6) + b"0\r\n\r\n",
        {"Transfer-Encoding": "chunked"}), 413, (f"exceeds the limit of {MAX_BODY} bytes",)),
}


def test_catalogue_is_large_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("name", list(CASES), ids=lambda n: n.replace(" ", "-"))
def test_hostile_request(hostile_server, name):
    case = CASES[name]
    r = raw_exchange(hostile_server.port, case.request)
    assert r.status == case.status, f"{name}: got {r.status} {r.body[:300]!r}"
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    body = r.json()
    err = body["error"]
    message = err["message"] if isinstance(err, dict) else err
    for needle in case.needles:
        assert needle in message, f"{name}: {needle!r} not in {message!r}"
    if isinstance(err, dict) and "code" in err:
        assert err["code"] == r.status, f"{name}: body code {err['code']} != status {r.status}"
    for header, value in case.headers.items():
        assert r.headers.get(header) == value, f"{name}: header {header}: {r.headers}"


def test_absolute_form_target_is_routed_on_its_path(hostile_server):
    # RFC 9112 section 3.2.2: servers must accept the absolute form (proxies send it); it used
    # to answer 404.
    port = hostile_server.port
    r = raw_exchange(port, http_request("POST", f"http://127.0.0.1:{port}/v1/embeddings",
                                        {"input": "absolute"}))
    assert r.status == 200, r.body[:300]
    assert len(r.json()["data"][0]["embedding"]) == 384


def test_head_response_has_no_body_and_keeps_the_connection_usable(hostile_server):
    # Regression: HEAD answers carried the GET body, which a keep-alive client then read as
    # the start of the next response.
    with socket.create_connection(("127.0.0.1", hostile_server.port), timeout=30) as sock:
        sock.sendall(b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, rest = read_response(sock, head=True)
        assert head.status == 200 and int(head.headers["content-length"]) > 0
        live, rest = read_response(sock, rest)
        assert live.status == 200 and live.json() == {"live": True}
        assert rest == b""


def test_valid_chunked_and_pipelined_requests_are_served(hostile_server):
    # Positive controls for the framing cases above: a well-formed chunked body works, and
    # pipelined requests are answered in order on one connection.
    body = json.dumps({"input": ["chunked", "body"]}).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                       for i in range(0, len(body), 7)) + b"0\r\n\r\n"
    r = raw_exchange(hostile_server.port, http_request("POST", E, chunked,
                                                       {"Transfer-Encoding": "chunked"}))
    assert r.status == 200 and len(r.json()["data"]) == 2
    with socket.create_connection(("127.0.0.1", hostile_server.port), timeout=30) as sock:
        sock.sendall(b"GET /v2/models/fixed/ready HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /v2/models/mixed/ready HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /v2/models/nope/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        first, rest = read_response(sock)
        second, rest = read_response(sock, rest)
        third, rest = read_response(sock, rest)
    assert (first.json()["name"], second.json()["name"]) == ("fixed", "mixed")
    assert third.status == 404


def test_slow_headers_are_cut_off(hostile_server):
    before = metric_value(hostile_server.metrics(), "tailcut_http_timeouts_total")
    with socket.create_connection(("127.0.0.1", hostile_server.port), timeout=60) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # Never finished.
        assert sock.recv(1024) == b"", "the server must close a connection whose headers stall"
    after = metric_value(hostile_server.metrics(), "tailcut_http_timeouts_total")
    assert after == before + 1
    assert hostile_server.get("/health").status_code == 200


def metric_value(metrics: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", metrics, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


def test_unknown_model_names_are_not_metric_labels(hostile_server):
    # Regression: every model name a client sent became a label value of
    # tailcut_requests_total (an unbounded number of time series).
    for i in range(3):
        r = hostile_server.post("/v1/embeddings", {"input": "x", "model": f"bogus-{i}"})
        assert r.status_code == 404
        assert hostile_server.get(f"/v2/models/bogus-model-{i}").status_code == 404
    metrics = hostile_server.metrics()
    assert "bogus" not in metrics
    assert re.search(r'tailcut_requests_total\{route="/v1/embeddings",model="",status="404"\} '
                     r'[1-9]', metrics), "404s must still be counted"
    assert "model=\"default\"" not in metrics  # The alias is labelled by the model it names.


def test_server_survives_the_catalogue(hostile_server, golden_items):
    for name in CASES:  # Once more, all in a row, then a normal request.
        raw_exchange(hostile_server.port, CASES[name].request)
    assert hostile_server.alive()
    item = next(g for g in golden_items if g.text == "A man is riding a horse.")
    got = hostile_server.embed([item.text])
    assert cosine_rows(got, item.embedding)[0] >= 0.9999
    assert hostile_server.get("/health").json() == {"status": "ok"}
    assert hostile_server.alive()
