"""Watcher replicas share the fleet: each holds about clusters / replicas (within 1 once
settled), rebalancing as replicas join and leave. A cluster changing hands is never unwatched:
the new owner lists and watches it before the old one lets go, and writes only once the lease
is its own, so changes made throughout end up stored exactly as a full sync would store them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from common import redis_client
from common.index import keys, rows
from common.leaf import registry
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims, topology
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import Running, full_sync_members, stored

CLUSTERS = 5


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    fleet = generate_fleet(clusters=CLUSTERS, namespaces=2, seed=8)
    yield from sims.running(fleet, tmp_path, bookmark_interval_s=0.2)


def held(r: redis.Redis, clusters: list[str]) -> dict[str, str]:
    """Cluster -> the replica name holding its lease ("" when none)."""
    values = redis_client.mget(r, [keys.lease(c) for c in clusters])
    return {c: v.decode().split(":")[0] if v else "" for c, v in zip(clusters, values, strict=True)}


def shares(r: redis.Redis, clusters: list[str]) -> list[int]:
    owners = list(held(r, clusters).values())
    if "" in owners:
        return []
    return sorted(owners.count(o) for o in set(owners))


def test_replicas_share_the_fleet_and_hand_over_without_a_gap(sim: KubeSim, redis_url: str) -> None:
    assert sim.kubeconfig_dir is not None
    settings = Settings(
        redis_url=redis_url,
        clusters_dir=str(sim.kubeconfig_dir),
        watch_lease_ttl_s=2.0,
        watch_idle_timeout_s=30.0,
        watch_rbac_debounce_s=0.05,
        watch_metrics_port=0,
    )
    r = topology.client(redis_url)
    registry.reconcile(r, registry.load_cluster_configs(settings))
    clusters = sorted(sim.clusters)
    running: dict[str, Running] = {}
    unwatched: list[str] = []
    stop = threading.Event()

    def watched() -> set[str]:
        """Clusters some replica watches: its own, or claimed and fully listed."""
        out: set[str] = set()
        for run in list(running.values()):
            rep = run.replica
            out |= set(list(rep.watches))
            out |= {c for c, w in list(rep.claims.items()) if w.listed()}
        return out

    def sample() -> None:
        while not stop.wait(0.05):
            try:
                missing = sorted(set(clusters) - watched())
            except RuntimeError:  # a dict changed while copied: sample again
                continue
            unwatched.extend(missing)

    def flip(i: int) -> None:
        """A status change on every cluster (the changes the hand-overs must not lose)."""
        for c in clusters:
            sim.set_ready(c, "Kustomization", "app-0000", "apps", i % 2 == 0, reason=f"R{i}")

    try:
        running["a"] = Running(settings, "a")
        wait_for(lambda: shares(r, clusters) == [CLUSTERS], 30, "a holds every cluster")
        for c in clusters:
            wait_for(lambda c=c: running["a"].replica.watches[c].healthy(), 30, f"{c} watched")
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        running["b"] = Running(settings, "b")
        flip(1)
        wait_for(lambda: shares(r, clusters) == [2, 3], 30, "a and b share 3 / 2")
        running["c"] = Running(settings, "c")
        flip(2)
        wait_for(lambda: shares(r, clusters) == [1, 2, 2], 30, "three replicas share 2 / 2 / 1")
        flip(3)
        running["c"].stop()  # leaving: it hands its cluster over before letting go
        del running["c"]
        wait_for(lambda: shares(r, clusters) == [2, 3], 30, "back to 3 / 2")
        stop.set()
        sampler.join(5)
        assert unwatched == [], f"clusters without a watch during hand-overs: {unwatched[:5]}"

        flip(4)  # Ready again: every change made above was followed, and this one
        for c in clusters:
            wait_for(
                lambda c=c: (
                    rows.status_of(row_of(r, c, "app-0000", "Kustomization", "apps") or "")
                    == "healthy"
                ),
                30,
                f"the last change on {c}",
            )
            wait_for(
                lambda c=c: stored(r, c) == full_sync_members(sim, c), 30, f"{c} as a full sync"
            )
        assert sum(len(run.replica.claims) for run in running.values()) == 0
    finally:
        stop.set()
        for run in running.values():
            run.stop()
        r.close()
