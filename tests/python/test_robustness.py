"""Slow and idle clients cannot exhaust the server: headers trickled, bodies never finished
and idle connections are cut by the read timeouts, and at the connection limit the client
that has waited longest for a request it never finished makes room for a new one."""

from __future__ import annotations

import socket
import time

import requests
from conftest import parse_prometheus, value, wait_until


def hostile(port: int, kind: int) -> socket.socket:
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    if kind == 0:
        c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    elif kind == 1:
        c.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    return c  # kind 2: connected, silent


def test_connection_limit_evicts_the_stalest_slow_client(start_server):
    s = start_server("--server.max_connections", "20", name="slowloris")
    socks = [hostile(s.port, i % 3) for i in range(40)]
    try:
        t0 = time.monotonic()
        r = requests.post(s.url("/v1/embeddings"), json={"input": "still answering"}, timeout=10)
        assert r.status_code == 200
        assert time.monotonic() - t0 < 5, "a legitimate client waited for slow ones to time out"
        fams = parse_prometheus(s.metrics())
        assert value(fams, "tailcut_http_evicted_connections_total") >= 20
        # Evicted connections close asynchronously; the count settles at the limit.
        wait_until(lambda: value(parse_prometheus(s.metrics()),
                                 "tailcut_http_open_connections") <= 21,
                   timeout=5, what="open connections back at the limit")
    finally:
        for c in socks:
            c.close()


def test_read_timeouts_close_slow_clients(start_server):
    s = start_server("--server.header_timeout_millis", "300", "--server.body_timeout_millis", "300",
                     name="timeouts")
    header_sock, body_sock = hostile(s.port, 0), hostile(s.port, 1)
    try:
        for c in (header_sock, body_sock):
            c.settimeout(5)
            t0 = time.monotonic()
            data = c.recv(1024)  # The server closes: recv returns b"" (or a reset).
            assert data == b"" or data.startswith(b"HTTP/1.1 4")
            assert time.monotonic() - t0 < 4
        fams = parse_prometheus(s.metrics())
        assert value(fams, "tailcut_http_timeouts_total") >= 2
        assert requests.post(s.url("/embed"), json={"inputs": "ok"}, timeout=10).status_code == 200
    finally:
        header_sock.close()
        body_sock.close()
