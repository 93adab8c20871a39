"""The precision controller under real load: a server with FP32 and INT8 variants and an SLO
small enough that a modest load crosses it switches to INT8 (seen in /metrics and in the
X-Tailcut-Variant header), fails no request while doing so, and returns to FP32 once the load
is gone. Pinned requests are never moved."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (DEFAULT_MODEL_NAME, EmbeddingLoad, cosine_rows, model_dir, parse_prometheus,
                      value, wait_until)


def variants_available() -> set[str]:
    text = (model_dir() / "model.yaml").read_text()
    return {line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.strip().startswith("- name:")}


@pytest.fixture(scope="module")
def needs_int8():
    names = variants_available()
    if not any(n.startswith("int8") for n in names):
        pytest.fail("models/all-MiniLM-L6-v2/model.yaml lists no INT8 variant; run "
                    "tools/quantize_model.py (scripts/setup.sh does)", pytrace=False)


def switches(server, to: str | None = None) -> float:
    fams = parse_prometheus(server.metrics())
    fam = fams.get("tailcut_precision_switches_total")
    if fam is None:
        return 0.0
    return sum(v for _, labels, v in fam.samples if to is None or labels.get("to") == to)


def test_switches_to_int8_under_load_and_back_without_failures(start_server, needs_int8,
                                                               sample_texts):
    # SLO 2 ms: any real load crosses 80 % of it. Short dwell and window keep the test quick.
    s = start_server("--precision.mode", "slo", "--precision.slo_p99_millis", "2",
                     "--precision.min_samples", "20", "--precision.min_dwell_millis", "1000",
                     "--precision.interval_millis", "200", "--precision.window_seconds", "2",
                     "--cache.enabled=false", "--requests.max_queue_delay_millis", "0",
                     name="controller")
    assert s.get("/v2/models/default").json()["precision"]["active_variant"] == "fp32"
    with EmbeddingLoad(s, sample_texts) as load:
        wait_until(lambda: sum(switches(s, v) for v in variants_available()
                               if v.startswith("int8")) >= 1,
                   timeout=60, what="a switch to the INT8 variant")
        wait_until(lambda: any(v.startswith("int8") for v in load.served_by()), timeout=30,
                   what="a request answered by the INT8 variant")
    assert not load.failures, load.failures[:5]
    assert any(v.startswith("int8") for v in load.served_by()), load.served_by()
    model = s.get("/v2/models/default").json()
    assert model["precision"]["policy"] == "slo"
    # Load gone: the window empties, the accurate variant is predicted to fit, it comes back.
    wait_until(lambda: switches(s, "fp32") >= 1, timeout=60, what="the switch back to fp32")
    assert s.get("/v2/models/default").json()["precision"]["active_variant"] == "fp32"
    fams = parse_prometheus(s.metrics())
    assert value(fams, "tailcut_precision_active", model=DEFAULT_MODEL_NAME, variant="fp32") == 1
    assert "serving variant 'int8" in s.log_text()


def test_pinned_requests_are_never_moved(start_server, needs_int8, golden_items):
    s = start_server("--precision.mode", "slo", "--cache.enabled=false", name="pinned")
    texts = [g.text for g in golden_items[:8]]
    r = s.post("/v1/embeddings", {"input": texts, "precision": "fp32"})
    assert r.status_code == 200 and r.headers["X-Tailcut-Variant"] == "fp32"
    got = np.asarray([d["embedding"] for d in r.json()["data"]])
    want = np.asarray([g.embedding for g in golden_items[:8]])
    assert cosine_rows(got, want).min() >= 0.9999
    r = s.post("/v1/embeddings", {"input": texts, "precision": "int8"})
    assert r.status_code == 200 and r.headers["X-Tailcut-Variant"].startswith("int8")
    r = s.post("/v1/embeddings", {"input": texts, "precision": "int4"})
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    assert "int4" in msg and "fp32" in msg and "int8" in msg


def test_corrupt_variant_file_is_reported_and_others_serve(start_server, tmp_path, needs_int8):
    folder = tmp_path / "repo" / "all-MiniLM-L6-v2"
    folder.mkdir(parents=True)
    src = model_dir()
    for name in ("model.onnx", "tokenizer.json", "model.yaml"):
        (folder / name).symlink_to(src / name)
    for line in (src / "model.yaml").read_text().splitlines():
        if line.strip().startswith("file:") and "int8" in line:
            bad = line.split(":", 1)[1].strip()
            (folder / bad).write_bytes(b"not an onnx file")
        elif line.strip().startswith("file:") and line.split(":", 1)[1].strip() != "model.onnx":
            f = line.split(":", 1)[1].strip()
            (folder / f).symlink_to(src / f)
    s = start_server(model_repository=folder.parent, name="corrupt-variant")
    model = s.get("/v2/models/all-MiniLM-L6-v2").json()
    details = {d["name"]: d for d in model["precision"]["variants"]}
    broken = [n for n, d in details.items() if n.startswith("int8")]
    assert broken and all(not details[n]["loaded"] and details[n]["error"] for n in broken)
    assert details["fp32"]["loaded"]
    assert s.post("/v1/embeddings", {"input": "still serving"}).status_code == 200
    r = s.post("/v1/embeddings", {"input": "x", "precision": "int8"})
    assert r.status_code == 400 and "available" in r.json()["error"]["message"]
