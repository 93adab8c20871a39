"""OpenTelemetry traces against a real collector: Jaeger v1.76 (scripts/fetch_jaeger.sh builds
it; scripts/setup.sh runs that) receives tailcut's OTLP/HTTP export, and its query API shows
each request as a server span in the caller's trace (parent: the caller's span) with a child
span per stage, and the attributes an operator filters by: route, status, model, variant,
cache hits, batch size; a Redis lookup is a client span under the cache stage. Over gRPC too. A collector that is down costs dropped spans, counted, never a
request. And our .proto subset is OTLP's, field by field (opentelemetry-proto)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
import requests
from conftest import (REPO_ROOT, TailcutServer, _die_with_parent, assert_proto_subset, compile_proto,
                      free_port, make_model_repository, proto_fields, scrape, value, wait_until)

PROTO = REPO_ROOT / "src" / "obs" / "otlp" / "otlp_trace.proto"
QUERY = "http://127.0.0.1:16686"


def jaeger_binary() -> str:
    cache = Path(os.environ.get("TAILCUT_CACHE_DIR", Path.home() / ".cache" / "tailcut"))
    for candidate in (os.environ.get("TAILCUT_JAEGER"), cache / "jaeger-v1.76.0" / "jaeger"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    message = "Jaeger not built (scripts/fetch_jaeger.sh; scripts/setup.sh runs it when Go is installed)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI=true makes its absence a failure", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jaeger")
    log = open(folder / "jaeger.log", "wb")
    # Its built-in all-in-one configuration: in-memory storage, OTLP on 4317/4318, query on 16686.
    proc = subprocess.Popen([jaeger_binary()], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=str(folder), preexec_fn=_die_with_parent)
    log.close()

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"jaeger exited ({proc.returncode}; its fixed ports taken?):\n"
                                 f"{(folder / 'jaeger.log').read_text()[-3000:]}")
        try:
            return requests.get(f"{QUERY}/api/services", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False
    wait_until(up, timeout=60, interval=0.1, what="Jaeger's query API")
    yield proc
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def traced(jaeger, tmp_path_factory, default_model_dir):
    repo = make_model_repository(tmp_path_factory.mktemp("models"))
    with TailcutServer(["--tracing.otlp_endpoint", "http://127.0.0.1:4318/v1/traces",
                        "--tracing.batch_timeout_millis", "50", "--tracing.service_name", "tailcut-test"],
                       model_repository=repo, name="traced", grpc=True,
                       log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


def trace(trace_id: str, spans_at_least: int) -> list[dict]:
    """The trace's spans as Jaeger stores them, once it has at least that many."""
    def fetch():
        r = requests.get(f"{QUERY}/api/traces/{trace_id}", timeout=5)
        if r.status_code != 200:
            return None
        data = r.json().get("data") or []
        spans = [s for t in data for s in t["spans"]]
        return spans if len(spans) >= spans_at_least else None
    return wait_until(fetch, timeout=30, interval=0.1, what=f"trace {trace_id} in Jaeger")


def tags(span: dict) -> dict:
    return {t["key"]: t["value"] for t in span["tags"]}


def within(child: dict, parent: dict):
    assert [(r["refType"], r["spanID"]) for r in child["references"]] == [("CHILD_OF", parent["spanID"])]
    assert parent["startTime"] <= child["startTime"]
    assert child["startTime"] + child["duration"] <= parent["startTime"] + parent["duration"] + 1


def server_and_children(spans: list[dict]):
    """The request's server span and its children by name; a span under a child (the Redis
    lookup under the cache stage) must lie within it."""
    servers = [s for s in spans if tags(s).get("span.kind") == "server"]
    assert len(servers) == 1, [s["operationName"] for s in spans]
    server = servers[0]
    children = {s["operationName"]: s for s in spans
                if any(r["spanID"] == server["spanID"] for r in s["references"])}
    for c in children.values():
        within(c, server)
    by_id = {s["spanID"]: s for s in children.values()}
    for s in spans:
        if s is not server and s["operationName"] not in children:
            parent = by_id.get(s["references"][0]["spanID"]) if s["references"] else None
            assert parent is not None, f"{s['operationName']} hangs from no stage of the request"
            within(s, parent)
    return server, children


