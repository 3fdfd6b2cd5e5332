"""Count guards behind the group profiles' numbers (docs/benchmarks.md), against a real Redis
with rows written by the store: a repeated page costs one round trip (the generations), a write
to one cluster makes the next page re-read that cluster's unhealthy index only, and a page of
unhealthy groups reads no rows. Pages are compared with an oracle grouped from the rows."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common.index import keys, rows, timeline
from common.index.read.groups import GroupCursor, GroupReader
from common.index.read.reader import Filters, Reader
from common.index.write import store, store_events
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, NAMESPACED, TEAM, members
from tests.common.index.read.fleets import groups_oracle as oracle
from tests.support import topology
from tests.support.index_fleet import KINDS
from tests.support.rowfactory import row


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url)


def walk(g: GroupReader, access: Any, by: str, f: Filters, limit: int) -> list[Any]:
    got, cursor = [], None
    while True:
        page = g.page(access, f, by, limit, cursor)
        for grp in page.groups:
            got.append((grp.order, grp.key, [(m.cluster, m.status) for m in grp.clusters]))
        cursor = page.cursor
        if cursor is None:
            return got


@pytest.mark.parametrize("by", ["object", "namespace"])
@pytest.mark.parametrize("who", ["admin", "team"])
@pytest.mark.parametrize(
    "f",
    [
        Filters(),
        Filters(statuses=("unhealthy",)),
        Filters(statuses=("healthy", "progressing")),
        Filters(kinds=(NAMESPACED[1],)),
        Filters(clusters=(CLUSTERS[1], CLUSTERS[2])),
    ],
)
def test_group_walks_match_the_oracle(fleet: redis.Redis, by: str, who: str, f: Filters) -> None:
    access = ADMIN if who == "admin" else TEAM
    want = oracle(fleet, access, by, f)
    assert want
    for limit in (1, 3, 50):
        groups = GroupReader(Reader(fleet, KINDS))
        assert walk(groups, access, by, f, limit) == want, limit


def test_a_repeated_page_is_one_round_trip(fleet: redis.Redis) -> None:
    groups = GroupReader(Reader(fleet, KINDS))
    for by in ("object", "namespace"):
        first = groups.page(ADMIN, Filters(), by, 5)
        assert first.round_trips > 1
        again = groups.page(ADMIN, Filters(), by, 5)
        assert again.round_trips == 1 and again.groups is first.groups


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_a_write_moves_one_clusters_unhealthy_part_and_reads_its_statuses(
    fleet: redis.Redis, by: str
) -> None:
    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(ADMIN, Filters(), by, 50)
    assert groups.index_reads >= len(CLUSTERS) and groups.lookups == len(CLUSTERS)
    reads = groups.index_reads
    for n, flip in enumerate((5, 7, 5)):  # a group's count moves up, and back
        store.replace_rows(fleet, CLUSTERS[3], members(CLUSTERS[3], flip=flip))
        page = groups.page(ADMIN, Filters(), by, 50)
        # No index: the written cluster's unhealthy part moved by its feed (its namespace
        # list too, or read again); and its statuses of the page's groups (those it holds
        # that were shown before are remembered by the other clusters' generations).
        assert groups.parts_followed == n + 1
        assert groups.index_reads - reads <= (n + 1 if by == "namespace" else 0)
        assert groups.lookups <= len(CLUSTERS) + 2 * (n + 1)
        want = oracle(fleet, ADMIN, by, Filters())[:50]
        got = [(g.order, g.key, [(m.cluster, m.status) for m in g.clusters]) for g in page.groups]
        assert got == want, flip


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_unhealthy_parts_moved_by_the_feeds_match_the_oracle(fleet: redis.Redis, by: str) -> None:
    """Random writes (a flip, a row gone, a new unhealthy row, a suspended one, several at once)
    on random clusters: each caller's pages, whose unhealthy parts move by the written
    clusters' feeds, equal a fresh reader's oracle after every write."""
    rnd = random.Random(38)
    callers = [
        (ADMIN, Filters()),
        (TEAM, Filters()),
        (ADMIN, Filters(name="app-1")),
        (ADMIN, Filters(namespaces=("team-01", "team-03"))),
        (TEAM, Filters(kinds=(NAMESPACED[1],))),
        (ADMIN, Filters(suspended=False)),
    ]
    held = {c: members(c) for c in CLUSTERS}
    groups = GroupReader(Reader(fleet, KINDS))
    for access, f in callers:
        groups.page(access, f, by, 50)
    for step in range(16):
        for c in rnd.sample(CLUSTERS, rnd.choice((1, 1, 3))):
            now = held[c]
            what = rnd.choice(("flip", "gone", "new", "suspended"))
            i = rnd.randrange(len(now))
            old = rows.decode(c, now[i])
            if what == "gone":
                now = now[:i] + now[i + 1 :]
            elif what == "new":
                fresh = row(
                    c, f"team-{step % 4:02d}", NAMESPACED[step % 5], f"new-{step}", "unhealthy"
                )
                now = [*now, rows.encode(fresh)]
            else:
                if what == "flip":
                    old["status"] = "healthy" if old["status"] == "unhealthy" else "unhealthy"
                else:
                    old["status"], old["suspended"] = "unhealthy", True
                now = [*now[:i], rows.encode(old), *now[i + 1 :]]
            held[c] = now
            store.replace_rows(fleet, c, now)
        for access, f in callers:
            page = groups.page(access, f, by, 50)
            got = [
                (g.order, g.key, [(m.cluster, m.status) for m in g.clusters]) for g in page.groups
            ]
            assert got == oracle(fleet, access, by, f)[:50], (step, f)
    assert groups.parts_followed > 16


def test_unhealthy_groups_read_no_rows(fleet: redis.Redis) -> None:
    """status=unhealthy: the generations, the unhealthy indexes, one script call per cluster
    for the page's groups: three round trips, no row scanned."""
    groups = GroupReader(Reader(fleet, KINDS))
    page = groups.page(ADMIN, Filters(statuses=("unhealthy",)), "object", 50)
    assert page.round_trips == 3 and page.groups
    unhealthy_members = sum(
        fleet.zcard(f"fs:{{c:{c}}}:st:unhealthy") for c in CLUSTERS
    )  # read once, whole: the only members read
    assert page.scanned == unhealthy_members


