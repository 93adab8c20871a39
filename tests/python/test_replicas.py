"""Three tailcut replicas behind Debian's HAProxy, sharing one redis-server, run with the
recipe's own configuration (deploy/haproxy/haproxy.cfg): a text computed on one replica is a
cache hit on another; a replica SIGKILLed under load costs the clients no failed request (the
balancer retries on another replica); restarted, it rejoins, and its readiness gates its
traffic (no request reaches it before /v2/health/ready says 200)."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import threading
import time

import pytest
import requests
from conftest import (REPO_ROOT, RedisServer, TailcutServer, _die_with_parent, free_port,
                      scrape, value, wait_until)

RECIPE = REPO_ROOT / "deploy" / "haproxy" / "haproxy.cfg"


def haproxy_binary() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    if found:
        return found
    if os.environ.get("CI") == "true" or os.environ.get("TAILCUT_REQUIRE_SHARED_DATA") == "1":
        pytest.fail("haproxy not found: scripts/setup.sh installs it (apt-get install haproxy)")
    pytest.skip("haproxy not installed (apt-get install haproxy; scripts/setup.sh does)")


class Balancer:
    """HAProxy in the foreground on the recipe, with the replicas' addresses."""

    def __init__(self, folder, replica_ports: list[int]):
        self.port, self.stats_port = free_port(), free_port()
        self.log_path = folder / "haproxy.log"
        env = dict(os.environ, TAILCUT_LB_ADDR=f"127.0.0.1:{self.port}",
                   TAILCUT_LB_STATS_ADDR=f"127.0.0.1:{self.stats_port}",
                   **{f"TAILCUT_REPLICA_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(replica_ports)})
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([haproxy_binary(), "-db", "-f", str(RECIPE)], env=env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)
        log.close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def states(self) -> dict[str, str]:
        """Each replica's state as HAProxy sees it ("UP", "DOWN", "UP 1/2", ...)."""
        try:
            text = requests.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5).text
        except requests.ConnectionError:
            return {}
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        return {r["svname"]: r["status"] for r in rows if r["pxname"] == "replicas" and r["svname"].startswith("r")}

    def wait_state(self, server: str, state: str, timeout: float = 30) -> None:
        wait_until(lambda: self.states().get(server) == state, timeout=timeout,
                   what=f"HAProxy to see {server} {state} (now {self.states()})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def cluster(tmp_path, default_model_dir):
    redis = RedisServer(tmp_path / "redis").start()
    ports = [free_port() for _ in range(3)]
    flags = ["--redis.enabled", "--redis.port", str(redis.port)]

    def replica(i: int) -> TailcutServer:
        return TailcutServer(["--port", str(ports[i]), *flags], name=f"replica{i + 1}", log_dir=tmp_path)

    replicas = [replica(i).start() for i in range(3)]
    lb = Balancer(tmp_path, ports)
    try:
        for i in range(3):
            lb.wait_state(f"r{i + 1}", "UP")
        yield {"redis": redis, "replicas": replicas, "lb": lb, "replica": replica}
    finally:
        lb.stop()
        for r in replicas:
            if r.alive():
                r.stop(expect_code=None)
        redis.kill()


def embed(url: str, text: str) -> requests.Response:
    return requests.post(url, json={"input": text}, timeout=30)


def test_a_text_computed_on_one_replica_is_a_hit_on_another(cluster):
    a, b, c = cluster["replicas"]
    redis = cluster["redis"]
    r = embed(a.url("/v1/embeddings"), "computed once, on replica one")
    assert r.status_code == 200 and r.headers["X-Tailcut-Cache-Hits"] == "0"
    # Stored in Redis after the answer (asynchronously): wait for it, not for a guess.
    wait_until(lambda: redis.keys("tailcut:emb:*"), timeout=10, what="the row in Redis")
    before = value(scrape(b), "tailcut_l2_lookups_total", result="hit")
    r2 = embed(b.url("/v1/embeddings"), "computed once, on replica one")
    assert r2.status_code == 200 and r2.headers["X-Tailcut-Cache-Hits"] == "1"
    assert value(scrape(b), "tailcut_l2_lookups_total", result="hit") == before + 1
    assert r2.json()["data"][0]["embedding"] == r.json()["data"][0]["embedding"]
    # And through the balancer, whichever replica takes it.
    for _ in range(3):
        r3 = embed(cluster["lb"].url("/v1/embeddings"), "computed once, on replica one")
        assert r3.status_code == 200 and r3.headers["X-Tailcut-Cache-Hits"] == "1"


def test_a_replica_killed_under_load_fails_no_request_and_rejoins_when_ready(cluster):
    lb, replicas = cluster["lb"], cluster["replicas"]
    outcomes: list[object] = []
    lock = threading.Lock()
    stop = threading.Event()
    events: list[tuple[float, str]] = []  # (monotonic time, what): the timeline a failure shows.

    def client(k: int) -> None:
        i = 0
        session = requests.Session()  # Kept-alive connections, as real clients hold them.
        while not stop.is_set():
            try:
                r = session.post(lb.url("/v1/embeddings"), json={"input": f"client {k} text {i}"}, timeout=30)
                outcome: object = r.status_code
            except requests.RequestException as e:
                outcome = repr(e)
            with lock:
                outcomes.append(outcome)
                if outcome != 200:
                    events.append((time.monotonic(), f"fail {outcome!s:.60}"))
            i += 1

    def served() -> int:
        with lock:
            return len(outcomes)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: served() >= 40, timeout=60, what="40 requests through the balancer")
        victim = replicas[1]
        events.append((time.monotonic(), "kill"))
        victim.proc.kill()  # SIGKILL: no drain, connections reset mid-request.
        victim.proc.wait(timeout=10)
        victim.stopped_at = time.time()
        lb.wait_state("r2", "DOWN")
        events.append((time.monotonic(), "down"))
        at_down = served()
        wait_until(lambda: served() >= at_down + 40, timeout=60, what="40 requests with r2 down")

        # Restarted on its port: HAProxy sends it nothing until its readiness check passes.
        back = cluster["replica"](1)
        replicas[1] = back
        events.append((time.monotonic(), "restart"))
        back.start(wait_ready=False)
        events.append((time.monotonic(), "listening"))
        wait_until(lambda: back.get("/v2/health/ready").status_code == 200, timeout=90,
                   what="the restarted replica to be ready")
        # HAProxy needs two passing checks 500 ms apart (rise 2): no request can have reached
        # the replica yet.
        early = value(scrape(back), "tailcut_requests_total", route="/v1/embeddings")
        assert early == 0, f"{early} requests reached the replica before it was ready"
        events.append((time.monotonic(), "ready"))
        lb.wait_state("r2", "UP")
        events.append((time.monotonic(), "up"))
        wait_until(lambda: value(scrape(back), "tailcut_requests_total", route="/v1/embeddings") > 0,
                   timeout=30, what="traffic on the rejoined replica")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    failures = [o for o in outcomes if o != 200]
    timeline = [(round(t - events[0][0], 3), what) for t, what in sorted(events)] if events else []
    assert not failures, f"timeline (s after the kill) {timeline}: {len(failures)} of {len(outcomes)} requests failed: {failures[:10]}"
    assert len(outcomes) >= 120
