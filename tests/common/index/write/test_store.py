"""common.index.write.store on a real redis-server: diffed snapshot writes (rows, status indexes, counts,
generation, sync status), no row writes on an unchanged re-sync, the lock fence, atomicity as a
concurrent reader sees it, and deleting a cluster."""

from __future__ import annotations

import threading

import pytest
import redis

from common import redis_client
from common.errors import LockBusy
from common.index import keys, rows, syncstatus
from common.index.lease import Fence
from common.index.write import store
from common.kinds.registry import builtin_registry
from tests.support import topology

TOPOLOGIES = ("standalone", "cluster")

REG = builtin_registry()


def member(ns: str, name: str, ready: str = "True", kind: str = "Kustomization") -> str:
    k = REG.get(kind)
    assert k is not None
    obj = {
        "metadata": {"namespace": ns, "name": name},
        "status": {"conditions": [{"type": "Ready", "status": ready, "message": f"{name} m"}]},
    }
    return rows.encode(rows.build_row("c1", k, k.api_version(), obj))


def snapshot(n: int, unhealthy: int = 0) -> list[str]:
    return [member(f"ns-{i:03d}", "app", "False" if i < unhealthy else "True") for i in range(n)]


def write_calls(r: redis.Redis) -> int:
    stats = topology.commandstats(r)
    return sum(
        n
        for k, n in stats.items()
        if k in ("zadd", "zrem", "hdel", "incr", "incrby", "hincrby", "del")
    )


def test_first_write_builds_rows_indexes_counts(r: redis.Redis) -> None:
    stats = store.replace_rows(r, "c1", snapshot(10, unhealthy=2), {"state": "ok"})
    assert (stats.added, stats.removed, stats.total) == (10, 0, 10)
    assert r.zcard(keys.rows("c1")) == 10
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 2
    assert r.hgetall(keys.counts("c1")) == {
        keys.counts_field("Kustomization", "healthy"): "8",
        keys.counts_field("Kustomization", "unhealthy"): "2",
    }
    assert r.get(keys.generation("c1")) == "1"
    sync = syncstatus.read_all(r, ["c1"])["c1"]
    assert (sync.state, sync.objects, sync.kinds) == ("ok", 10, {"Kustomization": 10})


def test_unchanged_resync_writes_no_rows(r: redis.Redis) -> None:
    store.replace_rows(r, "c1", snapshot(50, unhealthy=3))
    topology.reset_stats(r)
    stats = store.replace_rows(r, "c1", snapshot(50, unhealthy=3), {"state": "ok"})
    assert not stats.changed
    assert write_calls(r) == 0  # no ZADD/ZREM/HDEL/INCR: only the sync status HSET
    assert r.get(keys.generation("c1")) == "1"


def test_status_change_and_deletion_are_diffed(r: redis.Redis) -> None:
    store.replace_rows(r, "c1", snapshot(5))
    new = snapshot(4)  # ns-004 deleted on the leaf
    new[0] = member("ns-000", "app", "False")  # ns-000 turned unhealthy
    topology.reset_stats(r)
    stats = store.replace_rows(r, "c1", new)
    assert (stats.added, stats.removed) == (1, 2)
    stored = sorted(rows.without_recent(m) for m in r.zrange(keys.rows("c1"), 0, -1))
    assert stored == sorted(new)  # as listed, plus the writer's record of recent transitions
    unhealthy = r.zrange(keys.by_status("c1", "unhealthy"), 0, -1)
    assert [rows.without_recent(m) for m in unhealthy] == [new[0]]
    assert r.hget(keys.counts("c1"), keys.counts_field("Kustomization", "healthy")) == "3"
    # ZREM rows, ZADD rows, ZADD index, HDEL the deleted namespace's counts, INCR gen and the
    # status generation (statuses moved); in the
    # time index (these rows have no transition time: windows by identity), ZREM from the two
    # old rows' windows, ZADD to the new row's, HINCRBY the three windows' versions, and HDEL
    # + DEL the window only the deleted row was in; on Redis Cluster, INCR the fleet's
    # generation after the transaction
    fleet = 1 if redis_client.is_cluster(r) else 0
    assert write_calls(r) == 1 + 1 + 1 + 1 + 2 + (2 + 1 + 3 + 2) + fleet