def test_a_request_is_a_server_span_in_the_callers_trace_with_a_span_per_stage(traced):
    trace_id, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    r = requests.post(traced.url("/v1/embeddings"), json={"input": ["a traced text", "and another"]},
                      headers={"traceparent": f"00-{trace_id}-{caller}-01"}, timeout=30)
    assert r.status_code == 200
    answered = r.headers["traceparent"].split("-")[2]
    server, children = server_and_children(trace(trace_id, 5))
    assert server["spanID"] == answered  # The span the answer's traceparent names.
    assert [(x["refType"], x["spanID"]) for x in server["references"]] == [("CHILD_OF", caller)]
    assert server["operationName"] == "POST /v1/embeddings"
    t = tags(server)
    assert t["http.route"] == "/v1/embeddings" and t["http.response.status_code"] == 200
    assert t["tailcut.model"] == "all-MiniLM-L6-v2" and t["tailcut.variant"] == "fp32"
    assert t["tailcut.cache_hits"] == 0 and t["span.kind"] == "server"
    # Computed: it was parsed, tokenised, queued, batched, run and written.
    assert {"tailcut.parse", "tailcut.tokenize", "tailcut.queue", "tailcut.infer",
            "tailcut.serialize"} <= set(children), sorted(children)
    services = requests.get(f"{QUERY}/api/services", timeout=5).json()["data"]
    assert "tailcut-test" in services


