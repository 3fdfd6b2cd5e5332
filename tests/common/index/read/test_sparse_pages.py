"""Sparse pages for team members (a status or kind filter over many clusters): the count tables
choose how many clusters the first round trip reads and prune each cluster's ranges to the
namespaces holding matches; a write since the counts were read is caught by the generation the
scan reads back, so no row is ever missed."""

from __future__ import annotations

import pytest
import redis

from common.index.read.reader import Filters, PageRequest, Reader
from tests.support.costs import commands, count_round_trips
from tests.support.index_fleet import KINDS, FakeAccess, make_row, order, visible, write_rows

ALL = frozenset(KINDS)
CLUSTERS = [f"t{i:02d}" for i in range(30)]
TEAM = {c: FakeAccess(namespaces={f"team-{n:02d}": ALL for n in range(20)}) for c in CLUSTERS}
UNHEALTHY = Filters(statuses=("unhealthy",))


@pytest.fixture
def fleet(rb: redis.Redis) -> list:
    """30 clusters x 40 namespaces (the team has 20) x 3 rows; 2 unhealthy rows of the team's
    per cluster, in one namespace."""
    rows = [
        make_row(
            c,
            f"team-{n:02d}",
            "HelmRelease",
            f"app-{i}",
            "unhealthy" if n == ci % 20 and i < 2 else "healthy",
        )
        for ci, c in enumerate(CLUSTERS)
        for n in range(40)
        for i in range(3)
    ]
    write_rows(rb, rows)
    return rows


