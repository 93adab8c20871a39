"""/metrics is valid Prometheus text exposition with the series operators rely on, counters
move with traffic, and every response explains its latency in a Server-Timing header."""

from __future__ import annotations

import re
import pytest
from conftest import (DEFAULT_MODEL_NAME, STAGES, parse_prometheus, server_timing, value,
                      values)


@pytest.fixture(scope="module")
def warm(server):
    """Some traffic on every API, so every series exists."""
    assert server.post("/v1/embeddings", {"input": ["a first text", "and a second"]}).ok
    assert server.post("/embed", {"inputs": "tei"}).ok
    assert server.post(f"/v2/models/{DEFAULT_MODEL_NAME}/infer",
                       {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1],
                                    "data": ["kserve"]}]}).ok
    assert server.post("/v1/embeddings", {"input": "x", "model": "nope"}).status_code == 404
    return server


def test_exposition_parses(warm):
    r = warm.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    fams = parse_prometheus(r.text)
    assert len(fams) >= 10


def test_required_series(warm):
    fams = parse_prometheus(warm.metrics())
    expect_types = {
        "tailcut_requests_total": "counter",
        "tailcut_stage_duration_seconds": "histogram",
        "tailcut_request_stage_duration_seconds": "histogram",
        "tailcut_batch_size": "histogram",
        "tailcut_batch_padded_tokens": "histogram",
        "tailcut_queue_rows": "gauge",
        "tailcut_http_requests_in_flight": "gauge",
    }
    for name, kind in expect_types.items():
        assert name in fams, f"missing {name}"
        assert fams[name].type == kind, f"{name} is {fams[name].type}"
        assert fams[name].help, f"{name} has no HELP"

    requests_total = fams["tailcut_requests_total"].samples
    assert all(set(l) == {"route", "model", "status"} for _, l, _ in requests_total)
    assert value(fams, "tailcut_requests_total", route="/v1/embeddings",
                 model=DEFAULT_MODEL_NAME, status="200") >= 1
    assert value(fams, "tailcut_requests_total", route="/v1/embeddings", status="404") >= 1
    for route in ("/embed", "/v2/models/{name}/infer"):
        assert value(fams, "tailcut_requests_total", route=route, model=DEFAULT_MODEL_NAME,
                     status="200") >= 1

    for stage in ("tokenize", "queue", "batch", "infer"):
        assert value(fams, "tailcut_stage_duration_seconds_count", model=DEFAULT_MODEL_NAME,
                     stage=stage) >= 3, stage
    for stage in ("parse", "serialize", "total"):
        assert value(fams, "tailcut_request_stage_duration_seconds_count",
                     route="/v1/embeddings", stage=stage) >= 1, stage
    assert value(fams, "tailcut_batch_size_count", model=DEFAULT_MODEL_NAME) >= 3
    assert value(fams, "tailcut_batch_padded_tokens_sum", model=DEFAULT_MODEL_NAME) > 0
    assert values(fams, "tailcut_queue_rows", model=DEFAULT_MODEL_NAME) == [0]
    # The /metrics request itself is read and not yet answered while it is collected.
    assert value(fams, "tailcut_http_requests_in_flight") >= 1


def test_counters_increase_with_traffic(warm):
    before = parse_prometheus(warm.metrics())
    # no-cache: each request computes, so the batch counters move by the full amount.
    for _ in range(3):
        assert warm.post("/v1/embeddings", {"input": ["one", "two", "three"]},
                         headers={"Cache-Control": "no-cache"}).ok
    assert warm.post("/embed", {"inputs": ["x"], "normalize": "no"}).status_code == 400
    after = parse_prometheus(warm.metrics())

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("tailcut_requests_total", route="/v1/embeddings", model=DEFAULT_MODEL_NAME,
                 status="200") == 3
    assert delta("tailcut_requests_total", route="/embed", status="400") == 1
    assert delta("tailcut_batch_size_sum", model=DEFAULT_MODEL_NAME) == 9
    assert delta("tailcut_stage_duration_seconds_count", model=DEFAULT_MODEL_NAME,
                 stage="infer") >= 3
    assert delta("tailcut_stage_duration_seconds_count", model=DEFAULT_MODEL_NAME,
                 stage="tokenize") == 3
    assert delta("tailcut_request_stage_duration_seconds_count", route="/v1/embeddings",
                 stage="total") == 3
    # 3 requests x 3 one-word texts x ([CLS] word [SEP]).
    assert delta("tailcut_input_tokens_total", model=DEFAULT_MODEL_NAME) == 27


@pytest.mark.parametrize("route,body", [
    ("/v1/embeddings", {"input": ["timing", "two"]}),
    ("/embed", {"inputs": "timing"}),
    (f"/v2/models/{DEFAULT_MODEL_NAME}/infer",
     {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["timing"]}]}),
])
def test_server_timing_header(warm, route, body):
    r = warm.post(route, body, headers={"Cache-Control": "no-cache"})
    assert r.status_code == 200, r.text
    timing = server_timing(r.headers["Server-Timing"])
    assert tuple(timing) == STAGES
    assert timing["infer"] > 0
    assert timing["total"] >= timing["infer"]
    assert timing["total"] >= timing["parse"] + timing["tokenize"] - 0.002


@pytest.mark.parametrize("method,path", [("GET", "/v1/models"), ("GET", "/health"),
                                         ("GET", "/metrics"), ("GET", "/nope"),
                                         ("DELETE", "/embed")])
def test_every_response_has_server_timing(warm, method, path):
    import requests
    r = requests.request(method, warm.url(path), timeout=30)
    timing = server_timing(r.headers["Server-Timing"])
    assert tuple(timing) == STAGES


def test_traceparent_is_continued_or_started(warm):
    incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = warm.post("/embed", {"inputs": "traced"}, headers={"traceparent": incoming})
    out = r.headers["traceparent"]
    assert re.fullmatch(r"00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01", out), out
    assert out.split("-")[2] != "00f067aa0ba902b7"  # The server's own span.
    fresh = warm.get("/health").headers["traceparent"]
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", fresh), fresh
    bad = warm.post("/embed", {"inputs": "traced"}, headers={"traceparent": "garbage"})
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", bad.headers["traceparent"])
