"""common.index.codes: one table of built-in kind codes for every stored format, and what was
stored with the time index's former codes still read right on a real Redis: a time index and
history keys written in the legacy spelling, walked (every row once, in time order, also by the
status-index plan), moved by watch events (one entry a row), rebuilt by the next full sync."""

from __future__ import annotations

import calendar
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common.index import codes, edges, history, keys, nscounts, rows, timeline
from common.index.read.reader import Filters
from common.index.read.timesort import TimeReader
from common.index.write import store, store_events
from common.kinds.registry import BUILTIN_KINDS
from common.kinds.relations import Ref
from common.redis_client import text
from tests.support import topology
from tests.support.index_fleet import FakeAccess
from tests.support.rowfactory import row

TOPOLOGIES = ("standalone", "cluster")
C = "c1"
T0 = calendar.timegm((2026, 11, 1, 0, 0, 0))
# Alert, Receiver and VirtualService were `~a`, `~c`, `~d`: codes of other kinds in the table.
KINDS = ("Kustomization", "Alert", "Receiver", "VirtualService", "PeerAuthentication", "Widget")


def test_every_builtin_kind_has_one_code_and_kinds_file_kinds_are_stored_as_they_are() -> None:
    assert {k.key for k in BUILTIN_KINDS} | {"Service"} == set(codes.KIND_CODES)
    assert len(set(codes.KIND_CODES.values())) == len(codes.KIND_CODES)
    assert all(len(c) == 1 for c in codes.KIND_CODES.values())
    assert set(codes.LEGACY_TIME_CODES) <= set(codes.KIND_CODES)
    assert edges.kind_of(edges.kind_code("MyKind")) == "MyKind"
    assert codes.unmarked(codes.marked("HelmRelease", "^"), "^") == "HelmRelease"
    assert nscounts.decode(nscounts.encode({("MyKind", "h"): 2})) == {("MyKind", "h"): 2}


def test_edges_and_counts_store_what_they_stored_before() -> None:
    refs = [
        Ref("source", "GitRepository", "apps", "repo"),
        Ref("gatewayClass", "GatewayClass", "", "istio"),
    ]
    field = edges.encode("apps", refs)
    assert field.split(edges.RS) == ["s~G\x1f=\x1frepo", "C~c\x1f\x1fistio"]
    counts = {("Kustomization", "h"): 1, ("GitRepository", "h"): 1, ("HelmRelease", "u"): 2}
    assert nscounts.encode(counts) == "GhHu2Kh"  # the module docstring's example


def test_the_legacy_spelling_is_the_former_time_codes() -> None:
    assert codes.LEGACY_TIME_SPELLING["Kustomization"] == "~0"
    assert codes.LEGACY_TIME_SPELLING["Alert"] == "~a"
    assert codes.LEGACY_TIME_SPELLING["TLSPolicy"] == "~21"
    new = timeline.where(member(0))[1]
    assert "\x00^K\x00" in new
    assert timeline.legacy_where(member(0)) == (
        timeline.where(member(0))[0],
        new.replace("^K", "~0"),
    )
    assert timeline.legacy_where(member(5)) is None  # Widget: a kinds-file kind, as it is


# -- a time index written before ---------------------------------------------------------------


def member(i: int, status: str = "", at: int | None = None) -> str:
    status = status or ("unhealthy" if i % 4 == 1 else "healthy")
    r = row(C, f"team-{i % 3}", KINDS[i % len(KINDS)], f"app-{i}", status)
    when = T0 + (i * 5077) % (20 * 86400) if at is None else at
    r["lastTransitionTime"] = (
        None if i % 5 == 2 else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    )
    return rows.encode(r)


MEMBERS = [member(i) for i in range(48)]
ADMIN = {C: FakeAccess(frozenset(KINDS))}
TEAM = {C: FakeAccess(namespaces={"team-1": frozenset(KINDS)})}
UNHEALTHY = Filters(statuses=("unhealthy",))
EVERY = Filters()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = topology.client(redis_url)
    store.replace_rows(client, C, MEMBERS)
    yield client
    client.close()


def to_legacy(r: redis.Redis) -> None:
    """Respell the cluster's time index as the code before common.index.codes wrote it: each
    row's entry in the legacy spelling, in the window that spelling puts it in, and `READY`
    as that code set it."""
    directory = keys.timeline(C)
    old: dict[str, float] = {}
    for w in r.hkeys(directory):
        window = keys.timeline_window(C, text(w))
        for entry, score in r.zrange(window, 0, -1, withscores=True):
            old[text(entry)] = score
        r.delete(window)
    r.delete(directory)
    for m in stored_members(r):
        suffix, _window, entry, _score = timeline.placement(m, 0, codes.LEGACY_TIME_SPELLING)
        r.zadd(keys.timeline_window(C, suffix), {entry: old[timeline.where(m)[1]]})
        r.hincrby(directory, suffix, 1)
    r.hset(keys.sync(C), timeline.READY, "1")
    r.incr(keys.generation(C))  # readers re-read the directory


