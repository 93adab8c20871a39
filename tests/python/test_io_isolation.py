"""IO threads do IO: a request's CPU work (parsing a multi-MiB body, tokenising, formatting)
runs on the work pool, whose heavy lane always leaves a thread to small requests, so a large
request does not delay a small one on another connection. And a client that goes away is
noticed while its request is queued: its rows are dropped, not computed."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time

import requests
from conftest import make_model_repository, parse_prometheus, time_scale, value, wait_until

# A body just under the 4 MiB limit whose cost is all parsing: two million numbers in a
# field the embeddings route ignores, beside one short (cached) input.
BIG_BODY = (b'{"input": "still here", "pad": [' + b"0," * 1_999_990 + b"0]}")
SMALL = {"input": "still here"}


def small_latencies_ms(session: requests.Session, url: str, count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        r = session.post(url, json=SMALL, timeout=30)
        out.append((time.perf_counter() - t0) * 1e3)
        assert r.status_code == 200, r.text
        time.sleep(0.005)  # Pacing, so the samples spread over the big requests' parsing.
    return out


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1]


def test_a_4_mib_request_does_not_delay_a_small_one(server):
    url = server.url("/v1/embeddings")
    assert len(BIG_BODY) < 4 * 1024 * 1024
    with requests.Session() as small:
        small_latencies_ms(small, url, 10)  # Warm: the input is cached from here on.
        baseline = small_latencies_ms(small, url, 40)

        stop = threading.Event()
        big_answers: list[int] = []
        big_ms: list[float] = []

        def big_sender():
            with requests.Session() as big:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    r = big.post(url, data=BIG_BODY, timeout=60,
                                 headers={"Content-Type": "application/json"})
                    big_ms.append((time.perf_counter() - t0) * 1e3)
                    big_answers.append(r.status_code)

        sender = threading.Thread(target=big_sender)
        sender.start()
        try:
            wait_until(lambda: big_answers, timeout=60)  # One round trip done: it is running.
            during = small_latencies_ms(small, url, 60)
        finally:
            stop.set()
            sender.join()
    assert set(big_answers) == {200}
    # Each big request holds a work thread for its whole parse (hundreds of ms here); on an
    # IO thread, or on the only work thread, small requests wait for about half of it on
    # average (measured with --server.work_threads 1: P90 2 -> 168 ms). Beside it they should
    # only share the CPU: a few ms, or a small fraction of the big request's time when other
    # processes load the machine.
    allowed = max(10 * time_scale(), 0.05 * statistics.median(big_ms))
    print(f"small P90 {p90(baseline):.1f} ms alone, {p90(during):.1f} ms beside 4 MiB "
          f"requests (each {statistics.median(big_ms):.0f} ms)")
    assert p90(during) <= p90(baseline) + allowed, (
        f"small requests slowed from P90 {p90(baseline):.1f} to {p90(during):.1f} ms while "
        f"4 MiB requests were parsed (median {statistics.median(big_ms):.0f} ms each)")


def test_a_client_that_goes_away_has_its_queued_rows_dropped(start_server, tmp_path):
    # No cache (every row must be computed) and no time-based admission: one request of 1,000
    # distinct inputs is seconds of work on a 2-core machine.
    s = start_server("--cache.enabled=false", "--requests.max_queue_delay_millis", "0",
                     model_repository=make_model_repository(tmp_path / "models"),
                     name="disconnect")
    inputs = [f"question number {i}: how do I keep the tail latency of a server low when "
              f"{i % 7} clients send long texts?" for i in range(1000)]
    body = json.dumps({"input": inputs}).encode()
    c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    # Once the server holds the request (its rows are queued), the client gives up.
    wait_until(lambda: value(parse_prometheus(s.metrics()), "tailcut_batches_total") >= 1,
               timeout=30 * time_scale())
    c.close()
    wait_until(lambda: value(parse_prometheus(s.metrics()),
                             "tailcut_http_client_disconnects_total") == 1,
               timeout=10 * time_scale())

    def queue_empty():
        # The request is answered (499) at its first dropped row; the rest of its rows are
        # dropped as the batcher reaches them, so wait for the queue itself to be empty.
        fams = parse_prometheus(s.metrics())
        return (value(fams, "tailcut_http_requests_in_flight") <= 1  # The /metrics request.
                and value(fams, "tailcut_queue_rows") == 0)
    wait_until(queue_empty, timeout=60 * time_scale())
    fams = parse_prometheus(s.metrics())
    dropped = value(fams, "tailcut_dropped_rows_total")
    assert dropped >= 500, f"only {dropped} of 1,000 rows were dropped after the disconnect"
    assert value(fams, "tailcut_requests_total", status="499") == 1
    # The server is free again at once.
    t0 = time.monotonic()
    r = requests.post(s.url("/v1/embeddings"), json={"input": "next"}, timeout=30)
    assert r.status_code == 200
    assert time.monotonic() - t0 < 2 * time_scale()
