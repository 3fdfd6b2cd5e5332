"""Watch fixtures: a small kubesim fleet with fast bookmarks, registered in a clean Redis, and
watcher replicas run in threads (real HTTPS watches, real redis-server)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from collector.clusters import ClusterSource
from collector.sync import collect
from collector.watch.replica import WatchReplica
from common.index import graph, keys, rows
from common.kinds.registry import builtin_registry
from common.leaf import registry
from common.leaf.client import LeafClient
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests import topology

REG = builtin_registry()


def poll(cond: Callable[[], object], timeout_s: float = 15.0, what: str = "condition") -> None:
    """Wait until `cond()` is truthy (polled, never a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = KubeSim.start(
        generate_fleet(clusters=2, namespaces=4, seed=3),
        kubeconfig_dir=tmp_path / "clusters",
        bookmark_interval_s=0.2,
    )
    yield s
    s.stop()


@pytest.fixture
def wsettings(sim: KubeSim, redis_url: str) -> Settings:
    assert sim.kubeconfig_dir is not None
    return Settings(
        redis_url=redis_url,
        clusters_dir=str(sim.kubeconfig_dir),
        watch_lease_ttl_s=2.0,
        watch_idle_timeout_s=30.0,
        watch_rbac_debounce_s=0.05,
    )


@pytest.fixture
def rb(redis_url: str, wsettings: Settings) -> Iterator[redis.Redis]:
    """A bytes-mode client (as production uses), with the fleet registered."""
    client = topology.client(redis_url)
    registry.reconcile(client, registry.load_cluster_configs(wsettings))
    yield client
    client.close()


class Running:
    """A replica running in a thread; `stop()` is a clean shutdown (leases released)."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.r = topology.client(settings.redis_url)
        self.source = ClusterSource(settings)
        self.replica = WatchReplica(settings, self.r, REG, self.source, name)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.replica.run, args=(self.stop_event,))
        self.thread.start()

    def healthy(self, cluster: str) -> bool:
        w = self.replica.watches.get(cluster)
        return w is not None and w.rbac_healthy()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(15)
        self.source.close()
        self.r.close()


@pytest.fixture
def start_replica(wsettings: Settings, rb: redis.Redis) -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(name: str = "a", settings: Settings | None = None) -> Running:
        run = Running(settings or wsettings, name)
        started.append(run)
        return run

    yield start
    for run in started:
        run.stop()


def full_sync_members(sim: KubeSim, cluster: str) -> set[str]:
    """The oracle: the rows a full object sync would store for the cluster right now (with
    every row's blockedBy, as common.index.write.store.replace_rows computes it)."""
    config = registry.load_dir(str(sim.kubeconfig_dir))[cluster]
    client = LeafClient(config)
    try:
        return graph.with_blockers(collect(client, REG))
    finally:
        client.close()


def stored(r: redis.Redis, cluster: str) -> set[str]:
    """The stored rows as a full sync builds them (without what the writer records of their
    transitions, `recent`)."""
    return {rows.without_recent(m.decode()) for m in r.zrange(keys.rows(cluster), 0, -1)}