def test_later_pages_skip_groups_that_changed_during_the_walk(fleet: redis.Redis) -> None:
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(ADMIN, Filters(), "object", 3)
    assert first.cursor is not None
    shown = first.groups[0]
    assert shown.order > 0  # an unhealthy group, shown first
    i = next(
        i
        for i in range(34)
        if rows.sort_key(f"team-{i % 4:02d}", NAMESPACED[i % 5], f"app-{i % 11}").encode()
        == shown.key
    )
    c = next(m.cluster for m in shown.clusters if m.status == "unhealthy")
    store.replace_rows(fleet, c, members(c, flip=i))  # it recovers there: it moves later
    rest = walk_from(groups, first.cursor)
    assert shown.key not in [k for _n, k, _ in rest]
    # A walk that began after the change shows it at its new place.
    cursor = GroupCursor(first.cursor.unhealthy, first.cursor.key, int(time.time() * 1000) + 1)
    assert shown.key in [k for _n, k, _ in walk_from(groups, cursor)]


@pytest.mark.standalone_only
def test_a_walks_changes_follow_the_written_clusters_feed(fleet: redis.Redis) -> None:
    """A later page learns what changed since its walk began on a written cluster from that
    cluster's change feed (one script call), not by reading every time window since the walk
    began again; the group that changed there is skipped, as a fresh read would skip it."""
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(ADMIN, Filters(), "object", 3)
    assert first.cursor is not None
    later = walk_from(groups, first.cursor)  # every cluster's windows read once for this walk
    c = CLUSTERS[3]
    key, status = next((k, m.status) for _n, k, ms in later for m in ms if m.cluster == c)
    member = next(
        m.decode() for m in fleet.zrange(keys.rows(c), 0, -1) if rows.identity_bytes(m) == key
    )
    moved = rows.decode(c, member)
    moved["status"] = "healthy" if status == "unhealthy" else "unhealthy"
    change = store_events.Change.of(rows.encode(moved, rows.edges_of(member)))
    assert store_events.apply_changes(fleet, c, [change]).updated == 1
    followed, filtered = groups.followed, groups.changes_filtered
    fleet.config_resetstat()
    rest = walk_from(groups, first.cursor)
    stats = fleets.costs(fleet)
    assert "zrangebyscore" not in stats, stats  # no time window read again
    assert groups.followed > followed
    # the caller's share of each cluster's changed set is kept: only the written one's moved
    assert groups.changes_filtered == filtered + 1
    assert key not in [k for _n, k, _ in rest]
    assert [k for _n, k, _ in rest] == [k for _n, k, _ in later if k != key]


