"""Transition history (common.index.history) as the one writer records it, on a real redis-server:
both write paths (full sync, watch events), exactly once (retries, a sync repeating the watcher,
two writers at once, a missed event repaired by a sync), no `created` flood from a first sync,
retention by count and by age, and deleted objects' history outliving the row."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from common.index import history, keys, rows
from common.index.write import store, store_events
from common.kinds.registry import builtin_registry

TOPOLOGIES = ("standalone", "cluster")
REG = builtin_registry()
IDENTITY = rows.sort_key("team-a", "Kustomization", "app")


def member(
    name: str = "app",
    ready: str = "True",
    reason: str = "ReconciliationSucceeded",
    revision: str = "main@sha1:1111111111",
    ltt: str | None = None,
    ns: str = "team-a",
    suspend: bool = False,
) -> str:
    k = REG.get("Kustomization")
    assert k is not None
    cond: dict[str, str] = {"type": "Ready", "status": ready, "reason": reason, "message": "m"}
    if ltt:
        cond["lastTransitionTime"] = ltt
    obj = {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"suspend": suspend},
        "status": {"conditions": [cond], "lastAppliedRevision": revision},
    }
    return rows.encode(rows.build_row("c1", k, k.api_version(), obj))


def entries(r: redis.Redis, identity: str = IDENTITY) -> list[history.Entry]:
    return history.read(r, "c1", identity)


def bootstrap(r: redis.Redis) -> None:
    store.replace_rows(r, "c1", [member(), member("other")])


def events(r: redis.Redis, *members: str | None, retention: history.Retention = history.DEFAULT):
    changes = [
        store_events.Change(IDENTITY, None) if m is None else store_events.Change.of(m)
        for m in members
    ]
    return store_events.apply_changes(r, "c1", changes, retention=retention)


def test_a_first_sync_records_nothing_but_sets_the_baseline(r: redis.Redis) -> None:
    bootstrap(r)
    assert not r.keys(keys.history_pattern("c1"))
    assert r.hkeys(keys.history_kinds("c1")) == ["Kustomization"]


def test_a_watchers_first_list_of_a_kind_records_no_created(r: redis.Redis) -> None:
    events(r, member())  # an empty cluster: the kind's first rows were found, not created
    assert entries(r) == []
    store_events.apply_changes(r, "c1", [store_events.Change.of(member("new"))])
    got = entries(r, rows.sort_key("team-a", "Kustomization", "new"))
    assert [e["source"] for e in got] == ["created"]


def test_status_change_by_the_watcher_is_recorded_once_with_the_leafs_time(
    r: redis.Redis,
) -> None:
    bootstrap(r)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    failed = member(ready="False", reason="BuildFailed", ltt=at)
    events(r, failed)
    events(r, failed)  # a retried write (or a resync event): the stored row already says so
    store.replace_rows(r, "c1", [failed, member("other")])  # a full sync repeating it
    got = entries(r)
    assert len(got) == 1
    assert got[0]["source"] == "watch"
    assert (got[0]["status"], got[0]["reason"]) == ("unhealthy", "BuildFailed")
    assert got[0]["at"] == at
    assert got[0]["revision"] == "main@sha1:1111111111"


def test_a_change_without_a_new_transition_time_is_dated_when_observed(r: redis.Redis) -> None:
    bootstrap(r)
    before = int(time.time())
    events(r, member(revision="main@sha1:2222222222"))  # a new revision, Ready unchanged
    (e,) = entries(r)
    assert e["revision"] == "main@sha1:2222222222"
    at = time.mktime(time.strptime(e["at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before <= at <= time.time() + 1


def test_message_only_changes_are_not_transitions(r: redis.Redis) -> None:
    bootstrap(r)
    k = REG.get("Kustomization")
    assert k is not None
    row = rows.decode("c1", member())
    row["message"] = "something else"
    events(r, rows.encode(row))
    assert entries(r) == []


def test_suspension_is_a_transition(r: redis.Redis) -> None:
    bootstrap(r)
    events(r, member(suspend=True))
    (e,) = entries(r)
    assert (e["suspended"], e["status"]) == (True, "healthy")


def test_a_missed_watch_event_repaired_by_a_sync_says_sync(r: redis.Redis) -> None:
    bootstrap(r)
    events(r, member(ready="False", reason="BuildFailed"))
    # The watcher misses the recovery; the next full sync finds it.
    store.replace_rows(r, "c1", [member(), member("other")])
    got = entries(r)
    assert [(e["source"], e["status"]) for e in got] == [
        ("sync", "healthy"),
        ("watch", "unhealthy"),
    ]
    assert got[0]["position"] > got[1]["position"]


def test_created_and_deleted_and_history_outlives_the_row(r: redis.Redis) -> None:
    bootstrap(r)
    events(r, None)
    events(r, member(ready="False"))
    got = entries(r)
    assert [e["source"] for e in got] == ["created", "deleted"]
    events(r, None)
    assert r.zcard(keys.rows("c1")) == 1
    assert [e["source"] for e in entries(r)] == ["deleted", "created", "deleted"]
    ttl_s = r.pttl(history.key("c1", IDENTITY)) / 1000
    assert 13.9 * 86400 < ttl_s <= 14 * 86400


def test_a_sync_records_deletions_and_creations(r: redis.Redis) -> None:
    bootstrap(r)
    store.replace_rows(r, "c1", [member("other"), member("third")])
    assert [e["source"] for e in entries(r)] == ["deleted"]
    third = rows.sort_key("team-a", "Kustomization", "third")
    assert [e["source"] for e in entries(r, third)] == ["created"]


def test_two_writers_at_once_record_each_transition_once(r: redis.Redis) -> None:
    bootstrap(r)
    states = [member(ready="False" if i % 2 == 0 else "True") for i in range(12)]
    errors: list[BaseException] = []
    for state in states:
        gate = threading.Barrier(2)

        def write(m: str = state, gate: threading.Barrier = gate) -> None:
            try:
                gate.wait(5)
                events(r, m)  # a client shares its pool between threads
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=write) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert not errors
    got = entries(r)
    assert len(got) == len(states)
    positions = [e["position"] for e in got]
    assert positions == sorted(set(positions), reverse=True)


def test_retention_by_count(r: redis.Redis) -> None:
    bootstrap(r)
    keep = history.Retention(max_entries=3, days=14)
    for i in range(6):
        events(r, member(ready="False" if i % 2 == 0 else "True"), retention=keep)
    got = entries(r)
    assert len(got) == 3
    assert [e["status"] for e in got] == ["healthy", "unhealthy", "healthy"]


def test_retention_by_age(r: redis.Redis) -> None:
    bootstrap(r)
    now = time.time()
    then, later = now - 10 * 86400, now + 5 * 86400  # the window is 14 days
    old = history.Transition(IDENTITY, int(then), "watch", "u", "", "", "")
    new = history.Transition(IDENTITY, int(later), "watch", "h", "", "", "")
    tx = r.pipeline(transaction=True)
    history.queue_write(tx, "c1", [old], {}, 1, history.DEFAULT, now=then)
    tx.execute()
    stored = r.get(history.key("c1", IDENTITY))
    assert stored is not None
    assert 3.9 * 86400 < r.pttl(history.key("c1", IDENTITY)) / 1000 <= 4 * 86400
    assert len(history.read(r, "c1", IDENTITY, now=now)) == 1
    assert history.read(r, "c1", IDENTITY, now=later) == []  # past the window: not served
    tx = r.pipeline(transaction=True)
    history.queue_write(tx, "c1", [new], {IDENTITY: stored}, 2, history.DEFAULT, now=later)
    tx.execute()
    raw = r.get(history.key("c1", IDENTITY))
    assert len(history.split(raw)) == 1  # the old entry was dropped when written again
    assert [e["position"] for e in history.read(r, "c1", IDENTITY, now=later)] == [2]


def test_deleting_the_cluster_deletes_its_histories(r: redis.Redis) -> None:
    bootstrap(r)
    events(r, None)
    assert r.exists(history.key("c1", IDENTITY))
    store.delete_cluster(r, "c1")
    assert not r.keys(keys.history_pattern("c1"))
    assert not r.exists(keys.history_kinds("c1"))


@pytest.mark.parametrize("bad", ["", "x" * 4])
def test_split_tolerates_short_values(bad: str) -> None:
    assert history.split(bad) == []


def served(r: redis.Redis, identity: str = IDENTITY) -> rows.Row:
    prefix = identity.encode()
    found = r.zrangebylex(keys.rows("c1"), b"[" + prefix, b"[" + prefix + b"\xff")
    return rows.decode("c1", found[0])


def iso(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def test_failing_since_and_transitions_24h_follow_an_oracle(r: redis.Redis) -> None:
    """A random walk of statuses through both writers: `failingSince` is the time of the first
    transition of the current non-healthy run, `transitions24h` the transitions so far."""
    import random

    rng = random.Random(7)
    bootstrap(r)
    now = int(time.time())
    since: int | None = None
    status, count = "healthy", 0
    for step in range(40):
        new = rng.choice(["healthy", "unhealthy", "progressing", "unhealthy"])
        if new == status:
            continue
        at = now - 3600 + step * 60
        cond = {"healthy": "True", "unhealthy": "False", "progressing": "Unknown"}[new]
        m = member(ready=cond, ltt=iso(at))
        if step % 3:
            events(r, m)
        else:
            store.replace_rows(r, "c1", [m, member("other")])
        count += 1
        if new == "healthy":
            since = None
        elif status == "healthy":
            since = at
        status = new
        row = served(r)
        assert row["status"] == status
        assert row["failingSince"] == (iso(since) if since is not None else None)
        assert row["transitions24h"] == count


def test_a_row_first_seen_failing_fails_since_its_transition_time(r: redis.Redis) -> None:
    at = int(time.time()) - 7200
    store.replace_rows(r, "c1", [member(ready="False", ltt=iso(at)), member("other")])
    row = served(r)
    assert (row["failingSince"], row["transitions24h"]) == (iso(at), 0)
    events(r, member(ready="Unknown", ltt=iso(at + 60)))  # still failing: the run goes on
    row = served(r)
    assert (row["status"], row["failingSince"], row["transitions24h"]) == (
        "progressing",
        iso(at),
        1,
    )
    assert served(r, rows.sort_key("team-a", "Kustomization", "other"))["failingSince"] is None


def test_transitions_older_than_a_day_slide_out_without_a_write() -> None:
    now = time.time()
    recent = f"{int(now - 90000)},{int(now - 10)},{int(now - 86000)},{int(now - 90000)}"
    assert rows.transitions_24h(recent, now) == 2
    assert rows.transitions_24h(recent, now + 1000) == 1
    assert rows.transitions_24h("", now) == 0


def test_transitions_24h_is_bounded_by_the_history_kept(r: redis.Redis) -> None:
    bootstrap(r)
    keep = history.Retention(max_entries=3, days=14)
    for i in range(5):
        events(r, member(ready="False" if i % 2 == 0 else "True"), retention=keep)
    assert served(r)["transitions24h"] == 3


def test_the_flapping_index_holds_the_current_member_of_rows_flapping_when_written(
    r: redis.Redis,
) -> None:
    bootstrap(r)
    keep = history.Retention(max_entries=50, days=14, flapping=3)
    for i in range(5):
        events(r, member(ready="False" if i % 2 == 0 else "True"), retention=keep)
        index = r.zrange(keys.flapping("c1"), 0, -1)
        stored = r.zrange(keys.rows("c1"), 0, -1)
        current = [m for m in stored if rows.identity(m) == IDENTITY]
        # from the third transition on: the row's current member, and no older one
        assert index == (current if i >= 2 else [])
    store.replace_rows(r, "c1", [member("other")])  # deleted: out of the index
    assert r.zcard(keys.flapping("c1")) == 0
