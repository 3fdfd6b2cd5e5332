"""The collector's scheduled syncs of a watched cluster (`Collector.due`, `syncstatus.watched`):
a cluster a watcher vouches for (its heartbeat: every watch open and heard from) and the
collector listed whole within `sync_watched_interval_s` is left out of a round; one whose
heartbeat stopped, whose last full listing is older, or any cluster with the setting at 0 is
synced as before. A process that syncs a cluster that rarely keeps no client of it between
(`ClusterSource.close_idle`). Against kubesim over HTTPS and a real Redis; the Celery task's
fan-out with a stand-in for the task it enqueues (our seam)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from collector import jobs, tasks
from collector.clusters import ClusterSource
from collector.jobs import Collector
from collector.sync import Work
from common.index import keys, syncstatus
from common.index.lease import Fence
from common.index.write.store_events import Beat, heartbeats
from common.kinds.registry import builtin_registry
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims, topology

A, B = "cluster-000", "cluster-001"
HOLDER = "watcher-0:1"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(generate_fleet(clusters=2, namespaces=3, seed=5), tmp_path)


@pytest.fixture
def c(sim: KubeSim, redis_url: str, r: redis.Redis) -> Collector:
    assert sim.kubeconfig_dir is not None
    settings = Settings(redis_url=redis_url, clusters_dir=str(sim.kubeconfig_dir))
    collector = Collector(settings, r, builtin_registry(), ClusterSource(settings))
    collector.reconcile()
    for name in (A, B):
        assert collector.sync_objects(name).ok and collector.sync_rbac(name).ok
    return collector


def beat(r: redis.Redis, cluster: str, now: float, objects: bool = True, rbac: bool = True) -> None:
    """A watcher replica's heartbeat for `cluster` at `now`, under a lease it holds."""
    r.set(keys.lease(cluster), HOLDER)
    r.set(keys.owner(keys.lease(cluster)), HOLDER)
    fence = Fence(keys.lease(cluster), HOLDER)
    assert heartbeats(r, [Beat(cluster, fence, objects=objects, rbac=rbac)], now=now) == [True]


def test_a_full_sync_records_its_listing_and_a_heartbeat_its_watch(
    c: Collector, r: redis.Redis
) -> None:
    before = time.time()
    s = syncstatus.read_all(r, [A])[A]
    assert s.listed_at and s.rbac_listed_at and s.watched_at is None
    beat(r, A, now=before + 1)
    s = syncstatus.read_all(r, [A])[A]
    assert s.watched_at == s.rbac_watched_at == round(before + 1, 3)
    assert s.listed_at and s.listed_at < before + 1  # a heartbeat lists nothing


def test_a_watched_cluster_is_left_out_until_its_watched_interval(
    c: Collector, r: redis.Redis
) -> None:
    all_of = [A, B]
    assert c.due(Work.OBJECTS, all_of, 60.0) == all_of  # nobody watches them yet
    beat(r, A, now=time.time())
    assert c.due(Work.OBJECTS, all_of, 60.0) == [B]
    assert c.due(Work.RBAC, all_of, 30.0) == [B]
    # the collector's last full listing of A is older than the watched interval: synced again
    r.hset(keys.sync(A), "listed_at", str(time.time() - 601))
    assert c.due(Work.OBJECTS, all_of, 60.0) == all_of
    assert c.due(Work.RBAC, all_of, 30.0) == [B]  # its RBAC listing is recent
    assert c.sync_objects(A).ok  # that sync records its listing: A is left out again
    assert c.due(Work.OBJECTS, all_of, 60.0) == [B]


def test_a_cluster_whose_watcher_went_quiet_is_synced_from_the_next_round(
    c: Collector, r: redis.Redis
) -> None:
    beat(r, A, now=time.time() - 61)  # last vouched for more than one round ago
    assert c.due(Work.OBJECTS, [A, B], 60.0) == [A, B]
    beat(r, A, now=time.time(), rbac=False)  # its RBAC watches are not all healthy
    assert c.due(Work.OBJECTS, [A, B], 60.0) == [B]
    r.hdel(keys.sync(A), "rbac_watched_at")
    assert c.due(Work.RBAC, [A, B], 30.0) == [A, B]