def test_a_walks_later_pages_union_the_written_clusters_changes_only(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller's changed groups of a walk are kept with the status generations they were
    made at: a later page asks only the clusters written since for theirs, a page after no
    write none, and the walk still skips what changed."""
    asked: list[int] = []
    real = GroupReader._changed_on

    def spy(self: GroupReader, q: Any, start: int, clusters: Any) -> Any:
        asked.append(len(clusters))
        return real(self, q, start, clusters)

    monkeypatch.setattr(GroupReader, "_changed_on", spy)
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(ADMIN, Filters(), "object", 3)
    assert first.cursor is not None
    later = walk_from(groups, first.cursor)
    assert asked == [len(CLUSTERS)]  # the walk's second page; its later pages kept the union
    asked.clear()
    assert walk_from(groups, first.cursor) == later
    assert asked == []  # still: the union kept
    shown = [k for _n, k, _ in later]
    for c, n in ((CLUSTERS[3], 1), (CLUSTERS[5], 2)):
        key = next(  # it recovers there: it moves later in the order, where the walk goes
            k
            for _n, k, ms in later
            for m in ms
            if m.cluster == c and m.status == "unhealthy" and k in shown
        )
        member = next(
            m.decode() for m in fleet.zrange(keys.rows(c), 0, -1) if rows.identity_bytes(m) == key
        )
        moved = rows.decode(c, member)
        moved["status"] = "healthy" if moved["status"] == "unhealthy" else "unhealthy"
        change = store_events.Change.of(rows.encode(moved, rows.edges_of(member)))
        assert store_events.apply_changes(fleet, c, [change]).updated == 1
        asked.clear()
        rest = walk_from(groups, first.cursor)
        assert asked and set(asked) == {1}, asked  # the written cluster only, on each page
        shown.remove(key)
        assert [k for _n, k, _ in rest] == shown, n


def walk_from(groups: GroupReader, cursor: GroupCursor | None) -> list[Any]:
    got = []
    while cursor is not None:
        page = groups.page(ADMIN, Filters(), "object", 7, cursor)
        got += [(g.order, g.key, g.clusters) for g in page.groups]
        cursor = page.cursor
    return got


def test_untimed_entries_keep_their_score_until_their_status_changes(redis_url: str) -> None:
    """Rows without a transition time are scored by when their status last changed: the
    walks' test of what changed since they began (a rewrite of the message is no change)."""
    r = topology.client(redis_url)
    c = "u00"

    def put(status: str, message: str) -> None:
        x = row(c, "team-00", NAMESPACED[0], "app", status)
        x["message"] = message
        store.replace_rows(r, c, [rows.encode(x)])

    def scores() -> dict[bytes, float]:
        out = {}
        for suffix in timeline.untimed_suffixes():
            out.update(dict(r.zrange(keys.timeline_window(c, suffix), 0, -1, withscores=True)))
        return out

    put("healthy", "one")
    first = scores()
    assert len(first) == 1
    time.sleep(0.002)  # the clock must move for a new score to differ (ms)
    put("healthy", "two")
    assert scores() == first
    before = time.time() * 1000
    put("unhealthy", "two")
    ((entry, score),) = scores().items()
    assert entry not in first and score >= int(before)
    r.close()
