"""Admission control: a full queue is answered at once with 429 (never by queueing), requests
whose deadline cannot be met get 504, a server with a broken model reports not-ready, and lazy
loading loads a model exactly once however many first requests race for it."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest
import requests
from conftest import DEFAULT_MODEL_NAME, cosine_rows, make_model_repository, run_threads

GOLDEN_COSINE = 0.9999


@pytest.fixture(scope="module")
def repo(tmp_path_factory, default_model_dir):
    return make_model_repository(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def long_items(golden_items, hf_tokenizer):
    """Golden texts of 60+ tokens: each makes a batch cost real time."""
    items = [g for g in golden_items if len(hf_tokenizer.encode(g.text).ids) >= 60]
    assert len(items) >= 6
    return items


def metric(metrics: str, name: str, labels: str = "") -> float:
    total = 0.0
    for line in metrics.splitlines():
        m = re.match(rf"{name}(\{{[^}}]*\}})? (\S+)$", line)
        if m and labels in (m.group(1) or ""):
            total += float(m.group(2))
    return total


def send_until_queued(s, texts: list[str]) -> tuple[dict[int, requests.Response],
                                                     list[threading.Thread]]:
    """Sends each text as its own request from its own thread and returns once all of them are
    in the model's queue: the answers (filled in as they come) and the threads to join."""
    answers: dict[int, requests.Response] = {}

    def send(i: int) -> None:
        answers[i] = requests.post(s.url("/v1/embeddings"), json={"input": texts[i]},
                                   timeout=120)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while metric(s.metrics(), "tailcut_queue_rows", f'model="{DEFAULT_MODEL_NAME}"') < len(texts):
        assert time.monotonic() < deadline, f"the first {len(texts)} requests never queued"
        time.sleep(0.01)
    return answers, threads


def check_embedding(response: requests.Response, item) -> None:
    assert response.status_code == 200, response.text[:300]
    got = np.asarray(response.json()["data"][0]["embedding"])
    assert cosine_rows(got, item.embedding)[0] >= GOLDEN_COSINE


def check_overloaded(response: requests.Response) -> None:
    assert response.status_code == 429, response.text[:300]
    assert response.headers.get("Retry-After") == "1"
    err = response.json()["error"]
    assert ("queue full" in err["message"] or "overloaded" in err["message"]) and err["code"] == 429


def test_full_queue_is_refused_at_once(start_server, repo, golden_items, hf_tokenizer,
                                       long_items):
    # Made deterministic: batches form only when 16 rows (more than the queue holds) or 250
    # tokens are queued, or after 60 s. Seven short requests (under 250 tokens together) stay
    # queued while a flood of two-input requests arrives: 7 + 2 rows exceed the queue bound
    # of 8, so every request of the flood must be refused at once. A 256-token request then
    # lifts the queued tokens over 250 and the seven run. No batch time bound, which would
    # make a batch full at fewer tokens once batches are measured.
    s = start_server("--max-queue", "8", "--max-batch-size", "16", "--cache.enabled=false",
                     "--batch-timeout-micros", "60000000", "--batching.max_batch_tokens", "250",
                     "--batching.max_batch_millis", "0",
                     model_repository=repo, name="overload")
    short = [g for g in golden_items if 3 <= len(hf_tokenizer.encode(g.text).ids) <= 20][:7]
    assert len(short) == 7
    admitted, first = send_until_queued(s, [g.text for g in short])

    flood: dict[int, requests.Response] = {}

    def send_flood(i: int) -> None:
        with requests.Session() as session:
            for k in range(3):
                texts = [long_items[(i + k + j) % len(long_items)].text for j in range(2)]
                flood[i * 3 + k] = session.post(s.url("/v1/embeddings"), json={"input": texts},
                                                timeout=60)

    run_threads(send_flood, 64)  # 192 requests, all answered while the seven wait.
    assert len(flood) == 192
    for r in flood.values():
        check_overloaded(r)
    assert not admitted, "the queued requests cannot have run yet"
    assert metric(s.metrics(), "tailcut_queue_rows", f'model="{DEFAULT_MODEL_NAME}"') == 7

    trigger = "word " * 300
    r = s.post("/v1/embeddings", {"input": trigger})
    assert r.status_code == 200, r.text
    for t in first:
        t.join(timeout=120)
    assert len(admitted) == 7
    for i, r in admitted.items():
        check_embedding(r, short[i])
    m = s.metrics()
    assert metric(m, "tailcut_queue_rejected_total", f'model="{DEFAULT_MODEL_NAME}"') == 192
    assert metric(m, "tailcut_requests_total", 'status="429"') == 192