def test_empty_snapshot_removes_everything(r: redis.Redis) -> None:
    store.replace_rows(r, "c1", snapshot(3, unhealthy=1))
    store.replace_rows(r, "c1", [])
    assert r.zcard(keys.rows("c1")) == 0
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 0
    assert r.hlen(keys.counts("c1")) == 0


def test_lost_lock_writes_nothing(r: redis.Redis) -> None:
    r.set(keys.lock("c1"), "someone-else")
    with pytest.raises(LockBusy):
        store.replace_rows(r, "c1", snapshot(3), fence=Fence(keys.lock("c1"), "mine"))
    assert r.exists(keys.rows("c1"), keys.counts("c1"), keys.generation("c1")) == 0


def test_reader_sees_old_or_new_snapshot_never_a_mix(redis_url: str) -> None:
    writer = topology.client(redis_url, decode_responses=True)
    a = snapshot(300, unhealthy=10)
    b = [member(f"ns-{i:03d}", "other", "False" if i % 7 else "True") for i in range(150, 450)]
    store.replace_rows(writer, "c1", a)
    seen: list[int] = []
    bad: list[int] = []
    stop = threading.Event()

    def read() -> None:
        reader = topology.client(redis_url, decode_responses=True)
        want_a, want_b = set(a), set(b)
        while not stop.is_set():
            got = {rows.without_recent(m) for m in reader.zrange(keys.rows("c1"), 0, -1)}
            seen.append(1)
            if got not in (want_a, want_b):
                bad.append(len(got))
        reader.close()

    t = threading.Thread(target=read)
    t.start()
    for i in range(20):
        store.replace_rows(writer, "c1", b if i % 2 == 0 else a)
    stop.set()
    t.join()
    assert seen and not bad


def test_delete_cluster_removes_all_its_keys(r: redis.Redis) -> None:
    store.replace_rows(r, "c1", snapshot(3, unhealthy=1))
    store.replace_rows(r, "c2", snapshot(2))
    r.set(keys.lock("c1"), "t")
    r.hset(keys.rbac("c1"), "g:x", "{}")
    windows = [keys.timeline_window("c1", w) for w in r.hkeys(keys.timeline("c1"))]
    assert windows and r.exists(*windows) == len(windows)  # the time index's, named nowhere else
    store.delete_cluster(r, "c1")
    assert r.exists(*keys.cluster_keys("c1"), keys.lock("c1"), *windows) == 0
    assert r.zcard(keys.rows("c2")) == 2


def test_status_marks(r: redis.Redis) -> None:
    store.mark_pending(r, "c1")
    assert syncstatus.read_all(r, ["c1"])["c1"].state == "pending"
    store.mark_attempt(r, "c1", now=100.0)
    store.mark_pending(r, "c1")  # does not overwrite a real state
    s = syncstatus.read_all(r, ["c1"])["c1"]
    assert (s.state, s.last_attempt) == ("syncing", 100.0)
    store.mark_error(r, "c1", "cluster c1: HTTP 503\n  boom", 1.5, 3)
    s = syncstatus.read_all(r, ["c1"])["c1"]
    assert (s.state, s.last_error, s.requests) == ("error", "cluster c1: HTTP 503 boom", 3)


def test_a_snapshot_listed_before_watch_events_does_not_undo_them(r: redis.Redis) -> None:
    from common.index.write.store_events import Change, apply_changes

    store.replace_rows(r, "c1", snapshot(5))
    since = store.generation(r, "c1")  # the full sync starts listing here...
    stale_snapshot = snapshot(5)
    newer = member("ns-002", "app", ready="False")
    apply_changes(r, "c1", [Change.of(newer)])  # ...while the watcher applies a newer event
    stats = store.replace_rows(r, "c1", stale_snapshot, {"state": "ok"}, since_generation=since)
    assert stats.superseded and not stats.changed
    assert newer in {rows.without_recent(m) for m in r.zrange(keys.rows("c1"), 0, -1)}
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 1
    assert syncstatus.read_all(r, ["c1"])["c1"].state == "ok"
    # With nothing written since it started listing, the full sync repairs as before.
    stats = store.replace_rows(r, "c1", stale_snapshot, since_generation=store.generation(r, "c1"))
    assert not stats.superseded and stats.added == 1 and stats.removed == 1
