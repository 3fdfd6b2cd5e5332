"""Transition history through the real write paths: kubesim over HTTPS, the real watcher and the
real full sync (collector.jobs.Collector) writing to a real redis-server. A watcher's first list
and a first full sync record nothing; a status change is recorded once by the watcher and not
again by a full sync that finds the same; a change the watch missed is recorded once, by the
sync (`source: sync`); a handover between two replicas records nothing twice."""

from __future__ import annotations

from collections.abc import Callable

import redis

from collector.clusters import ClusterSource
from collector.jobs import Collector
from common.index import history, keys, rows
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import REG, Running, owners

APP = rows.sort_key("app-0002", "Kustomization", "apps")


def status(rb: redis.Redis, c: str) -> str:
    return rows.status_of(row_of(rb, c, "app-0002", "Kustomization", "apps") or "h")


def histories(rb: redis.Redis, c: str) -> list[bytes]:
    return list(rb.scan_iter(match=keys.history_pattern(c), count=1000))


def sources(rb: redis.Redis, c: str) -> list[tuple[str, str]]:
    return [(e["source"], e["status"]) for e in history.read(rb, c, APP)]


def full_sync(settings: Settings, rb: redis.Redis, c: str) -> None:
    source = ClusterSource(settings)
    try:
        assert Collector(settings, rb, REG, source).sync_objects(c).ok
    finally:
        source.close()


def test_watcher_records_once_and_a_sync_finding_the_same_adds_nothing(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    run = start_replica("a")
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what="watched")
    full_sync(wsettings, rb, c)
    assert histories(rb, c) == []  # the first list and sync found objects: no `created` flood
    sim.set_ready(c, "Kustomization", "app-0002", "apps", False, reason="BuildFailed", message="x")
    wait_for(lambda: status(rb, c) == "unhealthy", what="the event applied")
    full_sync(wsettings, rb, c)  # repeats what the watcher wrote
    assert sources(rb, c) == [("watch", "unhealthy")]
    assert [h.decode() for h in histories(rb, c)] == [history.key(c, APP)]


def test_a_missed_event_is_recorded_by_the_sync(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    run = start_replica("a")
    c = sim.clusters[1]
    wait_for(lambda: run.healthy(c), what="watched")
    sim.set_fault(c, stall_watch=True)  # the open watches deliver nothing
    sim.set_ready(c, "Kustomization", "app-0002", "apps", False, reason="BuildFailed", message="y")
    full_sync(wsettings, rb, c)  # the scheduled safety net
    assert sources(rb, c) == [("sync", "unhealthy")]
    sim.set_fault(c)
    watch = run.replica.watches[c]
    for stream in list(watch._streams):
        stream.close()  # the watcher relists and finds what the sync stored: nothing new
    wait_for(lambda: watch.listed(), what="watching again")
    sim.set_ready(c, "Kustomization", "app-0002", "apps", True, reason="Succeeded", message="ok")
    wait_for(lambda: status(rb, c) == "healthy", what="the recovery applied")
    assert sources(rb, c) == [("watch", "healthy"), ("sync", "unhealthy")]


def test_a_handover_records_nothing_twice(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    a = start_replica("a")
    c = sim.clusters[0]
    wait_for(lambda: a.healthy(c), what="a watches")
    sim.set_ready(c, "Kustomization", "app-0002", "apps", False, reason="BuildFailed", message="x")
    wait_for(lambda: status(rb, c) == "unhealthy", what="a applied it")
    b = start_replica("b")  # lists and watches every cluster it claims, then writes its lists
    a.stop()
    wait_for(lambda: set(owners(rb, sim.clusters).values()) == {"b"}, what="b took over")
    wait_for(lambda: b.healthy(c), what="b watches")
    sim.set_ready(c, "Kustomization", "app-0002", "apps", True, reason="Succeeded", message="ok")
    wait_for(lambda: status(rb, c) == "healthy", what="b applied it")
    assert sources(rb, c) == [("watch", "healthy"), ("watch", "unhealthy")]
