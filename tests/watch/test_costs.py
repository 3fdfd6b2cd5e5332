"""What a watcher replica costs, as counts: its threads do not grow with the clusters it holds
(writers, recomputations and starts are shared by the process), and a cluster's first build
reads the stored dependency graph once (blockedBy settled in memory, as the full sync does),
not once per kind or batch; the rows then are what a full sync stores."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
import redis

from collector import debounce
from collector.watch import loop, writers
from common.index import graph
from common.leaf import registry
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import topology
from tests.support.waiting import wait_for
from tests.watch.harness import Running, consistent, full_sync_members, stored

CLUSTERS = 5
FLEET = (CLUSTERS, 3, 5)  # clusters, namespaces, seed (tests/watch/conftest.py)


def graph_reads(monkeypatch: pytest.MonkeyPatch, clusters: list[str]) -> Counter[str]:
    """Round trips (pipelines) that read a cluster's stored `dependents`, by cluster."""
    dep_keys = {k: c for c in clusters for k in graph.DEPENDENTS.keys(c)}
    counted: Counter[str] = Counter()
    real = redis.client.Pipeline.execute

    def execute(self: Any, *args: Any, **kw: Any) -> Any:
        read = {
            dep_keys[str(cmd_args[1])]
            for cmd_args, _options in self.command_stack
            if len(cmd_args) > 1
            and str(cmd_args[0]).upper() in ("HGETALL", "HMGET")
            and str(cmd_args[1]) in dep_keys
        }
        counted.update(read)
        return real(self, *args, **kw)

    monkeypatch.setattr(redis.client.Pipeline, "execute", execute)
    return counted


SHARED = (
    loop.LIST_WORKERS
    + 1  # the watch loop and its list pool
    + writers.WRITERS
    + debounce.WORKERS
    + 1  # the recompute pool and its timer
    + 2  # the replica's round and its lease keeper
)
"""The most threads a replica may start, whatever the number of clusters it holds."""


def started_since(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before)


@pytest.mark.standalone_only
def test_threads_do_not_grow_with_clusters_and_first_builds_read_the_graph_once(
    sim: KubeSim, wsettings: Settings, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters = sorted(sim.clusters)
    reads = graph_reads(monkeypatch, clusters)
    r = topology.client(redis_url)
    configs = registry.load_cluster_configs(wsettings)
    registry.reconcile(r, {clusters[0]: configs[clusters[0]]})  # one cluster first
    before = set(threading.enumerate())
    run = Running(wsettings, "a")
    try:
        wait_for(lambda: run.healthy(clusters[0]), 60, "the first cluster watched")
        registry.reconcile(r, configs)  # then all of them
        for c in clusters:
            wait_for(lambda c=c: run.healthy(c), 60, f"{c} watched")
        started = started_since(before)
        assert not [t for t in started for c in clusters if t.startswith(f"{c}:")], started
        assert len(started) <= SHARED, started

        # Each first build read the stored graph once (the writer's snapshot read), no more.
        assert reads == Counter(dict.fromkeys(clusters, 1))
        for c in clusters:
            assert stored(r, c) == full_sync_members(sim, c)
            assert consistent(r, c)

        # Live changes after the build are settled per batch against what is stored.
        c = clusters[0]
        sim.set_ready(c, "Kustomization", "app-0000", "apps", False, reason="BuildFailed")
        wait_for(lambda: reads[c] > 1, 30, "the change's blockedBy settled against Redis")
        wait_for(lambda: stored(r, c) == full_sync_members(sim, c), 30, f"{c} as a full sync")
    finally:
        run.stop()
        r.close()
