"""Ownership: two `fleetscope watch` processes share the clusters through leases, each cluster
held by exactly one of them; after one is killed (SIGKILL: no clean release) the other takes
its clusters over within the lease expiry and keeps applying events; a clean stop hands over at
once; a cluster leaving the registry is dropped."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import redis

from collector.watch.cluster import ClusterWatch
from collector.watch.rbac import RESOURCES
from common.index import keys, rows
from common.index.lease import Lease
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import REG, Running, client_for, owners


def test_killed_replica_is_taken_over(
    sim: KubeSim,
    rb: redis.Redis,
    spawn: Callable[[str], subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    a = spawn("a")
    wait_for(lambda: set(owners(rb, sim.clusters).values()) == {"a"}, 60, "a owns every cluster")
    b = spawn("b")
    wait_for(lambda: b"first round" in (tmp_path / "b.log").read_bytes(), 60, "b's first round")
    # leases are exclusive: each cluster has one holder (b may have been handed one already)
    assert set(owners(rb, sim.clusters).values()) <= {"a", "b"}
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    # Within the lease TTL (2 s) plus one tick; polled with a generous ceiling.
    wait_for(lambda: set(owners(rb, sim.clusters).values()) == {"b"}, 60, "b took over")
    c = sim.clusters[0]
    sim.set_ready(c, "Kustomization", "app-0003", "apps", False, reason="BuildFailed", message="z")
    wait_for(
        lambda: (
            rows.status_of(row_of(rb, c, "app-0003", "Kustomization", "apps") or "h") == "unhealthy"
        ),
        20,
    )
    b.send_signal(signal.SIGTERM)
    assert b.wait(15) == 0
    assert owners(rb, sim.clusters) == dict.fromkeys(sim.clusters, "")  # released on exit


def test_clean_stop_hands_over_and_registry_changes_are_followed(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    a = start_replica("a")
    wait_for(lambda: set(owners(rb, sim.clusters).values()) == {"a"}, what="a owns everything")
    b = start_replica("b")
    a.stop()  # releases its leases: b needs no TTL wait (next tick)
    wait_for(lambda: set(owners(rb, sim.clusters).values()) == {"b"}, what="b took over")
    gone = sim.clusters[1]
    rb.hdel(keys.CLUSTERS, gone)  # the registry reconcile removed it
    wait_for(lambda: owners(rb, [gone]) == {gone: ""}, what="lease released")
    assert gone not in b.replica.watches
    # deleted again once its watch stopped: no write of the watcher outlives it
    wait_for(lambda: not rb.exists(*keys.cluster_keys(gone)), what="its keys deleted")
    assert owners(rb, [sim.clusters[0]]) == {sim.clusters[0]: "b"}


def test_a_cluster_leaving_between_the_registry_and_config_reads_loses_its_rows(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    """The round reads the registry, then the sources' configs (re-read from the registry): a
    cluster removed between the two reads is missing only from the configs. Its watch is
    dropped then too, and its rows must go with it (CI, stop 78: they stayed for good)."""
    a = start_replica("a")
    gone = sim.clusters[1]
    wait_for(lambda: a.healthy(gone), what="a watches the cluster")
    configs = a.source.configs
    removed = threading.Event()

    def removed_in_between(refresh: bool = False) -> dict[str, object]:
        if removed.is_set():
            return configs(refresh)
        rb.hdel(keys.CLUSTERS, gone)
        removed.set()
        return {k: v for k, v in configs(refresh).items() if k != gone}

    a.source.configs = removed_in_between  # type: ignore[method-assign]
    wait_for(lambda: gone not in a.replica.watches, what="the watch dropped")
    assert owners(rb, [gone]) == {gone: ""}
    wait_for(lambda: not rb.exists(*keys.cluster_keys(gone)), what="its keys deleted")
    wait_for(lambda: not a.replica._retiring or all(f.done() for f in a.replica._retiring))
    assert not rb.exists(*keys.cluster_keys(gone))  # and they stay deleted
    assert a.healthy(sim.clusters[0])


def test_a_taken_clusters_grants_are_stored_while_its_row_lists_wait(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings
) -> None:
    """A replica taking many clusters at once queues hundreds of lists; a cluster's RBAC is
    listed first, apart from them, so its grants (and a revocation there) do not wait for the
    row kinds of the clusters taken before it (the twentieth L soak: a revocation on a cluster
    whose new holder was rebuilding took a minute)."""
    c = sim.clusters[0]
    mine = Lease(rb, keys.lease(c), "watcher-t:1", 15_000)
    assert mine.acquire()
    slots = threading.BoundedSemaphore(1)
    slots.acquire()  # every other list waits, as behind a hundred clusters' lists
    watch = ClusterWatch(rb, client_for(sim, c), REG, wsettings, mine.fence, slots)
    watch.start()
    try:
        wait_for(lambda: watch.rbac.stored > 0, what="grants stored from the cluster's own RBAC")
        assert watch.stats["lists"] == len(RESOURCES)  # only the RBAC resources were listed
        assert not watch.listed()  # so not healthy, nor ready to be handed over
        wait_for(watch.rbac_healthy, what="the RBAC watches open")
    finally:
        slots.release()
    try:
        wait_for(watch.healthy, what="every resource listed once the slots are free")
    finally:
        watch.stop()
        watch.client.close()