@pytest.mark.standalone_only
def test_a_team_members_failing_rows_come_in_one_round_trip_from_their_namespaces(
    rb: redis.Redis, fleet: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = visible(fleet, TEAM, statuses=("unhealthy",))
    assert len(want) == 60
    reader = Reader(rb, KINDS, pages_max=0)  # the scan itself (not the remembered page)
    reader.page(TEAM, PageRequest(UNHEALTHY, 50))  # warm: count tables read (one round trip)
    rb.config_resetstat()
    trips = count_round_trips(monkeypatch)
    page = reader.page(TEAM, PageRequest(UNHEALTHY, 50))
    assert [order(r) for r in page.rows] == [order(r) for r in want[:50]]
    # 26 clusters hold the page (2 each) and are read at once, each only in the namespace
    # with its failing rows: one plain range (every row there is the caller's: no script),
    # not 20; then their generations, in one MGET
    assert trips == ["pipeline"]
    cmds = commands(rb)
    assert cmds["zrangebylex"] == 26 and cmds["mget"] == 1
    assert set(cmds) == {"zrangebylex", "mget"}


@pytest.mark.parametrize("limit", [1, 3, 7, 50])
def test_pages_through_plain_ranges_that_hold_more_than_a_page(
    rb: redis.Redis, fleet: list, limit: int
) -> None:
    """Pruned namespaces read without the script, each up to the page: where one holds more
    failing rows than the page, the next page starts after the last row returned."""
    more = [
        make_row(c, f"team-{n:02d}", kind, f"x-{i}", "unhealthy")
        for c in CLUSTERS[:4]
        for n in (3, 11, 12)
        for kind in ("HelmRelease", "Kustomization")
        for i in range(5)
    ]
    write_rows(rb, more)
    reader = Reader(rb, KINDS)
    for filters in (UNHEALTHY, Filters(kinds=("Kustomization",))):
        rows, cursor, pages = [], None, 0
        while True:
            page = reader.page(TEAM, PageRequest(filters, limit, cursor))
            rows.extend(page.rows)
            pages += 1
            if page.cursor is None:
                break
            cursor = page.cursor
        want = visible([*fleet, *more], TEAM, statuses=filters.statuses, kinds=filters.kinds)
        assert [order(r) for r in rows] == [order(r) for r in want]
        assert pages == max(1, -(-len(want) // limit))


def test_a_row_written_after_the_counts_were_read_is_not_missed(
    rb: redis.Redis, fleet: list
) -> None:
    reader = Reader(rb, KINDS)
    first = reader.page(TEAM, PageRequest(UNHEALTHY, 10))
    assert first.cursor is not None
    # a namespace that had no failing row gets one, on a cluster the next page reads: the
    # remembered counts (and the ranges pruned by them) are now wrong for that cluster
    new = make_row("t07", "team-19", "Kustomization", "late", "unhealthy")
    write_rows(rb, [new])
    rows, cursor = list(first.rows), first.cursor
    while cursor is not None:
        page = reader.page(TEAM, PageRequest(UNHEALTHY, 10, cursor))
        rows.extend(page.rows)
        cursor = page.cursor
    want = visible([*fleet, new], TEAM, statuses=("unhealthy",))
    assert [order(r) for r in rows] == [order(r) for r in want]


@pytest.mark.standalone_only
@pytest.mark.parametrize("filters", [Filters(kinds=("Kustomization",)), Filters(suspended=True)])
def test_clusters_without_matches_are_skipped_by_a_generation_check(
    rb: redis.Redis, fleet: list, filters: Filters
) -> None:
    # nothing matches anywhere but one cluster: the others are skipped on the counts (their
    # generations, in one MGET, confirm them), that one is one plain range read
    extra = make_row("t29", "team-03", "Kustomization", "only", "healthy", suspended=True)
    write_rows(rb, [extra])
    reader = Reader(rb, KINDS, pages_max=0)  # the scan itself (not the remembered page)
    reader.page(TEAM, PageRequest(filters, 50))
    rb.config_resetstat()
    page = reader.page(TEAM, PageRequest(filters, 50))
    assert [r["name"] for r in page.rows] == ["only"]
    cmds = commands(rb)
    assert cmds == {"zrangebylex": 1, "mget": 1}, cmds


@pytest.mark.standalone_only
@pytest.mark.parametrize("filters", [UNHEALTHY, Filters(kinds=("Kustomization",))])
def test_a_repeated_sparse_page_costs_one_mget_until_a_cluster_is_written(
    rb: redis.Redis, fleet: list, filters: Filters
) -> None:
    """The page is remembered with the generations of the clusters it could read (taken before
    its scans); the same request then costs one MGET, and any write to one of them reads the
    page again, with the new row in it."""
    more = [make_row("t05", "team-05", "Kustomization", "k", "unhealthy")]
    write_rows(rb, more)
    reader = Reader(rb, KINDS)
    first = reader.page(TEAM, PageRequest(filters, 20))
    want = visible([*fleet, *more], TEAM, statuses=filters.statuses, kinds=filters.kinds)
    assert [order(r) for r in first.rows] == [order(r) for r in want[:20]]
    rb.config_resetstat()
    again = reader.page(TEAM, PageRequest(filters, 20))
    assert [order(r) for r in again.rows] == [order(r) for r in first.rows]
    assert again.cursor == first.cursor
    assert commands(rb) == {"mget": 1}
    # a write to a cluster after the one holding the row after the page cannot change it (a
    # last page depends on every cluster: then it is read again, with the new row)
    late = make_row("t29", "team-09", "Kustomization", "z-late", "unhealthy")
    write_rows(rb, [late])
    more.append(late)
    rb.config_resetstat()
    after = reader.page(TEAM, PageRequest(filters, 20))
    if first.cursor is not None:
        assert after.rows == first.rows
        assert commands(rb) == {"mget": 1}
    else:
        assert after.rows[-1]["name"] == "z-late"
    # a new matching row on the first cluster: it leads the page now
    new = make_row("t00", "team-19", "Kustomization", "a-new", "unhealthy")
    write_rows(rb, [new])
    rb.config_resetstat()
    third = reader.page(TEAM, PageRequest(filters, 20))
    want = visible([*fleet, *more, new], TEAM, statuses=filters.statuses, kinds=filters.kinds)
    assert [order(r) for r in third.rows] == [order(r) for r in want[:20]]
    assert set(commands(rb)) - {"mget"}  # scanned again
    # a different caller (another access object) never gets this caller's page
    other = {c: FakeAccess(namespaces={"team-19": ALL}) for c in CLUSTERS}
    theirs = reader.page(other, PageRequest(filters, 20))
    want = visible([*fleet, *more, new], other, statuses=filters.statuses, kinds=filters.kinds)
    assert [order(r) for r in theirs.rows] == [order(r) for r in want[:20]]