def test_zero_syncs_watched_clusters_like_the_others(c: Collector, r: redis.Redis) -> None:
    beat(r, A, now=time.time())
    c.settings = dataclasses.replace(c.settings, sync_watched_interval_s=0.0)
    topology.reset_stats(r)
    assert c.due(Work.OBJECTS, [A, B], 60.0) == [A, B]
    assert "hmget" not in topology.commandstats(r)  # nothing read for it


def test_a_fleet_listed_together_comes_due_spread_over_the_period(r: redis.Redis) -> None:
    """200 watched clusters listed at one moment (a start) come due over the next period, a
    share each round, not all at once a period later; each is then listed once a period."""
    period, round_s, t0 = 600.0, 60.0, 1_800_000_000.0
    fleet = [f"spread-{i:03d}" for i in range(200)]
    listed = dict.fromkeys(fleet, t0)
    for c in fleet:
        r.hset(keys.sync(c), mapping={"listed_at": str(t0)})
    per_round: list[int] = []
    gaps: list[float] = []
    for k in range(1, 21):  # two periods of beat rounds
        now = t0 + k * round_s
        for c in fleet:
            r.hset(keys.sync(c), "watched_at", str(now - 1))  # every watch heard from
        left_out = syncstatus.watched(r, fleet, "objects", round_s, period, now=now)
        due = [c for c in fleet if c not in left_out]
        for c in due:  # the collector lists them this round
            gaps.append(now - listed[c])
            listed[c] = now
            r.hset(keys.sync(c), "listed_at", str(now))
        per_round.append(len(due))
    assert sum(per_round[:10]) == sum(per_round[10:]) == len(fleet)  # once a period each
    assert max(per_round) <= len(fleet) // 5  # no round lists the fleet (the mean is 20)
    assert min(per_round) > 0
    assert max(gaps) <= period  # the interval stays the longest a cluster goes unlisted


class Enqueued:
    """Stands in for the Celery task the fan-out enqueues."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, dict[str, Any]]] = []

    def apply_async(self, args: Any, **kw: Any) -> None:
        self.calls.append((args, kw))


def test_the_fan_out_enqueues_only_the_due_clusters_in_one_read(
    c: Collector, r: redis.Redis
) -> None:
    beat(r, A, now=time.time())
    task = Enqueued()
    topology.reset_stats(r)
    assert tasks._fan_out(task, c, Work.OBJECTS, 60.0) == 1
    assert task.calls == [((B,), {"expires": 60.0})]
    stats = topology.commandstats(r)
    assert stats["hmget"] == 2  # one per cluster (pipelined), none for the rest


def test_leaf_clients_idle_for_a_round_are_closed_and_built_again_on_need(
    c: Collector, r: redis.Redis
) -> None:
    source = c.source
    assert source.held() == [A, B]  # both synced by the fixture, within the round
    now = time.monotonic()  # both were last asked for before it
    assert source.close_idle(60.0, now=now) == []
    first = source.client(A)
    assert source.close_idle(60.0, now=now + 60) == [B]  # A was asked for again since
    assert source.held() == [A] and source.client(A) is first
    assert source.close_idle(60.0, now=time.monotonic() + 61) == [A]
    assert source.held() == []
    assert c.sync_objects(A).ok  # a closed client is built again from the kept config
    assert source.held() == [A] and source.client(A) is not first


def test_each_sync_closes_the_clients_idle_for_a_sync_interval(
    c: Collector, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[float] = []
    close_idle = c.source.close_idle
    monkeypatch.setattr(c.source, "close_idle", lambda s: calls.append(s) or close_idle(s))
    assert c.sync_rbac(A).ok
    assert calls == [max(c.settings.sync_interval_s, jobs.CLIENT_IDLE_MIN_S)] == [60.0]
