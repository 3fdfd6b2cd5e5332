"""Time-ordered pages after writes are merged from the last walk and fresh walks of the written
clusters (common.index.read.timesort `_patched`) instead of walking every cluster again: under a
seeded stream of random writes through the watcher's writer (transitions now, message-only
updates, deletions, new rows, a leaf's clock ahead), every page a long-lived reader answers,
first pages and pages after a cursor, newest and oldest first, for an admin and a team member,
with and without a status filter, equals the page a fresh reader walks; and merges do happen
(and read only the written clusters' windows)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
import redis

from common.index import rows
from common.index.read.reader import Filters
from common.index.read.timesort import TimeReader
from common.index.write import store_events
from tests.support import topology
from tests.support.index_fleet import KINDS, FakeAccess
from tests.support.rowfactory import row
from tests.support.time_fleet import CLUSTERS, iso, write_fleet

ADMIN = {c: FakeAccess(frozenset(KINDS)) for c in CLUSTERS}
TEAM = {c: FakeAccess(namespaces={"team-01": frozenset(KINDS)}) for c in CLUSTERS}
CASES = [
    (ADMIN, Filters(), True),
    (ADMIN, Filters(), False),
    (ADMIN, Filters(statuses=("unhealthy",)), True),
    (TEAM, Filters(), True),
    (TEAM, Filters(statuses=("unhealthy",)), True),
]


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    r = topology.client(redis_url)
    write_fleet(r)
    yield r
    r.close()


def written(i: int, cluster: str, status: str, at: int, message: str = "") -> str:
    r = row(cluster, f"team-{i % 3:02d}", KINDS[i % len(KINDS[:-1])], f"app-{i}", status)
    r["lastTransitionTime"] = iso(at)
    r["message"] = message
    return rows.encode(r)


def write(r: redis.Redis, rnd: random.Random, state: dict[tuple[str, int], str]) -> None:
    """One random write on one cluster, as the watcher makes them."""
    c, i = rnd.choice(CLUSTERS), rnd.randrange(48)
    now = int(time.time())
    was = state.get((c, i))
    what = rnd.random()
    if what < 0.45:  # a transition now
        status = "healthy" if was == "unhealthy" else "unhealthy"
        change = store_events.Change.of(written(i, c, status, now))
    elif what < 0.75 and was is not None:  # a new message, the same status and time
        change = store_events.Change.of(written(i, c, was, now - 7200, f"m{rnd.random()}"))
        status = was
    elif what < 0.85 and was is not None:  # deleted
        change = store_events.Change(rows.identity(written(i, c, was, now)), None)
        status = ""
    elif what < 0.92:  # a leaf's clock 30 s ahead: a time after the walk's start
        status = "unhealthy"
        change = store_events.Change.of(written(i, c, status, now + 30))
    else:  # a new (or re-created) row, transitioned a day ago
        status = "healthy"
        change = store_events.Change.of(written(i, c, status, now - 86400))
    store_events.apply_changes(r, c, [change])
    if status:
        state[(c, i)] = status
    else:
        state.pop((c, i), None)


def test_merged_pages_equal_fresh_walks_under_random_writes(fleet: redis.Redis) -> None:
    rnd = random.Random(38)
    state: dict[tuple[str, int], str] = {}
    held = TimeReader(fleet)
    second = []  # a user staying on the second page while the writes go on
    for access, filters, desc in CASES:
        second.append(held.page(access, filters, 9, desc).cursor)
    merged = checked = 0
    for _step in range(60):
        for _ in range(rnd.choice((1, 1, 2, 3))):
            write(fleet, rnd, state)
        for (access, filters, desc), there in zip(CASES, second, strict=True):
            if there is not None:
                got = held.page(access, filters, 9, desc, there)
                assert (
                    got.members == TimeReader(fleet).page(access, filters, 9, desc, there).members
                )
                merged += got.patched
            got = held.page(access, filters, 9, desc)
            want = TimeReader(fleet).page(access, filters, 9, desc)
            assert got.members == want.members, (filters, desc)
            assert (got.cursor is None) == (want.cursor is None)
            merged += getattr(got, "patched", False)
            checked += 1
            if got.cursor is not None:  # the next page, from the held reader's own cursor
                nxt = held.page(access, filters, 9, desc, got.cursor)
                fresh = TimeReader(fleet).page(access, filters, 9, desc, got.cursor)
                assert nxt.members == fresh.members
    assert merged > checked // 4, (merged, checked)  # the merge is what answered most


def test_a_merge_reads_only_the_written_clusters_windows(fleet: redis.Redis) -> None:
    held = TimeReader(fleet)
    held.page(ADMIN, Filters(), 20, True)
    now = int(time.time())
    store_events.apply_changes(
        fleet, "c05", [store_events.Change.of(written(3, "c05", "unhealthy", now))]
    )
    after = held.page(ADMIN, Filters(), 20, True)
    assert after.patched and after.window_reads <= 2
    assert after.members[0][0] == "c05"
    assert after.members == TimeReader(fleet).page(ADMIN, Filters(), 20, True).members
