"""The whole stack on a Redis Cluster (3 primaries, 3 replicas on loopback): gunicorn on
`redis+cluster://`, a real Celery worker and beat on a standalone broker (Celery does not
support Redis Cluster). Under list load the primary holding a leaf cluster's slot is killed:
every answer during the failover is a 200 or a 503 with a JSON body, never another 5xx; once
its replica is promoted everything answers again without a restart, a walk holds every row once
(it equals the leaf count), and syncs go on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from common.index import keys
from common.redis_server import RedisClusterSet, RedisServer, start_redis_cluster
from kubesim.server import KubeSim
from tests.reliability.stack import (
    primary_killed_under_load,
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
    sim: KubeSim, cluster: RedisClusterSet, broker_url: str, tmp_path: Path
) -> None:
    """`broker_url` (a standalone server) is Celery's broker."""
    assert sim.kubeconfig_dir is not None
    victim: list[RedisServer] = []

    def kill(rows: list[tuple[Any, ...]]) -> None:
        victim.append(primary_of(cluster, keys.rows(rows[0][0])))
        victim[0].process.kill()

    def promoted() -> bool:
        primaries = cluster.primaries()
        return victim[0] not in primaries and len(primaries) == 3 and cluster.state_ok()

    primary_killed_under_load(
        sim.kubeconfig_dir, tmp_path, cluster.url, broker_url, kill=kill, promoted=promoted
    )