def test_flood_gets_only_correct_answers_or_429(start_server, repo, long_items):
    # The realistic set-up: batches of 4 run back to back. How many requests are refused
    # depends on the machine; every answer must be a correct 200 or a well-formed 429.
    # Admission by queue size only: the time-based limit (200 ms of predicted wait) may refuse
    # before 8 rows wait when batches of long inputs run slowly (seen: 7 served of 200), and
    # this test counts on the queue-full's worth below.
    s = start_server("--max-queue", "8", "--max-batch-size", "4", "--cache.enabled=false",
                     "--requests.max_queue_delay_millis", "0", model_repository=repo,
                     name="flood")
    results: dict[int, tuple[int, requests.Response]] = {}

    def send(i: int) -> None:
        item_index = i % len(long_items)
        results[i] = (item_index, requests.post(
            s.url("/v1/embeddings"), json={"input": long_items[item_index].text}, timeout=120))

    run_threads(send, 200)
    statuses = {}
    for item_index, r in results.values():
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        if r.status_code == 429:
            check_overloaded(r)
        else:
            check_embedding(r, long_items[item_index])
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.get(200, 0) >= 8  # At least the first queue-full's worth is served.
    m = s.metrics()
    assert metric(m, "tailcut_queue_rejected_total") == statuses.get(429, 0)


def test_request_larger_than_the_queue_bound_is_admitted_behind_queued_work(
        start_server, repo, golden_items, hf_tokenizer):
    # 2,048 inputs (the most a request may have) against a queue bound of 128 rows, while
    # three requests are queued and a batch has been measured (admission by time is on):
    # admitted, its rows run in batches of up to 64, and everything is answered correctly.
    # Before, the row bound refused it while anything at all was queued, and the time
    # estimate counted its own rows as queueing delay. The three stay queued because batches
    # form only at 64 rows or 512 tokens, or after 5 s (which also ends the large request's
    # last, smaller batch). No batch time bound (it would cut batches by time instead).
    s = start_server("--max-queue", "128", "--max-batch-size", "64", "--cache.enabled=false",
                     "--batch-timeout-micros", "5000000", "--batching.max_batch_tokens", "512",
                     "--batching.max_batch_millis", "0",
                     model_repository=repo, name="large")
    r = s.post("/v1/embeddings", {"input": ["word " * 300] * 2})  # 512 tokens: batches now.
    assert r.status_code == 200, r.text
    assert metric(s.metrics(), "tailcut_batches_total") >= 1
    short = [g for g in golden_items if 3 <= len(hf_tokenizer.encode(g.text).ids) <= 20][:16]
    assert len(short) == 16
    queued, waiting = send_until_queued(s, [g.text for g in short[:3]])

    texts = [short[i % len(short)].text for i in range(2048)]
    assert not queued, "the three must still be queued when the large request arrives"
    large = s.post("/v1/embeddings", {"input": texts}, headers={"X-Request-Timeout-Ms": "300000"},
                   timeout=300)
    assert large.status_code == 200, large.text[:300]
    data = large.json()["data"]
    assert len(data) == 2048
    for i in (0, 1, 15, 1000, 2047):
        got = np.asarray(data[i]["embedding"])
        assert cosine_rows(got, short[i % len(short)].embedding)[0] >= GOLDEN_COSINE
    for t in waiting:
        t.join(timeout=120)
    assert len(queued) == 3
    for i, r in queued.items():
        check_embedding(r, short[i])


