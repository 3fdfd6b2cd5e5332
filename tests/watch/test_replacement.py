"""A replica started in the place of a killed one (as its Deployment would) takes the dead
one's clusters as their leases lapse, and nothing from the survivor: no cluster the survivor
watches changes hands, so none is listed twice, and the shares end even."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from collector.clusters import ClusterSource
from collector.watch.replica import WatchReplica
from common.index import keys
from common.index.lease import Lease
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.waiting import wait_for
from tests.watch.harness import REG, owners

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
        now_ms = int(time.time() * 1000)
        live = {t.decode().split(":")[0] for t in rb.zrangebyscore(keys.WATCHERS, now_ms, "+inf")}
        assert live == {"b", "c"}
    finally:
        stop.set()
        sampler.join(5)
    assert changed == [], f"the survivor's clusters changed hands: {changed[:3]}"
    # b handed two clusters to a at the start, and none since


@pytest.fixture
def by_hand(wsettings: Settings, rb: redis.Redis) -> Iterator[Callable[[str, bool], WatchReplica]]:
    """Replicas whose rounds the test runs (`tick()`), with a TTL long enough that nothing
    lapses unless the test says so; `old` backdates the start by two TTLs (settled, and running
    before any replica the test kills). A replica that died is a presence whose score is in the
    past, written by the test."""
    settings = dataclasses.replace(wsettings, watch_lease_ttl_s=TTL_S)
    made: list[tuple[WatchReplica, ClusterSource]] = []

    def make(name: str, old: bool) -> WatchReplica:
        source = ClusterSource(settings)
        replica = WatchReplica(settings, rb, REG, source, name)
        if old:
            replica._started -= 2 * TTL_S
            replica._born_ms -= int(2 * TTL_S * 1000)
        made.append((replica, source))
        return replica

    yield make
    # Built before they stop: a stream cut in its TLS handshake leaves kubesim's side unclosed.
    watches = [w for replica, _ in made for w in replica.watches.values()]
    wait_for(lambda: all(w.healthy() for w in watches), 60, "every taken cluster built")
    rb.delete(keys.WATCHERS)  # nobody left to hand over to: each releases at once
    for replica, source in made:
        replica.close()
        source.close()


TTL_S = 60.0
DEAD = "a:dead"


def _died(rb: redis.Redis, ago_s: float) -> None:
    """A replica whose presence lapsed `ago_s` ago (killed: no clean leave), its leases free."""
    rb.zadd(keys.WATCHERS, {DEAD: int((time.time() - ago_s) * 1000)})


def test_a_survivor_leaves_a_dead_replicas_clusters_to_a_replacement_that_comes_late(
    sim: KubeSim, rb: redis.Redis, by_hand: Callable[[str, bool], WatchReplica]
) -> None:
    """The dead one counts for one more TTL: the survivor, counting itself alone, would take all
    five (and the replacement claim its share back: those clusters listed twice)."""
    clusters = sorted(sim.clusters)
    _died(rb, 1.0)
    b = by_hand("b", True)
    b.tick()
    b.tick()  # a free cluster is not taken beyond the share a round later either
    assert sorted(owners(rb, clusters).values()) == ["", ""] + ["b"] * 3
    assert b.departed == {DEAD}
    c = by_hand("c", False)  # the replacement, announced after the leases lapsed
    c.tick()
    b.tick()
    assert sorted(owners(rb, clusters).values()) == ["b"] * 3 + ["c"] * 2
    assert c.departed == set() and len(c.claims) == 0


def test_a_replacement_started_before_the_leases_lapsed_takes_them_all(
    sim: KubeSim, rb: redis.Redis, by_hand: Callable[[str, bool], WatchReplica]
) -> None:
    """Started while the dead one still counted as live (its share then a third), and settled by
    the time its leases lapse: it still does not count the dead one, whose last announcement
    came before it started, so it takes all three at once (counting it, it would take two and
    leave one unwatched until the survivor stopped counting it, a TTL later)."""
    clusters = sorted(sim.clusters)
    rb.zadd(keys.WATCHERS, {DEAD: int((time.time() + TTL_S) * 1000)})
    dead_held = clusters[:3]
    for name in dead_held:
        assert Lease(rb, keys.lease(name), DEAD, int(TTL_S * 1000)).acquire()
    b = by_hand("b", True)
    b.tick()
    c = by_hand("c", False)
    c.tick()  # three live: a share of two, nothing free
    assert sorted(owners(rb, clusters).values()) == ["a"] * 3 + ["b"] * 2
    rb.delete(*[keys.lease(name) for name in dead_held])  # killed: its leases lapse
    _died(rb, 1.0)
    c._started -= TTL_S  # settled meanwhile
    c.tick()
    b.tick()
    assert sorted(owners(rb, clusters).values()) == ["b"] * 2 + ["c"] * 3
    assert b.departed == {DEAD} and c.departed == set()


def test_a_replica_gone_for_good_is_taken_over_one_ttl_later(
    sim: KubeSim, rb: redis.Redis, by_hand: Callable[[str, bool], WatchReplica]
) -> None:
    clusters = sorted(sim.clusters)
    _died(rb, 1.0)
    b = by_hand("b", True)
    b.tick()
    assert sorted(owners(rb, clusters).values()) == ["", ""] + ["b"] * 3
    _died(rb, TTL_S + 1.0)  # its presence lapsed over a TTL ago
    b.tick()
    assert owners(rb, clusters) == dict.fromkeys(clusters, "b")
    assert b.departed == set() and rb.zscore(keys.WATCHERS, DEAD) is None
