"""Many concurrent clients: every answer must be exactly the answer the same text gets alone,
whatever batch it ran in, and the batcher must actually batch under load."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import requests
from conftest import TailcutServer, cosine_rows, make_model_repository, run_threads

CONNECTIONS = 64
REQUESTS_PER_CONNECTION = 4  # 256 requests in all.
SAME_COSINE = 0.99999


@pytest.fixture(scope="module")
def busy_server(tailcut_bin, default_model_dir, tmp_path_factory):
    # A short batch timeout makes cross-request batches likely even on a fast machine. The
    # cache is off: every request must really be computed, in whatever batch it lands.
    repo = make_model_repository(tmp_path_factory.mktemp("models"))
    # Time-based admission is off too: this test is about correctness under concurrency, and
    # on a slow machine a burst of 64 requests is more queued work than the 200 ms default.
    # So is the batch time bound: it sizes batches to what a worker runs in 10 ms, under TSan
    # one row, and the test counts batches holding several requests' inputs.
    with TailcutServer(["--batch-timeout-micros", "2000", "--cache.enabled=false",
                        "--requests.max_queue_delay_millis", "0",
                        "--batching.max_batch_millis", "0"],
                       model_repository=repo,
                       name="concurrency", log_dir=tmp_path_factory.mktemp("logs")) as s:
        yield s


@pytest.fixture(scope="module")
def texts(sample_texts, golden_items) -> list[str]:
    rng = random.Random(1234)
    pool = rng.sample(sample_texts, 120) + [g.text for g in golden_items]
    return list(dict.fromkeys(pool))


@pytest.fixture(scope="module")
def alone(busy_server, texts) -> dict[str, np.ndarray]:
    """Each text embedded in a request of its own, one request at a time."""
    with requests.Session() as s:
        out = {}
        for t in texts:
            r = s.post(busy_server.url("/v1/embeddings"), json={"input": t}, timeout=60)
            assert r.status_code == 200, r.text
            out[t] = np.asarray(r.json()["data"][0]["embedding"])
    return out


def counter(metrics: str, name: str, labels: str = "") -> float:
    total = 0.0
    for line in metrics.splitlines():
        m = re.match(rf"{name}(\{{[^}}]*\}})? (\S+)$", line)
        if m and labels in (m.group(1) or ""):
            total += float(m.group(2))
    return total


def test_concurrent_mixed_requests_equal_single_requests(busy_server, texts, alone):
    rng = random.Random(99)
    # Pre-built plan: (route, inputs) per request; a third single-input, the rest 2-6 inputs.
    plan = []
    for i in range(CONNECTIONS * REQUESTS_PER_CONNECTION):
        n = 1 if i % 3 == 0 else rng.randint(2, 6)
        plan.append(("/embed" if i % 4 == 1 else "/v1/embeddings", rng.sample(texts, n)))
    before = busy_server.metrics()
    answers: dict[int, np.ndarray] = {}

    def client(c: int) -> None:
        with requests.Session() as session:
            for k in range(REQUESTS_PER_CONNECTION):
                idx = c * REQUESTS_PER_CONNECTION + k
                route, inputs = plan[idx]
                single = len(inputs) == 1 and idx % 2 == 0  # Also send bare strings.
                if route == "/embed":
                    body = {"inputs": inputs[0] if single else inputs, "truncate": True}
                else:
                    body = {"input": inputs[0] if single else inputs}
                r = session.post(busy_server.url(route), json=body, timeout=120)
                assert r.status_code == 200, f"request {idx}: {r.status_code} {r.text[:300]}"
                if route == "/embed":
                    answers[idx] = np.asarray(r.json())
                else:
                    data = r.json()["data"]
                    assert [d["index"] for d in data] == list(range(len(inputs)))
                    answers[idx] = np.asarray([d["embedding"] for d in data])

    run_threads(client, CONNECTIONS)

    assert len(answers) == len(plan)
    for idx, (route, inputs) in enumerate(plan):
        got = answers[idx]
        assert got.shape == (len(inputs), 384), f"request {idx}"
        want = np.array([alone[t] for t in inputs])
        cos = cosine_rows(got, want)
        worst = int(np.argmin(cos))
        assert cos[worst] >= SAME_COSINE, (
            f"request {idx} ({route}) input {worst} {inputs[worst][:60]!r}: cosine {cos[worst]}")

    after = busy_server.metrics()
    requests_done = (counter(after, "tailcut_requests_total", 'status="200"')
                     - counter(before, "tailcut_requests_total", 'status="200"'))
    assert requests_done == len(plan)
    rows = sum(len(inputs) for _, inputs in plan)
    batches = counter(after, "tailcut_batches_total") - counter(before, "tailcut_batches_total")
    batched_rows = (counter(after, "tailcut_batch_size_sum")
                    - counter(before, "tailcut_batch_size_sum"))
    assert batched_rows == rows
    # Fewer batches than requests means some batch held the inputs of several requests.
    assert batches < len(plan), f"{batches} batches for {len(plan)} concurrent requests"
    single_row_batches = (counter(after, 'tailcut_batch_size_bucket', 'le="1"')
                          - counter(before, 'tailcut_batch_size_bucket', 'le="1"'))
    assert single_row_batches < batches, "no batch held more than one input"
