"""Ownership: two `fleetscope watch` processes share the clusters through leases, each cluster
held by exactly one of them; after one is killed (SIGKILL: no clean release) the other takes
its clusters over within the lease expiry and keeps applying events; a clean stop hands over at
once; a cluster leaving the registry is dropped."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import redis

from common.index import keys, rows
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import Running, owners


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
    assert not rb.exists(*keys.cluster_keys(gone))  # no write of the watcher outlived it
    assert owners(rb, [sim.clusters[0]]) == {sim.clusters[0]: "b"}