def test_deadline_under_load_is_504(start_server, repo, long_items):
    s = start_server("--max-batch-size", "4", "--cache.enabled=false",
                     "--requests.max_queue_delay_millis", "0", model_repository=repo,
                     name="deadline")
    stop = threading.Event()
    background_errors: list[str] = []

    def load(i: int) -> None:
        with requests.Session() as session:
            while not stop.is_set():
                items = [long_items[(i + k) % len(long_items)] for k in range(2)]
                r = session.post(s.url("/v1/embeddings"), json={"input": [g.text for g in items]},
                                 timeout=120)
                if r.status_code != 200:
                    background_errors.append(r.text[:200])

    loaders = [threading.Thread(target=load, args=(i,), daemon=True) for i in range(4)]
    for t in loaders:
        t.start()
    try:
        # Wait until batches are running, so the deadline decisions use measured batch times.
        deadline = time.monotonic() + 60
        while metric(s.metrics(), "tailcut_batches_total") < 4:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        before = metric(s.metrics(), "tailcut_deadline_exceeded_total")
        late = []
        with requests.Session() as session:
            for i in range(6):
                route, body = [("/v1/embeddings", {"input": "hello"}),
                               ("/embed", {"inputs": "hello"})][i % 2]
                late.append(session.post(s.url(route), json=body,
                                         headers={"X-Request-Timeout-Ms": "1"}, timeout=60))
            ok = session.post(s.url("/v1/embeddings"), json={"input": long_items[0].text},
                              headers={"X-Request-Timeout-Ms": "60000"}, timeout=60)
    finally:
        stop.set()
        for t in loaders:
            t.join(timeout=120)
    for r in late:
        assert r.status_code == 504, r.text[:300]
        body = r.json()
        message = body["error"]["message"] if isinstance(body["error"], dict) else body["error"]
        assert "deadline" in message
        if "error_type" in body:
            assert body["error_type"] == "Timeout"
    check_embedding(ok, long_items[0])
    assert not background_errors, background_errors[:3]
    # Regression: tailcut_deadline_exceeded_total was declared but never counted.
    assert metric(s.metrics(), "tailcut_deadline_exceeded_total") - before == len(late)


def test_kserve_timeout_parameter(start_server, repo):
    s = start_server("--batch-timeout-micros", "50000", model_repository=repo, name="kserve-timeout")
    body = {"inputs": [{"name": "t", "datatype": "BYTES", "shape": [1], "data": ["hi"]}],
            "parameters": {"timeout": 1}}  # Microseconds, as Triton's.
    r = s.post(f"/v2/models/{DEFAULT_MODEL_NAME}/infer", body)
    assert r.status_code == 504, r.text
    assert "deadline" in r.json()["error"]


def test_broken_model_makes_the_server_not_ready(start_server, tmp_path, golden_items):
    repo = make_model_repository(tmp_path / "models", {"broken": b"this is not an onnx file"})
    s = start_server(model_repository=repo, wait_ready=False, name="broken")
    deadline = time.monotonic() + 60
    while "not all models loaded" not in s.log_text():
        assert s.alive() and time.monotonic() < deadline, s.log_tail()
        time.sleep(0.02)
    r = s.get("/health")
    assert r.status_code == 503 and r.headers.get("Retry-After") == "1"
    assert r.json()["error_type"] == "Unhealthy" and "not ready" in r.json()["error"]
    assert s.get("/v2/health/ready").status_code == 503
    assert s.get("/v2/health/live").status_code == 200
    r = s.get("/v2/models/broken/ready")
    assert r.status_code == 503 and r.json()["ready"] is False
    meta = s.get("/v2/models/broken").json()
    assert meta["state"] == "UNAVAILABLE" and meta["error"]
    r = s.post("/v2/models/broken/infer", {"inputs": [{"name": "x", "datatype": "FP32",
                                                       "shape": [1], "data": [1]}]})
    assert r.status_code == 503 and "failed to load" in r.json()["error"]
    # The healthy model still serves.
    assert s.get(f"/v2/models/{DEFAULT_MODEL_NAME}/ready").status_code == 200
    item = golden_items[10]
    assert cosine_rows(s.embed([item.text]), item.embedding)[0] >= GOLDEN_COSINE


def test_lazy_loading_loads_once_under_concurrent_first_requests(start_server, repo, golden_items):
    # 32 requests land together on a model that was just loaded and warmed up once, cold: the
    # time-based admission estimate then says ~200 ms for the last of them and may 429 a few
    # (seen in CI). That is admission's job, not this test's; it checks the single load.
    s = start_server("--models.lazy_loading", "--requests.max_queue_delay_millis", "0",
                     model_repository=repo, name="lazy")
    meta = s.get(f"/v2/models/{DEFAULT_MODEL_NAME}").json()
    assert meta["state"] == "UNLOADED"
    assert s.get(f"/v2/models/{DEFAULT_MODEL_NAME}/ready").status_code == 503
    assert "loading model" not in s.log_text()
    items = golden_items[8:40]
    results: dict[int, requests.Response] = {}

    def first_request(i: int) -> None:
        results[i] = requests.post(s.url("/v1/embeddings"), json={"input": items[i].text},
                                   timeout=120)

    run_threads(first_request, len(items))
    for i, r in results.items():
        check_embedding(r, items[i])
    assert s.log_text().count("loading model") == 1, s.log_tail()
    assert s.get(f"/v2/models/{DEFAULT_MODEL_NAME}").json()["state"] == "READY"
    assert s.get(f"/v2/models/{DEFAULT_MODEL_NAME}/ready").status_code == 200
