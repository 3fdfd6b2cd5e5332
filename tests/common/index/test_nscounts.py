"""common.index.nscounts: the per-namespace counts the writer keeps beside the rows always equal
the rows counted per namespace, through full syncs and watch batches, and are never read
before a full sync made them complete."""

from __future__ import annotations

import random

import pytest
import redis

from common.index import keys, nscounts, rows
from common.index.write import store, store_events
from common.redis_client import text
from tests.support import rowfactory, topology

C = "nsc"
KINDS = ("Kustomization", "HelmRelease", "GitRepository", "MyWidget")  # MyWidget: a kinds-file kind
STATUSES = ("healthy", "healthy", "unhealthy", "progressing", "unknown")


def member(ns: str, kind: str, name: str, status: str, suspended: bool = False) -> str:
    return rows.encode(rowfactory.row(C, ns, kind, name, status, suspended=suspended))


def stored(r: redis.Redis) -> dict[str, nscounts.Counts]:
    out = {}
    for b in range(nscounts.BUCKETS):
        for ns, v in r.hgetall(keys.nscounts(C, b)).items():
            assert nscounts.bucket(text(ns)) == b, "every namespace in its own bucket"
            out[text(ns)] = nscounts.decode(v)
    return out


def oracle(r: redis.Redis) -> dict[str, nscounts.Counts]:
    return nscounts.of_members(text(m) for m in r.zrange(keys.rows(C), 0, -1))


def random_member(rng: random.Random, ns: str, name: str) -> str:
    return member(ns, rng.choice(KINDS), name, rng.choice(STATUSES), rng.random() < 0.1)


def test_values_round_trip() -> None:
    counts = {
        ("Kustomization", "h"): 1,
        ("HelmRelease", "u"): 12,
        ("HelmRelease", "U"): 2,
        ("MyWidget", "p"): 3,
        ("GitRepository", "k"): 1,
    }
    value = nscounts.encode(counts)
    assert nscounts.decode(value) == counts
    assert value == "GkHU2Hu12Kh(MyWidget)p3"  # a letter per built-in kind, counts of 1 bare
    assert nscounts.encode({("Kustomization", "h"): 0}) == ""


@pytest.mark.parametrize("seed", range(4))
def test_watch_batches_and_full_syncs_keep_them_equal_to_the_rows(
    r: redis.Redis, seed: int
) -> None:
    rng = random.Random(seed)
    namespaces = ["", *(f"ns-{i}" for i in range(30))]
    world = {}
    for i in range(150):
        ns = rng.choice(namespaces)
        world[(ns, f"o{i}")] = random_member(rng, ns, f"o{i}")
    store.replace_rows(r, C, world.values())
    assert stored(r) == oracle(r) != {}
    for step in range(15):
        batch = []
        for _ in range(rng.randint(1, 8)):
            key = (
                rng.choice(list(world))
                if rng.random() < 0.7
                else (rng.choice(namespaces), f"n{step}")
            )
            if rng.random() < 0.3:
                old = world.pop(key, None)
                if old is not None:
                    batch.append(store_events.Change(rows.identity(old), None))
            else:
                world[key] = random_member(rng, key[0], key[1])
                batch.append(store_events.Change.of(world[key]))
        store_events.apply_changes(r, C, batch)
        assert stored(r) == oracle(r), step
    store.replace_rows(r, C, list(world.values())[::2])
    assert stored(r) == oracle(r)


def test_deltas_before_the_first_full_sync_leave_them_unwritten(r: redis.Redis) -> None:
    store_events.apply_changes(
        r, C, [store_events.Change.of(member("a", "Kustomization", "x", "healthy"))]
    )
    assert stored(r) == {} and r.hget(keys.sync(C), nscounts.READY) is None
    store.replace_rows(r, C, [member("a", "Kustomization", "x", "healthy")])
    assert r.hget(keys.sync(C), nscounts.READY) == nscounts.READY_VALUE
    assert stored(r) == {"a": {("Kustomization", "h"): 1}}
    store_events.apply_changes(
        r, C, [store_events.Change.of(member("b", "HelmRelease", "y", "unhealthy"))]
    )
    assert (
        stored(r) == oracle(r) == {"a": {("Kustomization", "h"): 1}, "b": {("HelmRelease", "u"): 1}}
    )


def test_a_full_sync_repairs_drift_and_an_unchanged_resync_writes_nothing(r: redis.Redis) -> None:
    members = [member(f"ns-{i}", "Kustomization", "app", "healthy") for i in range(20)]
    store.replace_rows(r, C, members)
    good = stored(r)
    r.hdel(nscounts.key(C, "ns-3"), "ns-3")
    r.hset(nscounts.key(C, "ns-4"), "ns-4", "Ku9")
    r.hset(nscounts.key(C, "gone"), "gone", "Kh")
    assert stored(r) != good
    store.replace_rows(r, C, members)
    assert stored(r) == good
    gen = r.get(keys.generation(C))
    store.replace_rows(r, C, members)
    assert r.get(keys.generation(C)) == gen


def test_a_status_change_reads_its_namespace_in_the_first_round_trip(r: redis.Redis) -> None:
    store.replace_rows(r, C, [member("a", "Kustomization", "x", "healthy")])
    topology.reset_stats(r)
    store_events.apply_changes(
        r, C, [store_events.Change.of(member("a", "Kustomization", "x", "progressing"))]
    )
    calls = topology.commandstats(r)
    # the sync status' readiness flags and the namespace's counts, read together; the name
    # index is not read (the row keeps its name and entry)
    assert calls["hmget"] == 2
    assert stored(r) == {"a": {("Kustomization", "p"): 1}}
