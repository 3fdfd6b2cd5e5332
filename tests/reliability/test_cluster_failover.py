"""The whole stack on a Redis Cluster (3 primaries, 3 replicas on loopback): gunicorn on
`redis+cluster://`, a real Celery worker and beat on a standalone broker (Celery does not
support Redis Cluster). Under list load the primary holding a leaf cluster's slot is killed:
every answer during the failover is a 200 or a 503 with a JSON body, never another 5xx; once
its replica is promoted everything answers again without a restart, a walk holds every row once
(it equals the leaf count), and syncs go on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from common.index import keys
from common.redis_server import RedisClusterSet, RedisServer, start_redis_cluster
from fleetscope.supervisor import Supervisor
from kubesim.server import KubeSim
from tests.reliability.stack import (
    ADMIN,
    http_json,
    stack_env,
    start_beat,
    start_query,
    start_worker,
    synced_objects,
    wait_for,
    walk,
)


@pytest.fixture
def cluster() -> Iterator[RedisClusterSet]:
    c = start_redis_cluster(node_timeout_ms=1000)
    yield c
    c.stop()


def primary_of(cluster: RedisClusterSet, key: str) -> RedisServer:
    """The node serving `key`'s slot now."""
    slot = key_slot(key.encode())
    for node in cluster.primaries():
        with cluster.client(node) as c:
            for lo, hi, served_by, *_replicas in c.execute_command("CLUSTER", "SLOTS"):
                if lo <= slot <= hi:
                    return next(n for n in cluster.nodes if n.port == int(served_by[1]))
    raise AssertionError(f"no primary serves slot {slot}")


def test_a_primary_killed_under_load(
    sim: KubeSim, cluster: RedisClusterSet, redis_url: str, tmp_path: Path
) -> None:
    assert sim.kubeconfig_dir is not None
    intervals = {"sync_interval_s": 2, "rbac_sync_interval_s": 2, "registry_interval_s": 2}
    env = stack_env(cluster.url, sim.kubeconfig_dir, tmp_path, broker_url=redis_url, **intervals)
    sup = Supervisor(tmp_path, env)
    try:
        start_worker(sup)
        start_beat(sup, tmp_path)
        _, base = start_query(sup)
        ready = lambda: http_json(base + "/api/v1/status", ADMIN)[1] or {}  # noqa: E731
        wait_for(lambda: ready().get("state") == "ready", 90, "the first collection")
        before = walk(base)
        objects, _ = synced_objects(cluster.url)
        assert len(before) == len(set(before)) == objects > 0

        answers: list[tuple[int, Any]] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                answers.append(http_json(base + "/api/v1/objects?limit=20", ADMIN))

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        wait_for(lambda: len(answers) > 20, 30, "list load")
        victim = primary_of(cluster, keys.rows(before[0][0]))
        victim.process.kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: victim not in cluster.primaries() and len(cluster.primaries()) == 3,
            60,
            "a replica's promotion",
        )
        wait_for(cluster.state_ok, 60, "cluster_state:ok on the nodes left")
        failover_s = time.monotonic() - killed_at
        n = len(answers)
        wait_for(lambda: len(answers) > n + 20 and answers[-1][0] == 200, 60, "answers again")
        stop.set()
        loader.join(15)

        bad = [(s, b) for s, b in answers if s != 200 and not (s == 503 and b and b["error"])]
        assert not bad, bad[:3]
        assert not sup.dead(), [c.tail() for c in sup.dead()]

        # Syncs go on against the promoted replica, and a walk holds every row exactly once.
        after_failover = time.time()
        wait_for(
            lambda: synced_objects(cluster.url)[1] > after_failover,
            90,
            "every cluster synced after the failover",
        )
        wait_for(lambda: ready().get("state") == "ready", 60, "ready after the failover")
        after = walk(base)
        assert sorted(after) == sorted(before) and len(after) == len(set(after))
        assert len(after) == synced_objects(cluster.url)[0]
        codes = {s: sum(1 for a in answers if a[0] == s) for s in {a[0] for a in answers}}
        print(f"failover: promotion after {failover_s:.1f} s; answers by status {codes}")
    finally:
        sup.stop_all()