def test_a_cache_hit_is_a_trace_without_model_stages(traced):
    text = {"input": "asked twice"}
    assert requests.post(traced.url("/v1/embeddings"), json=text, timeout=30).status_code == 200
    trace_id = "5bf92f3577b34da6a3ce929d0e0e4736"
    r = requests.post(traced.url("/v1/embeddings"), json=text, timeout=30,
                      headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    assert r.headers["X-Tailcut-Cache-Hits"] == "1"
    server, children = server_and_children(trace(trace_id, 2))
    assert tags(server)["tailcut.cache_hits"] == 1
    assert not {"tailcut.queue", "tailcut.infer"} & set(children), sorted(children)


def test_redis_lookups_and_shared_batches_are_in_the_trace(jaeger, tmp_path, redis_server):
    redis = redis_server()
    repo = make_model_repository(tmp_path / "models")
    shared = ["--redis.enabled", "--redis.port", str(redis.port), "--redis.command_timeout_millis", "2000"]
    with TailcutServer(shared, model_repository=repo, name="computes", log_dir=tmp_path) as other, \
         TailcutServer(shared + ["--tracing.otlp_endpoint", "http://127.0.0.1:4318/v1/traces",
                                 "--tracing.batch_timeout_millis", "50",
                                 # Requests arriving together wait for each other up to 50 ms.
                                 "--batching.batch_timeout_micros", "50000"],
                       model_repository=repo, name="traced-redis", log_dir=tmp_path) as s:
        # Computed by the other replica: here an L1 miss that Redis answers.
        text = {"input": "computed on the other replica"}
        assert requests.post(other.url("/v1/embeddings"), json=text, timeout=30).status_code == 200
        hit_trace = "9af92f3577b34da6a3ce929d0e0e4736"
        r = requests.post(s.url("/v1/embeddings"), json=text, timeout=30,
                          headers={"traceparent": f"00-{hit_trace}-00f067aa0ba902b7-01"})
        assert r.status_code == 200 and r.headers["X-Tailcut-Cache-Hits"] == "1"
        server, children = server_and_children(trace(hit_trace, 3))
        mget = [x for x in trace(hit_trace, 3) if x["operationName"] == "MGET"]
        assert len(mget) == 1, [(x["operationName"], x["duration"], tags(x)) for x in trace(hit_trace, 3)]
        within(mget[0], children["tailcut.cache"])
        t = tags(mget[0])
        assert t["span.kind"] == "client" and t["db.system.name"] == "redis"
        assert t["db.operation.batch.size"] == 1 and t["tailcut.redis.hits"] == 1
        assert tags(server)["tailcut.cache_hits"] == 1 and "tailcut.batch.size" not in tags(server)

        # Eight new texts at once: batched together, and each trace says with how many rows.
        ids = [f"{i:x}bf92f3577b34da6a3ce929d0e0e47{i:02x}" for i in range(8)]
        def post(i):
            return requests.post(s.url("/v1/embeddings"), json={"input": f"batched text number {i}"},
                                 headers={"traceparent": f"00-{ids[i]}-00f067aa0ba902b7-01"}, timeout=30)
        with ThreadPoolExecutor(8) as pool:
            assert all(r.status_code == 200 for r in pool.map(post, range(8)))
        sizes = []
        for trace_id in ids:
            spans = trace(trace_id, 6)
            server, children = server_and_children(spans)
            size = tags(server)["tailcut.batch.size"]
            assert tags(children["tailcut.infer"])["tailcut.batch.size"] == size
            miss = [x for x in spans if x["operationName"] == "MGET"]
            assert len(miss) == 1 and tags(miss[0])["tailcut.redis.hits"] == 0
            sizes.append(size)
        assert max(sizes) >= 2, sizes
        assert all(1 <= n <= 8 for n in sizes), sizes


def test_grpc_calls_are_traced_too(traced):
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    trace_id = "6bf92f3577b34da6a3ce929d0e0e4736"
    with grpc.insecure_channel(f"127.0.0.1:{traced.grpc_port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        req = service_pb2.ModelInferRequest(model_name="all-MiniLM-L6-v2")
        req.inputs.add(name="text", datatype="BYTES", shape=[1])
        req.raw_input_contents.append(b"\x04\x00\x00\x00grpc")
        stub.ModelInfer(req, timeout=30, metadata=[("traceparent", f"00-{trace_id}-00f067aa0ba902b7-01")])
    server, children = server_and_children(trace(trace_id, 3))
    assert server["operationName"] == "gRPC /inference.GRPCInferenceService/ModelInfer"
    assert tags(server)["tailcut.model"] == "all-MiniLM-L6-v2"
    assert "tailcut.infer" in children


def test_an_unsampled_caller_is_not_traced_and_the_ratio_applies_to_new_traces(jaeger, tmp_path,
                                                                                default_model_dir):
    repo = make_model_repository(tmp_path / "models")
    with TailcutServer(["--tracing.otlp_endpoint", "http://127.0.0.1:4318/v1/traces",
                        "--tracing.batch_timeout_millis", "50", "--tracing.sample_ppm", "0"],
                       model_repository=repo, name="unsampled", log_dir=tmp_path) as s:
        for headers in ({}, {"traceparent": "00-7bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}):
            assert requests.post(s.url("/v1/embeddings"), json={"input": "not traced"}, headers=headers,
                                 timeout=30).status_code == 200
        sampled = "8bf92f3577b34da6a3ce929d0e0e4736"
        requests.post(s.url("/v1/embeddings"), json={"input": "traced"}, timeout=30,
                      headers={"traceparent": f"00-{sampled}-00f067aa0ba902b7-01"})
        spans = trace(sampled, 2)  # The caller sampled it: exported although the ratio is 0.
        # Only those: the counter reaches their number and stays there.
        wait_until(lambda: value(scrape(s), "tailcut_trace_spans_exported_total") == len(spans),
                   timeout=10, what="the exported counter")
        assert value(scrape(s), "tailcut_trace_spans_dropped_total") == 0


def test_a_collector_that_is_down_costs_spans_not_requests(tmp_path, default_model_dir):
    repo = make_model_repository(tmp_path / "models")
    closed = free_port()
    with TailcutServer(["--tracing.otlp_endpoint", f"http://127.0.0.1:{closed}/v1/traces",
                        "--tracing.batch_timeout_millis", "20"],
                       model_repository=repo, name="no-collector", log_dir=tmp_path) as s:
        for i in range(10):
            assert requests.post(s.url("/v1/embeddings"), json={"input": f"lost {i}"},
                                 timeout=30).status_code == 200
        wait_until(lambda: value(scrape(s), "tailcut_trace_spans_dropped_total",
                                 reason="export_failed") >= 10, timeout=30, what="dropped spans counted")
        assert value(scrape(s), "tailcut_trace_spans_exported_total") == 0


def test_our_proto_is_otlp(tmp_path):
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2
    mine = proto_fields([compile_proto(PROTO, tmp_path)])
    assert len(mine) == 9
    assert_proto_subset(mine, proto_fields([trace_service_pb2, trace_pb2, common_pb2, resource_pb2]))
