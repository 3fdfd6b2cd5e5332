"""common.index.write.store_events against a real Redis: add, update (status index moves), delete, no-op
batches write nothing, counts fields vanish at zero, the generation moves only on a change, and a
lost lease (fence) writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from common.errors import LockBusy
from common.index import keys, rows
from common.index.lease import Fence, Lease
from common.index.write.store_events import Beat, Change, apply_changes, heartbeats, kinds_changes
from tests.support import rowfactory, topology

C = "c1"


def member(ns: str, kind: str, name: str, status: str = "healthy") -> str:
    return rowfactory.member(C, ns, kind, name, status)


@pytest.fixture
def rb(redis_url: str) -> redis.Redis:
    return topology.client(redis_url)


def test_add_update_delete(rb: redis.Redis) -> None:
    a, b = member("ns", "Kustomization", "a"), member("ns", "Gateway", "b", "unhealthy")
    stats = apply_changes(rb, C, [Change.of(a), Change.of(b)])
    assert (stats.added, stats.total) == (2, 2)
    assert rb.zrange(keys.by_status(C, "unhealthy"), 0, -1) == [b.encode()]
    b2 = member("ns", "Gateway", "b", "healthy")
    stats = apply_changes(rb, C, [Change.of(b2)])
    assert stats.updated == 1 and rb.zcard(keys.by_status(C, "unhealthy")) == 0
    stored = {rows.without_recent(m.decode()) for m in rb.zrange(keys.rows(C), 0, -1)}
    assert stored == {a, b2}  # as built, plus the writer's record of recent transitions
    assert rb.hgetall(keys.counts(C)) == {
        b"Kustomization\x00healthy": b"1",
        b"Gateway\x00healthy": b"1",
    }
    apply_changes(rb, C, [Change(rows.identity(a), None)])
    assert rb.hgetall(keys.counts(C)) == {b"Gateway\x00healthy": b"1"}  # no zero fields
    assert rb.hget(keys.sync(C), "objects") == b"1"
    assert rb.hget(keys.sync(C), "kinds") == b'{"Gateway":1}'


def test_noop_writes_nothing_and_generation_moves_on_change(rb: redis.Redis) -> None:
    a = member("ns", "Kustomization", "a")
    apply_changes(rb, C, [Change.of(a)])
    gen = rb.get(keys.generation(C))
    stats = apply_changes(rb, C, [Change.of(a), Change(rows.sort_key("x", "Gateway", "y"), None)])
    assert not stats.changed and rb.get(keys.generation(C)) == gen
    apply_changes(rb, C, [Change.of(member("ns", "Kustomization", "a", "progressing"))])
    assert int(rb.get(keys.generation(C)) or 0) == int(gen or 0) + 1


def test_kind_changes_replace_only_that_kind(rb: redis.Redis) -> None:
    keep = member("ns", "Gateway", "g")
    old = [member("ns", "Kustomization", n) for n in ("a", "b")]
    apply_changes(rb, C, [Change.of(m) for m in [keep, *old]])
    new = [old[0], member("ns2", "Kustomization", "c")]
    changes = kinds_changes(rb, C, {"Kustomization": new})
    assert len(changes) == 2  # b deleted, c added; a unchanged
    apply_changes(rb, C, changes)
    stored = {rows.without_recent(m.decode()) for m in rb.zrange(keys.rows(C), 0, -1)}
    assert stored == {keep, *new}  # as built, plus the writer's record of recent transitions


def test_lost_lease_writes_nothing(rb: redis.Redis) -> None:
    rb.set(keys.lease(C), "other:1")
    with pytest.raises(LockBusy):
        apply_changes(
            rb, C, [Change.of(member("ns", "Gateway", "b"))], Fence(keys.lease(C), "me:1")
        )
    assert rb.zcard(keys.rows(C)) == 0 and not rb.exists(keys.generation(C))


def test_heartbeats_are_fenced_per_cluster_in_one_round_trip(rb: redis.Redis) -> None:
    """Clusters whose lease is ours get `last_success` / `rbac_synced_at`; one whose lease moved
    gets nothing and is reported (False); an unhealthy half is not refreshed."""
    for c in ("a", "b", "c"):
        rb.delete(keys.sync(c))
    for c, holder in (("a", "me:1"), ("b", "other:1"), ("c", "me:1")):
        rb.set(keys.lease(c), holder)
        rb.set(keys.owner(keys.lease(c)), holder)
    beats = [
        Beat("a", Fence(keys.lease("a"), "me:1"), objects=True, rbac=True),
        Beat("b", Fence(keys.lease("b"), "me:1"), objects=True, rbac=True),
        Beat("c", Fence(keys.lease("c"), "me:1"), objects=True, rbac=False),
    ]
    topology.reset_stats(rb)
    assert heartbeats(rb, beats, now=100.0) == [True, False, True]
    assert topology.commandstats(rb)["eval"] == 3
    a, b, c = (rb.hgetall(keys.sync(x)) for x in ("a", "b", "c"))
    assert a[b"last_success"] == b"100.0" and a[b"rbac_synced_at"] == b"100.0"
    assert a[b"state"] == b"ok"
    assert b == {}
    assert c[b"last_success"] == b"100.0" and b"rbac_synced_at" not in c
    assert a[b"watched_at"] == a[b"rbac_watched_at"] == b"100.0"  # the collector's schedule
    assert c[b"watched_at"] == b"100.0" and b"rbac_watched_at" not in c


@pytest.mark.standalone_only
def test_renewals_do_not_abort_a_write_but_a_new_holder_does(rb: redis.Redis) -> None:
    """Writers WATCH the lease's owner key, which renewals leave alone: a renewal landing
    between a writer's reads and its EXEC no longer aborts the write; a lease taken over by
    another holder in between does (and the writer then finds it is not the holder)."""
    me = Lease(rb, keys.lease(C), "me:1", 15_000)
    rb.delete(keys.lease(C), keys.owner(keys.lease(C)))
    assert me.acquire()
    renewed: list[bool] = []
    original = redis.client.Pipeline.execute

    def renew_then_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.transaction and self.watching:
            renewed.append(me.renew())  # another connection, between the reads and every EXEC
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(redis.client.Pipeline, "execute", renew_then_execute)
        stats = apply_changes(rb, C, [Change.of(member("ns", "Gateway", "r"))], me.fence)
    assert renewed == [True] and stats.added == 1  # written at the first EXEC

    other = Lease(rb, keys.lease(C), "other:1", 15_000)
    taken: list[bool] = []

    def take_over_then_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.transaction and self.watching and not taken:
            me.release()
            taken.append(other.acquire())
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(redis.client.Pipeline, "execute", take_over_then_execute)
        with pytest.raises(LockBusy):
            apply_changes(rb, C, [Change.of(member("ns", "Gateway", "s"))], me.fence)
    assert taken == [True]
    assert rows_named(rb) == ["r"]


def rows_named(rb: redis.Redis) -> list[str]:
    return sorted(rows.split_identity(rows.identity(m))[2] for m in rb.zrange(keys.rows(C), 0, -1))


def test_a_row_rewritten_in_place_reads_and_writes_no_counts(rb: redis.Redis) -> None:
    """Count guard: most watch events change a row's message (or revision) and keep its status,
    so every count, kind and total stays: such a write reads neither the counts nor the
    history's kinds and writes no totals; a write that moves a count reads them as before."""
    rows_in = [member(f"ns-{i}", "Kustomization", f"app-{i}") for i in range(20)]
    apply_changes(rb, C, [Change.of(m) for m in rows_in])
    counts, sync = rb.hgetall(keys.counts(C)), rb.hgetall(keys.sync(C))
    gen, status_gen = rb.get(keys.generation(C)), rb.get(keys.status_generation(C))
    row = rowfactory.row(C, "ns-3", "Kustomization", "app-3")
    row["message"] = "Reconciliation finished in 2s, next run in 10m0s"
    topology.reset_stats(rb)
    stats = apply_changes(rb, C, [Change.of(rows.encode(row))])
    cmds = topology.commandstats(rb)
    assert stats.updated == 1 and stats.total == 20
    assert "hgetall" not in cmds and "hkeys" not in cmds and "hset" not in cmds
    assert rb.hgetall(keys.counts(C)) == counts and rb.hgetall(keys.sync(C)) == sync
    assert int(rb.get(keys.generation(C)) or 0) == int(gen or 0) + 1
    assert rb.get(keys.status_generation(C)) == status_gen  # nothing a status reader keys on
    stored = [m.decode() for m in rb.zrange(keys.rows(C), 0, -1)]
    assert rows.encode(row) in {rows.without_recent(m) for m in stored}

    topology.reset_stats(rb)
    stats = apply_changes(rb, C, [Change.of(member("ns-3", "Kustomization", "app-3", "unhealthy"))])
    cmds = topology.commandstats(rb)
    assert cmds["hgetall"] == 1 and cmds["hkeys"] == 1  # the counts and kinds, once known
    assert rb.hgetall(keys.counts(C)) == {
        b"Kustomization\x00healthy": b"19",
        b"Kustomization\x00unhealthy": b"1",
    }
    assert rb.hget(keys.sync(C), "objects") == b"20"
    apply_changes(rb, C, [Change.of(member("ns-99", "Gateway", "new"))])
    assert rb.hget(keys.sync(C), "kinds") == b'{"Gateway":1,"Kustomization":20}'
