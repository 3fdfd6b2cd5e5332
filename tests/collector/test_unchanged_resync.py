"""A re-sync that lists exactly what the stored rows were built from builds no rows (collector.sync,
`store.confirm_unchanged`), against kubesim over HTTPS and a real Redis: the snapshot's digest
(every object's uid and resourceVersion, the served versions, the kinds, the row code) and the
generation it was written at decide; a changed object, a write by another writer, lost rows,
other kinds or an old snapshot (`sync_rebuild_after_s`) all build the rows again, and a
rebuild repairs drift."""

from __future__ import annotations

import dataclasses
import gc
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from collector import sync
from collector.clusters import ClusterSource
from collector.jobs import Collector
from common.index import keys, rows, syncstatus
from common.index.write import store
from common.kinds.registry import KindRegistry, builtin_registry
from common.leaf import client as leaf_client
from common.leaf.client import LeafClient
from common.leaf.registry import load_dir
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims, topology

REG = builtin_registry()
C = "cluster-000"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(generate_fleet(clusters=1, namespaces=8, seed=11), tmp_path)


@pytest.fixture
def c(sim: KubeSim, redis_url: str, r: redis.Redis) -> Collector:
    assert sim.kubeconfig_dir is not None
    settings = Settings(redis_url=redis_url, clusters_dir=str(sim.kubeconfig_dir))
    collector = Collector(settings, r, REG, ClusterSource(settings))
    collector.reconcile()
    first = collector.sync_objects(C)
    assert first.ok and not first.unchanged and first.added == first.objects > 30
    return collector


def stored(r: redis.Redis) -> set[str]:
    return set(r.zrange(keys.rows(C), 0, -1))


def status(r: redis.Redis) -> syncstatus.ClusterSync:
    return syncstatus.read_all(r, [C])[C]


def test_unchanged_objects_build_no_rows_and_read_no_rows(c: Collector, r: redis.Redis) -> None:
    before, first = stored(r), status(r)
    assert first.snapshot and first.snapshot_generation == int(r.get(keys.generation(C)) or 0)
    topology.reset_stats(r)
    again = c.sync_objects(C)
    assert again.ok and again.unchanged
    assert (again.objects, again.kinds, again.added, again.removed) == (
        first.objects,
        first.kinds,
        0,
        0,
    )
    stats = topology.commandstats(r)
    assert "zrange" not in stats and "zrangebyscore" not in stats  # no stored row was read
    assert stats["hset"] == 2  # `syncing`, then `ok`: nothing else is written
    after = status(r)
    assert after.state == "ok" and after.last_success and after.last_success >= first.last_success
    assert (after.snapshot, after.snapshot_generation) == (
        first.snapshot,
        first.snapshot_generation,
    )
    assert after.snapshot_at == first.snapshot_at  # the rows' age, not the sync's
    assert stored(r) == before


def test_a_changed_object_is_built_then_the_next_resync_is_unchanged(
    c: Collector, sim: KubeSim, r: redis.Redis
) -> None:
    obj = sim.list(C, "Kustomization")[0]["metadata"]
    sim.set_ready(C, "Kustomization", obj["namespace"], obj["name"], False, "Broken", "boom")
    changed = c.sync_objects(C)
    assert not changed.unchanged and (changed.added, changed.removed) >= (1, 1)
    prefix = rows.sort_key(obj["namespace"], "Kustomization", obj["name"])
    (row,) = r.zrangebylex(keys.rows(C), f"[{prefix}", f"({prefix}\xff")
    assert rows.decode(C, row)["status"] == "unhealthy"
    assert c.sync_objects(C).unchanged


def test_a_write_by_another_writer_since_the_snapshot_builds_the_rows(
    c: Collector, r: redis.Redis
) -> None:
    r.incr(keys.generation(C))  # what every effective write by the watcher does
    assert not c.sync_objects(C).unchanged
    assert c.sync_objects(C).unchanged  # recorded again at the generation it wrote


