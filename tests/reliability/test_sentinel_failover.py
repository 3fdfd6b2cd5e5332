"""The whole stack on a Sentinel-managed Redis (one primary, one replica, three Sentinels): a real
Celery worker and beat on the `sentinel://` broker, gunicorn on `redis+sentinel://`. Under list
load the primary is killed: every answer during the failover is a 200 or a 503 with a JSON
body, never another 5xx; once the replica is promoted everything answers again without a
restart, a walk holds every row once, and syncs go on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetscope.supervisor import Supervisor
from kubesim.server import KubeSim
from tests.reliability.sentinel import SentinelSet, start_sentinel_set
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
def sentinels() -> Iterator[SentinelSet]:
    s = start_sentinel_set()
    yield s
    s.stop()


def test_primary_killed_under_load(sim: KubeSim, sentinels: SentinelSet, tmp_path: Path) -> None:
    assert sim.kubeconfig_dir is not None
    intervals = {"sync_interval_s": 2, "rbac_sync_interval_s": 2, "registry_interval_s": 2}
    env = stack_env(
        sentinels.url, sim.kubeconfig_dir, tmp_path, broker_url=sentinels.broker_url, **intervals
    )
    sup = Supervisor(tmp_path, env)
    try:
        start_worker(sup)
        start_beat(sup, tmp_path)
        _, base = start_query(sup)
        ready = lambda: http_json(base + "/api/v1/status", ADMIN)[1] or {}  # noqa: E731
        wait_for(lambda: ready().get("state") == "ready", 90, "the first collection")
        before = walk(base)
        objects, _ = synced_objects(sentinels.url)
        assert len(before) == len(set(before)) == objects > 0

        answers: list[tuple[int, Any]] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                answers.append(http_json(base + "/api/v1/objects?limit=20", ADMIN))

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        wait_for(lambda: len(answers) > 20, 30, "list load")
        old = sentinels.primary.port
        sentinels.primary.process.kill()
        killed_at = time.monotonic()
        wait_for(lambda: sentinels.master_port() not in (None, old), 60, "the replica's promotion")
        failover_s = time.monotonic() - killed_at
        n = len(answers)
        wait_for(lambda: len(answers) > n + 20 and answers[-1][0] == 200, 60, "answers again")
        stop.set()
        loader.join(15)

        bad = [(s, b) for s, b in answers if s != 200 and not (s == 503 and b and b["error"])]
        assert not bad, bad[:3]
        assert not sup.dead(), [c.tail() for c in sup.dead()]

        # Syncs go on against the new primary, and a walk holds every row exactly once.
        after_failover = time.time()
        wait_for(
            lambda: synced_objects(sentinels.url)[1] > after_failover,
            90,
            "every cluster synced after the failover",
        )
        wait_for(lambda: ready().get("state") == "ready", 60, "ready after the failover")
        after = walk(base)
        assert sorted(after) == sorted(before) and len(after) == len(set(after))
        codes = {s: sum(1 for a in answers if a[0] == s) for s in {a[0] for a in answers}}
        print(f"failover: promotion after {failover_s:.1f} s; answers by status {codes}")
    finally:
        sup.stop_all()
