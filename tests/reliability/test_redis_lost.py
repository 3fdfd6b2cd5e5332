"""Redis lost: a private redis-server (not the session's) under a real worker, beat and gunicorn.
While it is down the API answers 503 JSON and /readyz fails, /healthz stays up, and no process
exits (no crash loop). Restarted empty, the state is `rebuilding` with "N of M clusters
collected" in /api/v1/status and in list answers, then `ready` after a round."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from common.index import keys
from common.redis_server import RedisServer, start_redis_server
from fleetscope.supervisor import Supervisor
from kubesim.server import KubeSim
from tests.reliability.stack import (
    ADMIN,
    http_json,
    stack_env,
    start_beat,
    start_query,
    start_worker,
    wait_for,
)

SLOW = "cluster-002"


@pytest.fixture
def private_redis() -> Iterator[list[RedisServer]]:
    holder = [start_redis_server()]
    yield holder
    holder[0].stop()


def state(base: str) -> dict:
    status, body = http_json(base + "/api/v1/status", ADMIN)
    return body if status == 200 else {}


def test_redis_down_then_back_empty(
    sim: KubeSim, private_redis: list[RedisServer], tmp_path: Path
) -> None:
    assert sim.kubeconfig_dir is not None
    server = private_redis[0]
    intervals = {"sync_interval_s": 2, "rbac_sync_interval_s": 2, "registry_interval_s": 2}
    env = stack_env(server.url, sim.kubeconfig_dir, tmp_path, **intervals)
    sup = Supervisor(tmp_path, env)
    try:
        start_worker(sup, pool="prefork")
        beat = start_beat(sup, tmp_path)
        _, base = start_query(sup)
        wait_for(lambda: state(base).get("state") == "ready", 60, "the first collection")

        # A slow cluster keeps a sync in flight when Redis goes (and the rebuild observable).
        sim.set_fault(SLOW, latency_s=0.3)
        probe = redis.Redis.from_url(server.url)
        wait_for(lambda: probe.exists(keys.lock(SLOW, "objects")), 30, "a sync in flight")
        probe.close()
        server.stop()
        status, body = http_json(base + "/api/v1/objects", ADMIN)
        assert status == 503 and body["error"] == "unavailable" and body["message"]
        assert http_json(base + "/readyz")[0] == 503
        assert http_json(base + "/api/v1/status", ADMIN)[0] == 503
        assert http_json(base + "/healthz") == (200, {"status": "ok"}), "alive, only unready"
        # Let beat fire (and fail) a few rounds and the worker notice the broker is gone.
        before = beat.log_path.stat().st_size
        wait_for(lambda: beat.log_path.stat().st_size > before + 200, 30, "beat to try again")
        wait_for(lambda: "redis" in worker_log(tmp_path).lower(), 30, "the worker to notice")
        assert not sup.dead(), [c.tail() for c in sup.dead()]

        private_redis[0] = server = start_redis_server(port=server.port)
        seen: list[dict] = []

        def rebuilding_with_registry() -> dict | None:
            s = state(base)
            seen.append(s)
            return s if s.get("state") == "rebuilding" and s.get("total") == 3 else None

        rebuilding = wait_for(
            rebuilding_with_registry,
            60,
            lambda: f"rebuilding with the registry back (last status: {seen[-1:]})",
        )
        assert rebuilding["collected"] < 3
        assert rebuilding["message"].startswith("Rebuilding index: ")
        assert rebuilding["message"].endswith(" of 3 clusters collected")
        fresh = wait_for(lambda: list_freshness(base), 30, "a list answer saying so")
        assert fresh["state"] == "rebuilding" and fresh["degraded"] is True
        assert fresh["message"].startswith("Rebuilding index: ")
        assert fresh["collected"] < fresh["total"] == 3

        sim.set_fault(SLOW)
        wait_for(lambda: state(base).get("state") == "ready", 60, "ready after a round")
        assert not sup.dead(), [c.tail() for c in sup.dead()]
    finally:
        sup.stop_all()


def list_freshness(base: str) -> dict | None:
    """The freshness block of a list answer once it counts the whole registry (each gunicorn
    worker re-reads the registry at most every second)."""
    status, page = http_json(base + "/api/v1/objects?limit=5", ADMIN)
    fresh = page["freshness"] if status == 200 else {}
    return fresh if fresh.get("total") == 3 else None


def worker_log(tmp_path: Path) -> str:
    return (tmp_path / "worker.log").read_text(errors="replace")
