"""/metrics is valid Prometheus text exposition with the series operators rely on, counters
move with traffic, and every response explains its latency in a Server-Timing header."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
from conftest import DEFAULT_MODEL_NAME

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
STAGES = ("parse", "tokenize", "cache", "queue", "batch", "infer", "serialize", "total")


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str = ""
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse_labels(text: str) -> dict[str, str]:
    labels, pos = {}, 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        assert m, f"bad label syntax at {text[pos:]!r}"
        assert m.group(1) not in labels, f"duplicate label {m.group(1)}"
        labels[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return labels


def parse_prometheus(text: str) -> dict[str, Family]:
    """A strict little parser of the text format (0.0.4): HELP/TYPE before samples, every
    sample in a declared family, valid names, labels and values."""
    families: dict[str, Family] = {}
    assert text.endswith("\n"), "the exposition must end with a newline"
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                assert re.fullmatch(_NAME, parts[2]), f"line {n}: bad name {parts[2]!r}"
                fam = families.setdefault(parts[2], Family(parts[2]))
                if parts[1] == "TYPE":
                    assert not fam.samples, f"line {n}: TYPE after samples of {parts[2]}"
                    assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped")
                    fam.type = parts[3]
                else:
                    fam.help = parts[3] if len(parts) > 3 else ""
            continue
        m = _SAMPLE.match(line)
        assert m, f"line {n}: not a sample: {line!r}"
        name, labels, value = m.group(1), parse_labels(m.group(2) or ""), float(m.group(3))
        base = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in families and \
                    families[name[: -len(suffix)]].type == "histogram":
                base = name[: -len(suffix)]
        assert base in families, f"line {n}: sample of undeclared family {name}"
        families[base].samples.append((name, labels, value))
    for fam in families.values():
        check_family(fam)
    return families


def check_family(fam: Family) -> None:
    if fam.type == "counter":
        assert all(v >= 0 and not math.isnan(v) for _, _, v in fam.samples), fam.name
    if fam.type != "histogram":
        return
    series: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    totals: dict[tuple, dict[str, float]] = defaultdict(dict)
    for name, labels, value in fam.samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        if name.endswith("_bucket"):
            le = labels["le"]
            series[key].append((math.inf if le == "+Inf" else float(le), value))
        else:
            totals[key][name[len(fam.name):]] = value
    for key, buckets in series.items():
        les = [le for le, _ in buckets]
        assert les == sorted(les) and les[-1] == math.inf, f"{fam.name}{key}: bucket order"
        counts = [c for _, c in buckets]
        assert counts == sorted(counts), f"{fam.name}{key}: buckets not cumulative"
        assert totals[key]["_count"] == counts[-1], f"{fam.name}{key}: +Inf != _count"
        assert "_sum" in totals[key]


def values(fams, name: str, **labels) -> list[float]:
    base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in fams else name
    fam = fams[base]
    return [v for n, l, v in fam.samples
            if n == name and all(l.get(k) == want for k, want in labels.items())]


def value(fams, name: str, **labels) -> float:
    return sum(values(fams, name, **labels))


def server_timing(header: str) -> dict[str, float]:
    out = {}
    for part in header.split(","):
        m = re.fullmatch(r"\s*([a-z]+);dur=(\d+(?:\.\d+)?)\s*", part)
        assert m, f"bad Server-Timing entry {part!r} in {header!r}"
        out[m.group(1)] = float(m.group(2))
    return out


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
