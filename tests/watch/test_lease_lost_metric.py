"""`fleetscope_watch_leases_lost_total` counts the cluster leases a replica loses while watching
(k8s/monitoring's FleetscopeWatchLeaseLost alerts on it): a lease another holder took is
counted once, and the replica stops watching that cluster."""

from __future__ import annotations

from collections.abc import Callable

import redis
from prometheus_client import REGISTRY

from common.index import keys
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.waiting import wait_for
from tests.watch.harness import Running


def lost() -> float:
    return REGISTRY.get_sample_value("fleetscope_watch_leases_lost_total") or 0.0


def test_a_lease_taken_from_a_replica_is_counted(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    before = lost()
    run = start_replica("a", wsettings)
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what=f"{c} watched")
    rb.set(keys.lease(c), "someone-else", px=60_000)  # another holder now
    wait_for(lambda: lost() == before + 1, what="the lost lease counted")
    wait_for(lambda: not run.healthy(c), what=f"{c} no longer watched")
