"""Count guards behind the time-sorted profiles' numbers (docs/benchmarks.md): a repeated page
costs one round trip (the generations), a write makes the next page read only the windows it
touched, and a status-filtered page reads the small status indexes and the scores of members it
has not seen, never the time index's windows. Against a real Redis, rows written by the writer
(common.index.write.store), pages compared with an oracle sorted from the rows themselves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common import redis_client
from common.index import keys, rows, timeline
from common.index.read import timesort as reader_time
from common.index.read.reader import Filters
from common.index.read.timesort import TimeCursor, TimeReader
from common.index.write import store, store_events
from tests.support import topology
from tests.support.index_fleet import KINDS, FakeAccess
from tests.support.time_fleet import CLUSTERS, DAY, T0, member, write_fleet


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    r = topology.client(redis_url)
    write_fleet(r)
    yield r
    r.close()


ADMIN = {c: FakeAccess(frozenset(KINDS)) for c in CLUSTERS}


def oracle(r: redis.Redis, descending: bool, codes: str = "") -> list[tuple[str, bytes]]:
    """Every row in (time, cluster, entry) order, from the rows and their index scores."""
    out = []
    for c in CLUSTERS:
        for m in r.zrange(keys.rows(c), 0, -1):
            m = m.encode() if isinstance(m, str) else m
            if codes and m.split(b"\x00")[3].decode() not in codes:
                continue
            suffix, entry = timeline.where(m.decode())
            score = r.zscore(keys.timeline_window(c, suffix), entry)
            assert score is not None, (c, m)
            at = timeline.position(timeline.window_number(suffix), int(score))
            out.append((at, c, entry.encode(), m))
    out.sort(reverse=descending)
    return [(c, m) for _at, c, _e, m in out]


def walk(reader: TimeReader, descending: bool, filters: Filters | None = None) -> list:
    got, cursor = [], None
    while True:
        page = reader.page(ADMIN, filters or Filters(), 7, descending, cursor)
        got += page.members
        if page.cursor is None:
            return got
        cursor = page.cursor


@pytest.mark.parametrize("descending", [True, False])
def test_walks_follow_the_index_order_exactly(fleet: redis.Redis, descending: bool) -> None:
    assert walk(TimeReader(fleet), descending) == oracle(fleet, descending)
    unhealthy = Filters(statuses=("unhealthy",))
    want = oracle(fleet, descending, rows.codes_for(["unhealthy"], None))
    assert walk(TimeReader(fleet), descending, unhealthy) == want and want


def test_a_repeated_page_costs_one_round_trip_and_a_write_rereads_its_windows(
    fleet: redis.Redis,
) -> None:
    reader = TimeReader(fleet)
    first = reader.page(ADMIN, Filters(), 20, True)
    assert first.window_reads >= len(CLUSTERS)  # each cluster's newest window at least
    again = reader.page(ADMIN, Filters(), 20, True)
    assert (again.round_trips, again.window_reads) == (1, 0)
    assert again.members == first.members
    # One row of c03 transitions now: its old window and the newest change, nothing else.
    old = member("c03", 4)
    new = member("c03", 4, "unhealthy", at=T0 + 25 * DAY)
    store.replace_rows(
        fleet, "c03", [new if m == old else m for m in map(member, ["c03"] * 40, range(40))]
    )
    after = reader.page(ADMIN, Filters(), 20, True)
    assert after.window_reads <= 2
    cluster, got = after.members[0]  # as written, plus the writer's record of the transition
    assert (cluster, rows.without_recent(got.decode())) == ("c03", new)
    assert after.members == TimeReader(fleet).page(ADMIN, Filters(), 20, True).members


def test_a_window_read_again_tests_only_the_entries_new_to_its_segment(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write, a window read again at its new version is filtered again only for the
    entries its last segment (the same caller and filters) did not hold: the rest pass as
    they are."""
    reader = TimeReader(fleet)
    walk(reader, True)  # every segment remembered
    parsed: list[tuple[bytes, ...]] = []
    real = reader_time._matcher

    def spy(*a: Any) -> Any:
        test = real(*a)

        def counted(*entry: bytes) -> bool:
            parsed.append(entry)
            return test(*entry)

        return counted

    monkeypatch.setattr(reader_time, "_matcher", spy)
    rows_of = list(map(member, ["c03"] * 40, range(40)))
    for i, at in ((4, T0 + 25 * DAY), (6, T0 + 25 * DAY + 1000)):
        old = member("c03", i)
        new = member("c03", i, "unhealthy", at=at)
        rows_of = [new if m == old else m for m in rows_of]
        store.replace_rows(fleet, "c03", rows_of)
        parsed.clear()
        got = walk(reader, True)
        assert got == oracle(fleet, True)
        assert 0 < len(parsed) <= 2, parsed  # the moved entry, not its windows' others
    assert reader.page(ADMIN, Filters(), 20, True).members[:2] == [
        ("c03", m) for _c, m in oracle(fleet, True)[:2]
    ]