def stored_members(r: redis.Redis) -> list[str]:
    return [text(m) for m in r.zrange(keys.rows(C), 0, -1)]


def entries(r: redis.Redis) -> list[bytes]:
    out = []
    for w in r.hkeys(keys.timeline(C)):
        out += [e.encode() for e in map(text, r.zrange(keys.timeline_window(C, text(w)), 0, -1))]
    return out


def walk(r: redis.Redis, access: Any, filters: Filters = EVERY, descending: bool = True) -> list:
    got, cursor, reader = [], None, TimeReader(r)
    while True:
        page = reader.page(access, filters, 5, descending, cursor)
        got += [text(m) for _c, m in page.members]
        if page.cursor is None:
            return got
        cursor = page.cursor


def times(members: list[str]) -> list[str]:
    return [rows.decode(C, m)["lastTransitionTime"] or "" for m in members]


@pytest.mark.parametrize(
    ("access", "filters"), [(ADMIN, EVERY), (TEAM, UNHEALTHY), (ADMIN, UNHEALTHY)]
)
def test_a_legacy_time_index_is_walked_as_before(
    r: redis.Redis, access: Any, filters: Filters
) -> None:
    before = walk(r, access, filters)
    to_legacy(r)
    assert all(b"\x00^" not in e for e in entries(r)) and any(
        b"\x00~a\x00" in e for e in entries(r)
    )
    after = walk(r, access, filters)
    assert Counter(after) == Counter(before) and len(set(after)) == len(after) and before
    assert times(after) == times(before)  # time order (ties may order otherwise)
    assert times(walk(r, access, filters, descending=False)) == times(after)[::-1]


def test_watch_events_on_a_legacy_index_leave_one_entry_a_row(r: redis.Redis) -> None:
    to_legacy(r)
    changed = [
        member(0, "unhealthy", at=T0 + 25 * 86400),  # timed, moves window
        member(7, "healthy"),  # untimed (i % 5 == 2), status changes
        member(12, "unhealthy"),  # untimed, status kept: its entry stays as stored
        member(3, "healthy", at=T0 + 26 * 86400),
    ]
    batch = [store_events.Change.of(m) for m in changed]
    gone = rows.identity(MEMBERS[8])
    batch.append(store_events.Change(gone, None))
    store_events.apply_changes(r, C, batch)
    identities = Counter(timeline.identity(e) for e in entries(r))
    assert set(identities.values()) == {1}
    assert set(identities) == {rows.identity(m).encode() for m in stored_members(r)}
    assert gone.encode() not in identities
    newest = walk(r, ADMIN)[:2]
    assert {rows.identity(m) for m in newest} == {
        rows.identity(changed[3]),
        rows.identity(changed[0]),
    }


def test_the_next_full_sync_rebuilds_a_legacy_index_whole(r: redis.Redis) -> None:
    before = walk(r, ADMIN)
    to_legacy(r)
    store.replace_rows(r, C, MEMBERS)
    assert r.hget(keys.sync(C), timeline.READY) in ("2", b"2")
    got = entries(r)
    assert sorted(got) == sorted(timeline.where(m)[1].encode() for m in stored_members(r))
    assert walk(r, ADMIN) == before
    store.replace_rows(r, C, MEMBERS)  # ready now: nothing rebuilt again
    assert sorted(entries(r)) == sorted(got)


# -- history keys written before ------------------------------------------------------------------


def test_a_history_under_its_legacy_key_is_read_with_the_new_one(r: redis.Redis) -> None:
    identity = rows.identity(MEMBERS[1])  # an Alert: `~a` before
    now = time.time()
    store_events.apply_changes(
        r, C, [store_events.Change.of(member(1, "healthy", at=int(now) - 60))]
    )
    first = history.read(r, C, identity)
    assert [e["status"] for e in first] == ["healthy"]
    old_key = history.legacy_key(C, identity)
    assert old_key is not None and old_key.endswith("\x00~a\x00app-1\x00")
    r.rename(history.key(C, identity), old_key)  # as the code before stored it
    assert history.read(r, C, identity) == first
    store_events.apply_changes(r, C, [store_events.Change.of(member(1, "unhealthy", at=int(now)))])
    got = history.read(r, C, identity)
    assert [e["status"] for e in got] == ["unhealthy", "healthy"]
    assert r.exists(history.key(C, identity)) and r.exists(old_key)
    one = history.Retention(max_entries=1)
    assert [e["status"] for e in history.read(r, C, identity, one)] == ["unhealthy"]
    assert history.legacy_key(C, rows.sort_key("a", "Widget", "w")) is None
