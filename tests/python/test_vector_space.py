"""Embedding vectors never change vector space silently (issue 11).

A text-embedding model's users index its vectors, so the precision controller may only serve
unpinned requests from variants that are interchangeable with the default one: batch-invariant
and with a measured fidelity to fp32 (model.yaml, written by tools/quantize_model.py) at or
above the configured floor. These tests run the real server with the real variants:

  * under a load that makes the controller switch, every answer for a text has cosine >= the
    floor to its fp32 answer, and X-Tailcut-Variant only ever names fp32 or the chosen variant;
  * while the controller serves the fast variant, texts cached under fp32 are still hits (and
    say fp32); once it is back on fp32, rows the fast variant computed are never served to
    unpinned requests;
  * a batch-dependent variant is never chosen, whatever the configuration names, and one under
    the floor only with the operator's opt-in;
  * every API (OpenAI, TEI, KServe) says which variant answered and which vector space the
    model's vectors are in.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import requests
from conftest import EmbeddingLoad, cosine_rows, scrape, values, wait_until

MODEL = "/v2/models/default"


def precision(server) -> dict:
    return server.get(MODEL).json()["precision"]


def fast_variant_of(server) -> str:
    """The variant the controller moves to (from its own description)."""
    p = precision(server)
    assert p["policy"] != "off", f"the controller is off: {p['controller']}"
    return p["controller"].split("<->")[1].strip()


def embed(server, texts, headers=None, **fields):
    r = requests.post(server.url("/v1/embeddings"), json={"input": texts, **fields},
                      headers=headers or {}, timeout=60)
    assert r.status_code == 200, r.text
    return np.asarray([d["embedding"] for d in r.json()["data"]]), r.headers


FRESH = {"Cache-Control": "no-cache, no-store"}
# A 2 ms SLO: any real load crosses 80 % of it, and an idle server is back under 50 % at once.
SWITCHING = ("--precision.mode", "slo", "--precision.slo_p99_millis", "2",
             "--precision.min_samples", "20", "--precision.min_dwell_millis", "1000",
             "--precision.interval_millis", "200", "--precision.window_seconds", "2",
             "--requests.max_queue_delay_millis", "0")


def test_default_policy_picks_an_interchangeable_variant(start_server):
    s = start_server("--precision.mode", "slo", name="default-policy")
    p = precision(s)
    floor = p["fidelity_floor"]
    assert not floor["waived"] and 0.9 < floor["min_cosine"] <= 1 and 0 < floor["recall_at_10"] <= 1
    fast = fast_variant_of(s)
    variants = {v["name"]: v for v in p["variants"]}
    chosen = variants[fast]
    assert chosen["batch_invariant"] and chosen["interchangeable"], chosen
    assert chosen["fidelity_min_cosine"] >= floor["min_cosine"]
    assert chosen["fidelity_recall_at_10"] >= floor["recall_at_10"]
    assert p["vector_space"] == "fp32"
    # Dynamic (per-tensor) INT8 is listed, servable when pinned, never the controller's.
    dyn = variants["int8-dynamic"]
    assert not dyn["batch_invariant"] and not dyn["interchangeable"]
    assert "batch-invariant" in dyn["why_not_interchangeable"]
    assert fast != "int8-dynamic"


def test_batch_dependent_variant_is_never_chosen(start_server):
    s = start_server("--precision.mode", "slo", "--precision.fast_variant", "int8-dynamic",
                     "--precision.allow_below_fidelity_floor", name="named-dynamic")
    p = precision(s)
    assert p["policy"] == "off"
    assert p["controller"].startswith("off") and "batch-invariant" in p["controller"], p
    assert "int8-dynamic" in s.log_text() and "precision controller off" in s.log_text()


def test_fidelity_floor_is_enforced_and_waivable(start_server):
    s = start_server("--precision.mode", "slo", "--precision.min_fidelity_cosine_ppm", "1000000",
                     name="strict-floor")
    p = precision(s)
    assert p["policy"] == "off" and "under the floor" in p["controller"], p
    s.stop()
    s = start_server("--precision.mode", "slo", "--precision.min_fidelity_cosine_ppm", "1000000",
                     "--precision.allow_below_fidelity_floor", name="waived-floor")
    p = precision(s)
    assert p["policy"] == "slo" and p["fidelity_floor"]["waived"], p
    assert fast_variant_of(s) != "int8-dynamic"


def test_answers_stay_in_the_vector_space_across_switches(start_server, sample_texts):
    s = start_server(*SWITCHING, name="switching")
    fast = fast_variant_of(s)
    floor = precision(s)["fidelity_floor"]["min_cosine"]
    warm = sample_texts[:24]  # Cached under fp32 before any load.
    pool = sample_texts[24:600]
    _, h = embed(s, warm)
    assert h["X-Tailcut-Variant"] == "fp32"

    with EmbeddingLoad(s, pool) as load:
        wait_until(lambda: fast in load.served_by(), timeout=60,
                   what=f"an answer computed by {fast}")
        # Still under load, hence (dwell, window) still on the fast variant: the texts cached
        # under fp32 are hits, answered with their fp32 rows.
        wait_until(lambda: precision(s)["active_variant"] == fast, timeout=30,
                   what=f"{fast} active")
        got, h = embed(s, warm)
        assert h["X-Tailcut-Cache-Hits"] == str(len(warm)), dict(h)
        assert h["X-Tailcut-Variant"] == "fp32", dict(h)
    assert not load.failures, load.failures[:5]
    answers = load.answers
    variants_seen = {v for _, _, v in answers}
    assert variants_seen <= {"fp32", fast}, variants_seen

    # Every answer against its fp32 answer, computed fresh (no cache either way).
    texts = sorted({t for t, _, _ in answers})
    reference = {}
    for i in range(0, len(texts), 64):
        chunk = texts[i:i + 64]
        rows, h = embed(s, chunk, headers=FRESH, precision="fp32")
        assert h["X-Tailcut-Variant"] == "fp32"
        reference.update(zip(chunk, rows))
    cos = np.array([float(vec @ reference[t]) for t, vec, _ in answers])
    fast_cos = np.array([float(vec @ reference[t]) for t, vec, v in answers if v == fast])
    assert cos.min() >= floor, (cos.min(), floor)
    assert fast_cos.size and fast_cos.min() >= floor
    exact = np.array([float(vec @ reference[t]) for t, vec, v in answers if v == "fp32"])
    assert exact.size == 0 or exact.min() >= 0.9999

    # Load gone: back on fp32, but only once the texts the fast variant answered have fp32
    # rows in the cache (the reference backfill, in idle time): they are hits at once, with
    # fp32 rows, never the fast variant's entries.
    wait_until(lambda: precision(s)["active_variant"] == "fp32", timeout=60, what="back on fp32")
    by_fast = sorted({t for t, _, v in answers if v == fast})[:64]
    got, h = embed(s, by_fast)
    assert h["X-Tailcut-Variant"] == "fp32", dict(h)
    assert h["X-Tailcut-Cache-Hits"] == str(len(by_fast)), dict(h)
    assert cosine_rows(got, np.asarray([reference[t] for t in by_fast])).min() >= 0.9999
    assert sum(values(scrape(s), "tailcut_warmup_total", action="reference_backfill")) > 0


def test_every_api_names_the_variant_and_the_vector_space(start_server):
    s = start_server(name="apis")
    r = requests.post(s.url("/v2/models/default/infer"),
                      json={"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES",
                                        "data": ["which vector space?"]}]}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["X-Tailcut-Variant"] == "fp32"
    assert r.json()["parameters"]["variant"] == "fp32"
    r = requests.post(s.url("/v2/models/default/infer"),
                      json={"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES",
                                        "data": ["which vector space?"]}],
                            "parameters": {"precision": "int8-dynamic"}}, timeout=30)
    assert r.status_code == 200 and r.headers["X-Tailcut-Variant"] == "int8-dynamic", r.text
    r = requests.post(s.url("/embed"), json={"inputs": "which vector space?"}, timeout=30)
    assert r.status_code == 200 and r.headers["X-Tailcut-Variant"] == "fp32"
    info = requests.get(s.url("/info"), timeout=10).json()
    assert info["model_dtype"] == "float32" and info["precision"]["vector_space"] == "fp32"
    models = requests.get(s.url("/v1/models"), timeout=10).json()["data"]
    text = [m for m in models if m["kind"] == "text-embedding"]
    assert text and all(m["precision"]["vector_space"] == "fp32" for m in text)
    one = requests.get(s.url("/v1/models/default"), timeout=10).json()
    assert {v["name"] for v in one["precision"]["variants"]} >= {"fp32", "int8-dynamic"}


@pytest.mark.parametrize("flag, value", [
    ("--precision.min_fidelity_cosine_ppm", "1000001"),
    ("--precision.min_fidelity_recall_at_10_ppm", "-1"),
])
def test_floor_settings_are_range_checked(tailcut_bin, default_model_dir, flag, value):
    r = subprocess.run([str(tailcut_bin), "serve", "--port", "0", "--model-repository",
                        str(default_model_dir.parent), flag, value],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert flag.removeprefix("--") in r.stderr and value in r.stderr, r.stderr