def test_lost_rows_are_built_again(c: Collector, r: redis.Redis) -> None:
    before = stored(r)
    victim = sorted(before)[5]
    r.zrem(keys.rows(C), victim)  # rows lost outside the writer (the generation did not move)
    repaired = c.sync_objects(C)
    assert not repaired.unchanged and repaired.added == 1
    bare = {rows.without_recent(m) for m in stored(r)}  # the row came back: a transition
    assert bare == {rows.without_recent(m) for m in before}


def test_an_old_snapshot_is_rebuilt_and_the_rebuild_repairs_drift(
    c: Collector, r: redis.Redis
) -> None:
    counts = r.hgetall(keys.counts(C))
    r.delete(keys.counts(C))  # drift the row count cannot see
    assert c.sync_objects(C).unchanged  # trusted while the snapshot is young
    assert not r.exists(keys.counts(C))
    old = time.time() - c.settings.sync_rebuild_after_s - 1
    r.hset(keys.sync(C), "snapshot_at", str(old))
    rebuilt = c.sync_objects(C)
    assert not rebuilt.unchanged
    assert r.hgetall(keys.counts(C)) == counts
    assert status(r).snapshot_at and status(r).snapshot_at > old


def test_zero_always_builds(c: Collector, r: redis.Redis) -> None:
    c.settings = dataclasses.replace(c.settings, sync_rebuild_after_s=0.0)
    assert not c.sync_objects(C).unchanged


def test_other_kinds_build_the_rows(c: Collector, r: redis.Redis) -> None:
    fewer = KindRegistry(tuple(k for k in REG if k.key != "Kustomization"))
    client = c.source.client(C)
    result = sync.run(r, sync.Work.OBJECTS, client, fewer)
    assert not result.unchanged and result.removed > 0 and "Kustomization" not in result.kinds
    assert sync.run(r, sync.Work.OBJECTS, client, fewer).unchanged
    assert not sync.run(r, sync.Work.OBJECTS, client, REG).unchanged


def test_a_superseded_snapshot_records_no_digest(c: Collector, r: redis.Redis) -> None:
    before = stored(r)
    r.hdel(keys.sync(C), "snapshot")
    gen = store.generation(r, C)
    fields = {"state": "ok", "snapshot": "abc", "snapshot_at": time.time()}
    stats = store.replace_rows(r, C, sorted(before)[1:], fields, since_generation=gen - 1)
    assert stats.superseded and stored(r) == before  # a newer write landed: rows left alone
    assert r.hget(keys.sync(C), "snapshot") is None
    assert store.confirm_unchanged(r, C, "abc", len(before), {"state": "ok"}) is None


