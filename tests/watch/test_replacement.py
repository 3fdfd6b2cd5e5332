"""A replica started in the place of a killed one (as its Deployment would) takes the dead
one's clusters as their leases lapse, and nothing from the survivor: no cluster the survivor
watches changes hands, so none is listed twice, and the shares end even."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import pytest
import redis

from common.index import keys
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.waiting import wait_for
from tests.watch.harness import owners

FLEET = (5, 2, 8)


@pytest.fixture
def wsettings(wsettings: Settings) -> Settings:
    """A lease TTL of 5 s: the replacement is started well within it, even on a busy machine
    (had it come later, the survivor would rightly have taken the free clusters meanwhile)."""
    return dataclasses.replace(wsettings, watch_lease_ttl_s=5.0)


def test_a_replacement_takes_the_dead_replicas_clusters_not_the_survivors(
    sim: KubeSim,
    rb: redis.Redis,
    wsettings: Settings,
    spawn: Callable[[str], subprocess.Popen[bytes]],
) -> None:
    clusters = sorted(sim.clusters)

    def holders() -> list[str]:
        return sorted(owners(rb, clusters).values())

    spawn("b")
    wait_for(lambda: holders() == ["b"] * 5, 60, "b holds every cluster")
    a = spawn("a")
    # a claims two of b's (its share of 5 over 2 is 3 for b, 2 for a)
    wait_for(lambda: holders() == ["a"] * 2 + ["b"] * 3, 60, "a and b share 2 / 3")
    survivors = sorted(c for c, o in owners(rb, clusters).items() if o == "b")

    changed: list[dict[str, str]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            now = owners(rb, survivors)
            if set(now.values()) != {"b"}:
                changed.append(now)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        spawn("c")
        started = time.monotonic()
        ttl = wsettings.watch_lease_ttl_s
        wait_for(
            lambda: holders() == ["b"] * 3 + ["c"] * 2 and time.monotonic() - started > 2 * ttl,
            60,
            "c holds the dead replica's two clusters, settled past its first TTL",
        )
        live = {t.decode().split(":")[0] for t in rb.zrange(keys.WATCHERS, 0, -1)}
        assert live == {"b", "c"}
    finally:
        stop.set()
        sampler.join(5)
    assert changed == [], f"the survivor's clusters changed hands: {changed[:3]}"
    # b handed two clusters to a at the start, and none since
