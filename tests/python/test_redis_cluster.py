"""tailcut's L2 tier on a Redis Cluster (--redis.cluster_nodes): a real 3-master, 3-replica
cluster started by the test (`redis-server --cluster-enabled yes`, `redis-cli --cluster
create`) with a 500 ms node timeout, so that a killed master fails over in about two seconds.

  sharing    a text computed by one tailcut server is an L2 hit on a second one
  failover   under load (three client threads on a server without L1, so every request asks
             the cluster), one master SIGKILLed: no request fails, every row is the model's
             (bit-identical when it came from the cache, within TOLERANCE when recomputed),
             and once the replica is promoted every text is a hit again

Redis Cluster routing itself (slots, MOVED, ASK, DeleteByPattern on every master) is tested
in tests/cache/redis_cluster_client_test.cc.
"""

from __future__ import annotations

import base64
import os
import random
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest
import requests
from conftest import (DIMENSIONS, RedisServer, TailcutServer, free_port, scrape, value,
                      wait_until)

TOLERANCE = 1e-5  # A recomputed row against the stored one (batch composition; see test_cache).
NODE_TIMEOUT_MILLIS = 500


def redis_cli() -> str:
    found = shutil.which("redis-cli") or "/usr/bin/redis-cli"
    if not os.access(found, os.X_OK):
        pytest.fail("redis-cli not found: apt-get install redis-server (it ships redis-cli)")
    return found


class RedisCluster:
    """masters x (1 + replicas) redis-servers on free loopback ports, made one cluster."""

    def __init__(self, folder, masters: int = 3, replicas: int = 1):
        self.nodes: list[RedisServer] = []
        for i in range(masters * (1 + replicas)):
            node = RedisServer(folder / f"node{i}", [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MILLIS),
                "--cluster-port", str(free_port()),
                # Replicas sync at once, not after the default 5 s wait for more replicas.
                "--repl-diskless-sync-delay", "0"], name=f"node{i}")
            self.nodes.append(node.start())
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        out = subprocess.run(
            [redis_cli(), "--cluster", "create", *addresses, "--cluster-replicas", str(replicas),
             "--cluster-yes"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, f"redis-cli --cluster create failed:\n{out.stdout}{out.stderr}"
        self.wait_healthy(masters)

    def seeds(self, n: int = 3) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes[:n])

    def live(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.alive()]

    def nodes_view(self, asker: RedisServer) -> list[dict]:
        """CLUSTER NODES as `asker` sees it: port, flags, master id, slot ranges."""
        rows = []
        for line in asker.command("CLUSTER", "NODES").decode().splitlines():
            w = line.split()
            if len(w) < 8:
                continue
            rows.append({"id": w[0], "port": int(w[1].split("@")[0].rsplit(":", 1)[1]),
                         "flags": w[2].split(","), "master_id": w[3],
                         "slots": [s for s in w[8:] if not s.startswith("[")]})
        return rows

    def masters(self) -> list[RedisServer]:
        """The live masters serving slots, as the first live node sees them."""
        view = self.nodes_view(self.live()[0])
        ports = {r["port"] for r in view
                 if "master" in r["flags"] and "fail" not in r["flags"] and r["slots"]}
        return [n for n in self.live() if n.port in ports]

    def healthy(self, masters: int) -> bool:
        try:
            for node in self.live():
                if b"cluster_state:ok" not in node.command("CLUSTER", "INFO"):
                    return False
                replication = node.command("INFO", "replication")
                if b"role:slave" in replication and b"master_link_status:up" not in replication:
                    return False
            return len(self.masters()) == masters
        except (OSError, ConnectionError):
            return False

    def wait_healthy(self, masters: int = 3, timeout: float = 30) -> None:
        wait_until(lambda: self.healthy(masters), timeout=timeout,
                   what=f"cluster_state:ok with {masters} masters on every live node, replicas in sync")

    def keys(self, pattern: str) -> list[bytes]:
        return sorted(k for m in self.masters() for k in m.keys(pattern))

    def replicas_caught_up(self) -> bool:
        """Every live replica has applied all its master has written. (WAIT cannot say this
        here: it counts acknowledgements of the asking connection's own writes, and a test's
        fresh connection wrote nothing, so it answers at once.)"""
        def field(text: bytes, name: bytes) -> int | None:
            for line in text.splitlines():
                if line.startswith(name + b":"):
                    return int(line.split(b":", 1)[1])
            return None
        offsets = {m.port: field(m.command("INFO", "replication"), b"master_repl_offset")
                   for m in self.masters()}
        for node in self.live():
            info = node.command("INFO", "replication")
            if b"role:slave" not in info:
                continue
            port = field(info, b"master_port")
            applied = field(info, b"slave_repl_offset")
            if port in offsets and (applied is None or applied < offsets[port]):
                return False
        return True

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()


@pytest.fixture
def cluster(tmp_path):
    c = RedisCluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.kill()


def server(cluster: RedisCluster, tmp_path, name: str, *args: str) -> TailcutServer:
    return TailcutServer(["--redis.enabled", "--redis.cluster_nodes", cluster.seeds(), *args],
                         name=name, log_dir=tmp_path).start()


def embed(s: TailcutServer, text: str, session=None) -> tuple[int, int, np.ndarray | None]:
    """(HTTP status, X-Tailcut-Cache-Hits, the row as the server's exact float32 values)."""
    r = (session or requests).post(s.url("/v1/embeddings"),
                                   json={"input": text, "encoding_format": "base64"}, timeout=30)
    if r.status_code != 200:
        return r.status_code, 0, None
    row = np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), dtype="<f4")
    assert row.shape == (DIMENSIONS,)
    return 200, int(r.headers["X-Tailcut-Cache-Hits"]), row


