"""Graceful shutdown under load: after SIGTERM the server stops accepting, answers what it
accepted completely (a correct 200, or a 503 when refused after shutdown began), and exits 0.
Connection errors are allowed only for requests sent after the signal."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest
import requests
from conftest import cosine_rows, make_model_repository, time_scale

SAME_COSINE = 0.99999
CLIENTS = 32


@dataclass
class Outcome:
    sent_at: float
    inputs: list[str]
    status: int | None = None
    body: object = None
    retry_after: str | None = None
    error: str | None = None
    done_at: float | None = None


@pytest.fixture(scope="module")
def repo(tmp_path_factory, default_model_dir):
    return make_model_repository(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def texts(sample_texts, golden_items):
    return sample_texts[:40] + [g.text for g in golden_items[8:40]]


def embed_alone(server, texts) -> dict[str, np.ndarray]:
    out = {}
    with requests.Session() as s:
        for t in texts:
            r = s.post(server.url("/v1/embeddings"), json={"input": t}, timeout=60)
            assert r.status_code == 200
            out[t] = np.asarray(r.json()["data"][0]["embedding"])
    return out


def run_load_and_terminate(server, texts, min_answers_before_signal: int):
    """Runs CLIENTS keep-alive clients until the server is gone; sends SIGTERM once
    `min_answers_before_signal` answers arrived. Returns (outcomes, signal time)."""
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    answered = threading.Semaphore(0)
    signalled = threading.Event()

    def client(c: int) -> None:
        with requests.Session() as session:
            k = 0
            while server.alive():
                inputs = [texts[(c * 7 + k * 3 + j) % len(texts)] for j in range(1 + (c + k) % 4)]
                k += 1
                o = Outcome(time.monotonic(), inputs)
                try:
                    r = session.post(server.url("/v1/embeddings"), json={"input": inputs},
                                     timeout=60)
                    o.status, o.retry_after = r.status_code, r.headers.get("Retry-After")
                    o.body = r.json()  # A cut-off body would fail here.
                except (requests.RequestException, ValueError) as e:
                    o.error = f"{type(e).__name__}: {e}"
                o.done_at = time.monotonic()
                with lock:
                    outcomes.append(o)
                answered.release()
                if o.error and signalled.is_set():
                    return  # The listener is closed: nothing more to learn from this client.

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for _ in range(min_answers_before_signal):
        assert answered.acquire(timeout=60), "the load never got going"
    with lock:
        signal_time = time.monotonic()
        signalled.set()
        server.send_signal(signal.SIGTERM)
    return threads, outcomes, signal_time


def check_outcomes(outcomes, signal_time, alone, in_transit_s: float = 0.0):
    assert outcomes
    counts: dict[str, int] = {}
    for o in outcomes:
        key = o.error.split(":")[0] if o.error else str(o.status)
        counts[key] = counts.get(key, 0) + 1
        if o.error:
            # A refused connection was never accepted, whenever the client thread stamped
            # it: with 32 Python threads a stamp can precede the actual connect by several
            # milliseconds, and the connect can land after the listener closed. Anything else
            # (a connection dropped after it was accepted) is only allowed after the signal.
            refused = "Connection refused" in o.error or "Errno 111" in o.error
            assert refused or o.sent_at >= signal_time - in_transit_s, (
                f"a request sent {signal_time - o.sent_at:.3f} s before SIGTERM failed: {o.error}")
            continue
        if o.status == 503:
            assert o.retry_after == "1"
            assert "shutting down" in o.body["error"]["message"]
            continue
        assert o.status == 200, f"{o.status}: {o.body}"
        data = o.body["data"]
        assert [d["index"] for d in data] == list(range(len(o.inputs)))
        got = np.asarray([d["embedding"] for d in data])
        want = np.array([alone[t] for t in o.inputs])
        assert cosine_rows(got, want).min() >= SAME_COSINE
    return counts


def test_sigterm_under_load_drains_and_exits_0(start_server, repo, texts):
    s = start_server("--server.shutdown_grace_millis", "10000", model_repository=repo,
                     name="drain")
    alone = embed_alone(s, texts)
    threads, outcomes, signal_time = run_load_and_terminate(s, texts, 3 * CLIENTS)
    code = s.wait_exit(timeout=40)
    for t in threads:
        t.join(timeout=60)
    assert code == 0, s.log_tail()
    counts = check_outcomes(outcomes, signal_time, alone)
    before = [o for o in outcomes if o.sent_at < signal_time]
    assert all(o.status == 200 for o in before), "every request sent before SIGTERM is served"
    assert counts.get("200", 0) >= 3 * CLIENTS
    log = s.log_text()
    assert "SIGTERM received: draining" in log
    # Within the grace period: nothing was left unanswered when it ended.
    assert "stopped cleanly" in log, s.log_tail()


def test_sigterm_with_short_grace_answers_or_refuses_cleanly(start_server, repo, texts):
    # A 1 ms grace period ends while requests are queued: those are failed with a complete
    # 503 answer, never dropped, and the process still exits 0.
    s = start_server("--server.shutdown_grace_millis", "1", "--max-batch-size", "2",
                     model_repository=repo, name="short-grace")
    alone = embed_alone(s, texts)
    threads, outcomes, signal_time = run_load_and_terminate(s, texts, CLIENTS)
    code = s.wait_exit(timeout=40)
    for t in threads:
        t.join(timeout=60)
    assert code == 0, s.log_tail()
    # With a 1 ms grace period the server closes its connections about a millisecond after
    # the signal: a request still in transit then (sent just before it) may find its
    # connection closed. What was read is never dropped: it is answered, 200 or 503 (the log
    # check below). How long "in transit" lasts depends on how fast the server reads: 50 ms
    # for the optimised build, scaled for sanitizer builds (TSan runs it ~10x slower), or, on
    # a slow or busy machine (32 Python client threads, one IO thread), the longest round trip
    # seen before the signal when that is longer.
    before = sorted(o.done_at - o.sent_at for o in outcomes
                    if o.status == 200 and o.done_at is not None and o.done_at < signal_time)
    lag = before[-1] if before else 0.0
    check_outcomes(outcomes, signal_time, alone, in_transit_s=max(0.05 * time_scale(), lag))
    assert "SIGINT" not in s.log_text() and "SIGTERM received" in s.log_text()
    assert "unanswered" not in s.log_text(), s.log_tail()


def test_sigint_also_drains(start_server, repo):
    s = start_server(model_repository=repo, name="sigint")
    assert s.post("/embed", {"inputs": "hi"}).status_code == 200
    assert s.stop(sig=signal.SIGINT) == 0
    assert "SIGINT received: draining" in s.log_text()
    assert "stopped cleanly" in s.log_text()