def test_an_interrupted_sync_lets_go_of_what_it_listed(
    c: Collector, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync interrupted after its list (SystemExit: what a worker's cancel on a broker
    connection loss raises in a child) keeps nothing it listed alive through the exception it
    raises, which its caller may hold for a while (collector/sync.py, `run`)."""
    listed: list[weakref.ref[sync.Listed]] = []
    real = sync.list_cluster

    def spy(client: Any, registry: KindRegistry, build_as_listed: bool = False) -> sync.Listed:
        out = real(client, registry, build_as_listed)
        listed.append(weakref.ref(out))
        return out

    def interrupted(*_: Any, **__: Any) -> list[str]:
        raise SystemExit(-15)

    monkeypatch.setattr(sync, "list_cluster", spy)
    monkeypatch.setattr(sync, "build", interrupted)
    r.hset(keys.sync(C), "snapshot", "")  # the stored snapshot no longer matches: rows built
    gc.disable()  # nothing freed by the cycle collector meanwhile: only what refcounts free
    try:
        with pytest.raises(SystemExit) as caught:
            sync.run(r, sync.Work.OBJECTS, c.source.client(C), REG)
        assert caught.value.__traceback__ is not None  # the exception and its lines, whole
        assert len(listed) == 1 and listed[0]() is None  # what it listed, gone
    finally:
        gc.enable()
    assert status(r).last_error == "SystemExit (unexpected; see the worker log)"


def test_a_listed_cluster_holds_its_kinds_pages_not_their_objects(tmp_path: Path) -> None:
    """Between its list and its build (rows are built only when the digest moved) a sync holds
    each plain kind's list as its pages' JSON bodies, a block or two a page, where the objects
    as dicts and strings were dozens of small blocks each, every one of the cluster's alive at
    once: the swing that set how many arenas a Celery child keeps (docs/operations.md, the
    thirty-second L soak)."""
    with sims.start(generate_fleet(clusters=1, namespaces=100, seed=11), tmp_path) as sim:
        assert sim.kubeconfig_dir is not None
        client = LeafClient(load_dir(str(sim.kubeconfig_dir))[C])
        listed = sync.list_cluster(client, REG)
        listed.held, listed.services, listed.namespaces = [], None, None  # plain kinds alone
        objects = [o for _, _, pages in listed.plain for o in pages.objects()]
        assert len(objects) == listed.count > 100
        gc.collect()
        with_objects = sys.getallocatedblocks()
        del objects
        gc.collect()
        with_pages = sys.getallocatedblocks()
        del listed
        gc.collect()
        as_pages, as_objects = with_pages - sys.getallocatedblocks(), with_objects - with_pages
        assert as_pages * 20 < as_objects, (as_pages, as_objects)
        client.close()


def _parse_counter(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many JSON documents from the leaf are parsed (common.leaf.client.loads)."""
    parsed = [0]
    real = leaf_client.loads

    def counted(raw: bytes) -> Any:
        parsed[0] += 1
        return real(raw)

    monkeypatch.setattr(leaf_client, "loads", counted)
    return parsed


def test_rows_built_as_listed_are_the_rows_built_from_kept_pages_with_each_page_parsed_once(
    sim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sim.kubeconfig_dir is not None
    client = LeafClient(load_dir(str(sim.kubeconfig_dir))[C])
    parsed = _parse_counter(monkeypatch)
    kept = sync.list_cluster(client, REG)
    kept_rows = sync.build(C, kept)
    kept_parses, kept_requests = parsed[0], client.requests
    parsed[0], client.requests = 0, 0
    as_listed = sync.list_cluster(client, REG, build_as_listed=True)
    assert all(not p.bodies and p.members is not None for _, _, p in as_listed.plain)
    assert sync.build(C, as_listed) == kept_rows
    assert (as_listed.digest, as_listed.count) == (kept.digest, kept.count) != ("", 0)
    assert client.requests == kept_requests
    pages = sum(len(p.bodies) for _, _, p in kept.plain)
    assert pages >= len(kept.plain) > 5
    assert parsed[0] == client.requests  # every answer parsed once
    assert kept_parses == kept_requests + pages  # the kept pages parsed again to build
    client.close()


def test_a_sync_sure_to_build_builds_as_it_lists(
    c: Collector, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first sync, a due rebuild and `sync_rebuild_after_s` 0 build whatever they list,
    so they parse each page once; a re-sync whose digest decides keeps the pages."""
    chosen: list[bool] = []
    real = sync.list_cluster

    def spy(client: LeafClient, registry: KindRegistry, build_as_listed: bool = False) -> Any:
        chosen.append(build_as_listed)
        return real(client, registry, build_as_listed)

    monkeypatch.setattr(sync, "list_cluster", spy)
    assert c.sync_objects(C).unchanged
    r.hset(keys.sync(C), "snapshot_at", str(time.time() - c.settings.sync_rebuild_after_s - 1))
    assert not c.sync_objects(C).unchanged
    r.hdel(keys.sync(C), "snapshot")
    assert not c.sync_objects(C).unchanged
    c.settings = dataclasses.replace(c.settings, sync_rebuild_after_s=0.0)
    assert not c.sync_objects(C).unchanged
    assert chosen == [False, True, True, True]
    assert store.rebuild_due(r, "never-synced", 3600.0)