def l2_hits(s: TailcutServer) -> float:
    return value(scrape(s), "tailcut_l2_lookups_total", result="hit")


def test_a_text_computed_by_one_server_is_a_hit_on_another(cluster, tmp_path):
    a = server(cluster, tmp_path, "a")
    b = server(cluster, tmp_path, "b")
    try:
        texts = [f"cluster sharing text {i}" for i in range(12)]  # Spread over the slots.
        rows = {}
        for t in texts:
            status, hits, rows[t] = embed(a, t)
            assert status == 200 and hits == 0
        wait_until(lambda: len(cluster.keys("tailcut:emb:*")) == len(texts), timeout=10,
                   what="every row stored in the cluster")
        owners = {m.port for m in cluster.masters() if m.keys("tailcut:emb:*")}
        assert len(owners) >= 2, "the rows should land on several masters"
        before = l2_hits(b)
        for t in texts:
            status, hits, row = embed(b, t)
            assert status == 200 and hits == 1, t
            assert np.array_equal(row, rows[t]), "an L2 hit must be the stored row, bit for bit"
        assert l2_hits(b) == before + len(texts)
        fams = scrape(b)
        assert value(fams, "tailcut_redis_cluster_masters") == 3
        assert value(fams, "tailcut_redis_breaker_state") == 0
    finally:
        a.stop()
        b.stop()


@pytest.mark.threads
def test_a_master_killed_under_load_fails_no_request_and_hits_come_back(cluster, tmp_path):
    texts = [f"failover text {i}" for i in range(60)]
    writer = server(cluster, tmp_path, "writer")
    stored = {}
    for t in texts:
        status, _, stored[t] = embed(writer, t)
        assert status == 200
    writer.stop()
    wait_until(lambda: len(cluster.keys("tailcut:emb:*")) == len(texts), timeout=10,
               what="every row stored in the cluster")
    # Replication is asynchronous: the replicas have them all before a master is killed.
    wait_until(cluster.replicas_caught_up, timeout=10, what="every replica caught up")

    # L1 off: every request of the load asks the cluster.
    s = server(cluster, tmp_path, "load", "--cache.enabled=false")
    outcomes: list[tuple[float, int, int, str, np.ndarray | None]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(k: int) -> None:
        rng = random.Random(k)
        session = requests.Session()
        while not stop.is_set():
            t = rng.choice(texts)
            try:
                status, hits, row = embed(s, t, session)
            except requests.RequestException as e:
                status, hits, row = -1, 0, None
                t = f"{t}: {e!r}"
            with lock:
                outcomes.append((time.monotonic(), status, hits, t, row))

    def served() -> int:
        with lock:
            return len(outcomes)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: served() >= 60, timeout=30, what="60 requests before the kill")
        hits_before = l2_hits(s)
        victim = cluster.masters()[0]
        victim_keys = len(victim.keys("tailcut:emb:*"))
        assert victim_keys > 0
        killed_at = time.monotonic()
        victim.kill()
        cluster.wait_healthy(3, timeout=20)  # A replica promoted in the victim's place.
        promoted_at = time.monotonic()
        during = served()
        wait_until(lambda: served() >= during + 60, timeout=30, what="60 requests after failover")
    finally:
        stop.set()
        for t in threads:
            t.join(30)

    failures = [(round(at - killed_at, 2), status, t) for at, status, _, t, _ in outcomes
                if status != 200]
    assert not failures, f"{len(failures)} of {len(outcomes)} requests failed: {failures[:10]}"
    # A hit is a row some server computed for that text: the writer's, or one this server
    # recomputed while its slot was down and stored again (it may differ from the writer's in
    # the last bits: batch composition).
    computed = {t: [row] for t, row in stored.items()}
    for _, _, hits, t, row in outcomes:
        assert np.max(np.abs(row - stored[t])) <= TOLERANCE, f"a row differs from the model's: {t}"
        if hits == 0:
            computed[t].append(row)
    for _, _, hits, t, row in outcomes:
        if hits == 1:
            assert any(np.array_equal(row, c) for c in computed[t]), \
                f"a cache hit is no row ever computed for its text: {t}"
    served_while_down = [o for o in outcomes if killed_at <= o[0] < promoted_at]
    assert served_while_down, "no request was served while the master was down"

    # After the failover, every text is a hit again, the killed master's included (from the
    # promoted replica), as /metrics counts.
    def all_hits() -> bool:
        return all(embed(s, t)[1] == 1 for t in texts)

    wait_until(all_hits, timeout=20, interval=0.2, what="every text an L2 hit after failover")
    fams = scrape(s)
    assert l2_hits(s) >= hits_before + len(texts)
    assert value(fams, "tailcut_redis_cluster_masters") == 3
    assert value(fams, "tailcut_redis_cluster_topology_refreshes_total", result="ok") >= 2
    s.stop()