def test_a_row_moved_to_another_window_at_the_same_version_is_read_again(
    fleet: redis.Redis,
) -> None:
    """A transition that keeps the status keeps the entry and moves it to another window; the
    windows count their own writes, so the new one may be at the version the old one had when
    the row was remembered: the row is remembered by window and version, not version alone."""
    reader = TimeReader(fleet)
    newest = reader.page(ADMIN, Filters(), 50, True)
    old = member("c03", 4)
    assert ("c03", old.encode()) not in newest.members  # not on the page: not remembered yet
    oldest = reader.page(ADMIN, Filters(), 500, False)
    assert ("c03", old.encode()) in oldest.members  # remembered now, by its window's version
    moved = member("c03", 4, at=T0 + 25 * DAY)  # the same entry (status), a new window
    store.replace_rows(
        fleet, "c03", [moved if m == old else m for m in map(member, ["c03"] * 40, range(40))]
    )
    cluster, got = reader.page(ADMIN, Filters(), 20, True).members[0]
    assert (cluster, rows.without_recent(got.decode())) == ("c03", moved)


TEAM = {c: FakeAccess(namespaces={"team-01": frozenset(KINDS)}) for c in CLUSTERS}


def test_status_pages_read_status_indexes_and_only_new_scores(fleet: redis.Redis) -> None:
    """A caller who sees some namespaces reads the status indexes (the plan); one who sees
    whole clusters walks the time index's windows."""
    reader = TimeReader(fleet)
    unhealthy = Filters(statuses=("unhealthy",))
    assert reader.page(ADMIN, unhealthy, 5, True).window_reads >= len(CLUSTERS)
    topology.reset_stats(fleet)
    page = reader.page(TEAM, unhealthy, 5, True)
    used = topology.commandstats(fleet)
    assert page.window_reads == 0 and len(page.members) == 5
    visible = [
        m
        for c in CLUSTERS
        for m in fleet.zrange(keys.by_status(c, "unhealthy"), 0, -1)
        if (m if isinstance(m, bytes) else m.encode()).startswith(b"team-01\x00")
    ]
    assert used["zscore"] == len(visible)  # each visible member's score, once
    assert used["zrangebylex"] == len(CLUSTERS)  # the team's range of each unhealthy index
    assert used["zrange"] == 0
    ms = [member("c05", i) for i in range(40)]
    ms[4] = member("c05", 4, "unhealthy", at=T0 + 30 * DAY)  # in team-01
    store.replace_rows(fleet, "c05", ms)
    topology.reset_stats(fleet)
    page = reader.page(TEAM, unhealthy, 5, True)
    used = topology.commandstats(fleet)
    cluster, got = page.members[0]  # as written, plus the writer's record of the transition
    assert (cluster, rows.without_recent(got.decode())) == ("c05", ms[4])
    assert used["zscore"] == 1  # the new member's
    assert used["zrangebylex"] == 1  # c05's range


def test_cursor_positions_and_start_bound_the_walk(fleet: redis.Redis) -> None:
    reader = TimeReader(fleet)
    everything = oracle(fleet, False)
    page = reader.page(ADMIN, Filters(), 10, False)
    assert page.cursor is not None
    rest = reader.page(ADMIN, Filters(), 500, False, page.cursor)
    assert page.members + rest.members == everything
    # A walk that began at `start` skips what was placed after it in the rest of that window
    # (written since); later windows hold future transition times, always shown.
    start = (T0 + DAY) * 1000 + 3600_000
    boundary = (start // timeline.WINDOW_MS + 1) * timeline.WINDOW_MS
    c = page.cursor
    rest = reader.page(ADMIN, Filters(), 500, False, TimeCursor(c.at, c.cluster, c.entry, start))
    placed = {m: at for at, m in positions(fleet)}
    want = [(cl, m) for cl, m in everything[10:] if not start < placed[m] < boundary]
    assert rest.members == want
    assert len(want) < len(everything) - 10  # the hole held rows


def positions(r: redis.Redis) -> list[tuple[int, bytes]]:
    out = []
    for c in CLUSTERS:
        for m in r.zrange(keys.rows(c), 0, -1):
            m = m.encode() if isinstance(m, str) else m
            suffix, entry = timeline.where(m.decode())
            score = r.zscore(keys.timeline_window(c, suffix), entry)
            out.append((timeline.position(timeline.window_number(suffix), int(score)), m))
    return out


@pytest.mark.parametrize("ranged_max", [64, 0])
def test_status_plans_agree_with_the_order(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch, ranged_max: int
) -> None:
    """The caller's ranges of the status indexes, or (more namespaces than RANGED_MAX) the
    whole indexes: the same rows in the same order, both directions."""
    monkeypatch.setattr(reader_time, "RANGED_MAX", ranged_max)
    unhealthy = Filters(statuses=("unhealthy",))
    for descending in (True, False):
        want = [
            (c, m)
            for c, m in oracle(fleet, descending, rows.codes_for(["unhealthy"], None))
            if m.startswith(b"team-01\x00")
        ]
        got, cursor = [], None
        reader = TimeReader(fleet)
        while True:
            page = reader.page(TEAM, unhealthy, 3, descending, cursor)
            got += page.members
            if page.cursor is None:
                break
            cursor = page.cursor
        assert got == want and want


def test_pages_survive_the_caches_emptied_between_round_trips(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another thread's page empties the shared caches when they outgrow `entries_max`, at any
    moment: here before every round trip. Each page must still answer exactly."""
    unhealthy = Filters(statuses=("unhealthy",))
    mixed = {c: (ADMIN if i % 2 else TEAM)[c] for i, c in enumerate(CLUSTERS)}  # both plans
    cases = [  # the mixed one first, while no directory is remembered
        (mixed, unhealthy, False),
        (ADMIN, Filters(), False),
        (TEAM, unhealthy, True),
        (ADMIN, unhealthy, True),
    ]
    want = [TimeReader(fleet).page(a, f, 30, d).members for a, f, d in cases]
    assert {c for c, _ in want[0]} & set(CLUSTERS[::2]), "the status plan has rows here"
    shared = TimeReader(fleet)
    real = redis_client.pipelined

    def emptying(r: Any, commands: Any) -> Any:
        for cache in (shared._windows, shared._segments, shared._indexes, shared._scores):
            cache.clear()
        shared._members.clear()
        return real(r, commands)

    monkeypatch.setattr(reader_time.redis_client, "pipelined", emptying)
    for _ in range(2):  # cold, then with the page memo dropped
        shared._pages.clear()
        got = [shared.page(a, f, 30, d).members for a, f, d in cases]
        assert got == want


def reworded_rows(r: redis.Redis, cluster: str, members: list[bytes], message: str) -> None:
    """The rows `members` of `cluster` get a new message through the watcher's writer."""
    changes = []
    for m in members:
        got = rows.decode(cluster, m.decode())
        got["message"] = message
        changes.append(store_events.Change.of(rows.encode(got, rows.edges_of(m.decode()))))
    assert store_events.apply_changes(r, cluster, changes).updated == len(changes)


@pytest.mark.parametrize("descending", [True, False])
def test_after_message_only_writes_a_page_keeps_its_order_and_rereads_the_written_rows(
    fleet: redis.Redis, descending: bool
) -> None:
    """A write that moves no status generation (a new message) leaves the time order as it
    was: the next page keeps the last one's order, reads again only its rows on the written
    clusters (one ZRANGEBYLEX each, no window), and shows the new message; a transition walks
    again."""
    reader = TimeReader(fleet)
    first = reader.page(ADMIN, Filters(), 20, descending)
    shown = [m for c, m in first.members if c == "c03"]
    assert shown
    reworded_rows(fleet, "c03", shown[:2], "Reconciliation finished in 3.1s")
    reworded_rows(fleet, "c05", [m for c, m in fleet_rows(fleet, "c05")[:1]], "off the page")
    topology.reset_stats(fleet)
    after = reader.page(ADMIN, Filters(), 20, descending)
    assert reader.reworded == 1 and after.window_reads == 0
    stats = topology.commandstats(fleet)
    stats.pop("config|resetstat", None)
    # the generations, the status generations, and the rows shown of the written clusters
    written = sum(1 for c, _m in first.members if c in ("c03", "c05"))
    assert stats == {"mget": 2, "zrangebylex": written} and written < len(first.members), stats
    assert after.members == TimeReader(fleet).page(ADMIN, Filters(), 20, descending).members
    assert sum(b"Reconciliation finished in 3.1s" in m for _c, m in after.members) == len(shown[:2])
    assert after.cursor == first.cursor
    old = member("c03", 4)  # a transition: walked again
    new = member("c03", 4, "unhealthy", at=T0 + 25 * DAY)
    store.replace_rows(
        fleet, "c03", [new if m == old else m for m in map(member, ["c03"] * 40, range(40))]
    )
    moved = reader.page(ADMIN, Filters(), 20, descending)
    assert reader.reworded == 1
    assert moved.members == TimeReader(fleet).page(ADMIN, Filters(), 20, descending).members


def fleet_rows(r: redis.Redis, cluster: str) -> list[tuple[str, bytes]]:
    return [
        (cluster, m.encode() if isinstance(m, str) else m)
        for m in r.zrange(keys.rows(cluster), 0, -1)
    ]


def team_unhealthy(r: redis.Redis, cluster: str) -> list[bytes]:
    """The unhealthy rows of `cluster` the team member sees (namespace team-01)."""
    index = r.zrange(keys.by_status(cluster, "unhealthy"), 0, -1)
    got = [m if isinstance(m, bytes) else m.encode() for m in index]
    return [m for m in got if m.startswith(b"team-01\x00")]


@pytest.mark.parametrize("descending", [True, False])
def test_a_status_segment_is_kept_across_a_write_that_moved_no_status_generation(
    fleet: redis.Redis, descending: bool
) -> None:
    """A team member's status-filtered walk reads its ranges of a written cluster's status
    index again only when the cluster's status generation moved: after a write that changed
    only a message, the segment is kept and only the rows the page shows from that cluster are
    read (by identity), with the new message; after a transition there, its range is read."""
    reader = TimeReader(fleet)
    unhealthy = Filters(statuses=("unhealthy",))
    reader.page(TEAM, unhealthy, 30, descending)  # every visible row: 2 on each of 12 clusters
    reworded_rows(fleet, "c05", team_unhealthy(fleet, "c05")[:1], "Health check failed: retry 3")
    topology.reset_stats(fleet)
    page = reader.page(TEAM, unhealthy, 29, descending)  # another request: walked anew
    used = topology.commandstats(fleet)
    assert reader.kept_segments == 1
    assert used.get("zscore", 0) == 0
    assert used["zrangebylex"] == 2  # c05's two rows on the page; no range of an index read
    assert page.members == TimeReader(fleet).page(TEAM, unhealthy, 29, descending).members
    assert sum(b"Health check failed: retry 3" in m for _c, m in page.members) == 1
    topology.reset_stats(fleet)
    again = reader.page(TEAM, unhealthy, 27, descending)  # the rows read are remembered
    assert again.members == page.members[:27] and reader.kept_segments == 2
    assert "zrangebylex" not in topology.commandstats(fleet)
    m = member("c05", 1)  # healthy, in team-01
    flipped = rows.decode("c05", m)
    assert (flipped["namespace"], flipped["status"]) == ("team-01", "healthy")
    flipped["status"] = "unhealthy"
    store_events.apply_changes(fleet, "c05", [store_events.Change.of(rows.encode(flipped))])
    topology.reset_stats(fleet)
    moved = reader.page(TEAM, unhealthy, 28, descending)
    used = topology.commandstats(fleet)
    assert reader.kept_segments == 2
    assert used["zrangebylex"] == 1  # c05's range of the index, read again
    assert moved.members == TimeReader(fleet).page(TEAM, unhealthy, 28, descending).members
    assert len(moved.members) == 25


@pytest.mark.parametrize("descending", [True, False])
def test_a_merge_walks_again_only_the_clusters_whose_statuses_moved(
    fleet: redis.Redis, descending: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clusters written since the last walk at the same status generation (new messages) are
    neither walked again nor counted against the merge's limit: after message-only writes on
    more clusters than the limit and a transition on one more, the next page is a merge with a
    fresh walk of that one cluster (its directory the only one read), showing the new
    messages."""
    monkeypatch.setattr(reader_time, "PATCH_MOVED_MAX", 2)
    reader = TimeReader(fleet)
    first = reader.page(ADMIN, Filters(), 20, descending)
    shown = sorted({c for c, _m in first.members} - {"c03"})
    assert len(shown) > 2
    message = "Reconciliation finished in 4.2s"
    for c in shown:
        reworded_rows(fleet, c, [m for cc, m in first.members if cc == c][:1], message)
    old = member("c03", 4)  # a transition on a cluster not reworded
    new = member("c03", 4, "unhealthy", at=T0 + 25 * DAY)
    store.replace_rows(
        fleet, "c03", [new if m == old else m for m in map(member, ["c03"] * 40, range(40))]
    )
    topology.reset_stats(fleet)
    after = reader.page(ADMIN, Filters(), 20, descending)
    stats = topology.commandstats(fleet)
    assert after.patched
    assert stats["hgetall"] == 1  # c03's directory: no other cluster walked again
    assert after.members == TimeReader(fleet).page(ADMIN, Filters(), 20, descending).members
    assert sum(message.encode() in m for _c, m in after.members) == len(shown)
