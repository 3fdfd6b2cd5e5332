"""common.index.read.reader against a real redis-server: pages equal the oracle for many accesses and
filters, cursors resume exactly, deep pages cost what the first costs, facets count right."""

from __future__ import annotations

import pytest
import redis

from common.index.read.reader import Filters, PageRequest, Reader
from tests.common.index.read.fleets import ACCESSES, ALL, walk
from tests.support.index_fleet import (
    KINDS,
    FakeAccess,
    delete_row,
    make_row,
    order,
    random_fleet,
    visible,
    write_rows,
)

TOPOLOGIES = ("standalone", "cluster")

FILTERS = [
    {},
    {"statuses": ("unhealthy",)},
    {"statuses": ("unhealthy", "unknown")},
    {"suspended": True},
    {"suspended": False, "statuses": ("unhealthy",)},
    {"suspended": True, "statuses": ("healthy", "unhealthy")},
    {"suspended": False, "kinds": ("HelmRelease", "Gateway"), "name": "app-1"},
    {"namespaces": ("",)},
    {"statuses": ("healthy", "progressing")},
    {"kinds": ("HelmRelease",)},
    {"kinds": ("HelmRelease", "Gateway"), "namespaces": ("team-01", "team-02", "ns3")},
    {"name": "app-1"},
    {"clusters": ("c01", "c02"), "statuses": ("progressing",)},
]


@pytest.mark.parametrize("plan", ["ranges", "walk"])
@pytest.mark.parametrize("who", sorted(ACCESSES))
def test_walk_equals_oracle_for_every_filter(rb: redis.Redis, who: str, plan: str) -> None:
    fleet = random_fleet(seed=7)
    write_rows(rb, fleet)
    # tiny budgets exercise resumes; "walk" makes every cluster walk its sources and test
    # members against the access (the plan wide callers get) instead of visiting ranges
    forced = {"walk_min_ranges": 1, "range_cost": 1e9} if plan == "walk" else {}
    reader = Reader(rb, KINDS, budget=40, window=2, max_batch=2, **forced)
    for f in FILTERS:
        expected = visible(fleet, ACCESSES[who], **f)
        for limit in (1, 7, 500):
            got, _ = walk(reader, ACCESSES[who], Filters(**f), limit)
            assert [order(r) for r in got] == [order(r) for r in expected], (who, f, limit)
        assert got == expected


def test_single_namespace_user_skips_other_clusters_and_rows(rb: redis.Redis) -> None:
    fleet = random_fleet(seed=3, clusters=6)
    write_rows(rb, fleet)
    page = Reader(rb, KINDS).page(ACCESSES["one-ns"], PageRequest(Filters(), 50))
    assert page.round_trips == 1
    assert page.scanned == len(page.rows) == len(visible(fleet, ACCESSES["one-ns"]))


def test_deep_page_costs_what_the_first_costs(rb: redis.Redis) -> None:
    rows = [
        make_row(f"c{c:02d}", f"ns{n:03d}", "Kustomization", f"k{i}")
        for c in range(3)
        for n in range(200)
        for i in range(5)
    ]
    write_rows(rb, rows)
    reader = Reader(rb, KINDS)
    admin = {f"c{c:02d}": FakeAccess(ALL) for c in range(3)}
    _, pages = walk(reader, admin, Filters(), 50)
    assert len(pages) == 60
    assert {p.scanned for p in pages[:-1]} == {51}
    assert {p.round_trips for p in pages} == {1, 2}  # 2 when a page spans two clusters
    team = {
        f"c{c:02d}": FakeAccess(namespaces={f"ns{n:03d}": ALL for n in range(0, 200, 20)})
        for c in range(3)
    }
    _, pages = walk(reader, team, Filters(), 10)
    assert {p.scanned for p in pages[:-1]} == {11}
    assert max(p.round_trips for p in pages) <= 2


def test_status_filter_reads_the_index_not_the_rows(rb: redis.Redis) -> None:
    rows = [
        make_row(
            "c00",
            f"ns{n:03d}",
            "HelmRelease",
            f"h{i}",
            "unhealthy" if i == 0 and n % 10 == 0 else "healthy",
        )
        for n in range(100)
        for i in range(10)
    ]
    write_rows(rb, rows)
    page = Reader(rb, KINDS).page(
        ACCESSES["admin"], PageRequest(Filters(statuses=("unhealthy",)), 50)
    )
    assert len(page.rows) == 10 and page.cursor is None
    assert page.scanned == 10


def test_exactly_once_while_rows_change_between_pages(rb: redis.Redis) -> None:
    fleet = random_fleet(seed=11)
    write_rows(rb, fleet)
    reader, admin = Reader(rb, KINDS), ACCESSES["admin"]
    stable = {order(r) for r in fleet[1::2]}  # odd rows are never touched
    seen: list = []
    cursor, step = None, 0
    while True:
        page = reader.page(admin, PageRequest(Filters(), 9, cursor))
        seen.extend(order(r) for r in page.rows)
        if page.cursor is None:
            break
        cursor, step = page.cursor, step + 1
        victim = fleet[2 * step % len(fleet)]  # delete an even row, insert a new one
        delete_row(rb, victim)
        write_rows(rb, [make_row(f"c{step % 4:02d}", "team-01", "Gateway", f"new-{step}")])
    assert len(seen) == len(set(seen)), "no row twice"
    assert stable <= set(seen), "every untouched row once"


@pytest.mark.parametrize("who", ["admin", "team", "mixed"])
def test_facets_equal_the_oracle(rb: redis.Redis, who: str) -> None:
    fleet = random_fleet(seed=5)
    write_rows(rb, fleet)
    reader = Reader(rb, KINDS, budget=30, window=2)
    for f in FILTERS:
        expected = visible(fleet, ACCESSES[who], **f)
        got = reader.facets(ACCESSES[who], Filters(**f))
        assert got.total == len(expected), (who, f)
        by_kind: dict[str, int] = {}
        for row in expected:
            by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + 1
        assert got.kinds == by_kind
        flags = {"true": sum(r["suspended"] for r in expected)}
        flags["false"] = len(expected) - flags["true"]
        assert got.suspended == {k: n for k, n in flags.items() if n}, (who, f)


def test_facets_use_the_counts_hash_for_cluster_wide_callers(rb: redis.Redis) -> None:
    write_rows(rb, random_fleet(seed=5))
    got = Reader(rb, KINDS).facets(ACCESSES["admin"], Filters(statuses=("unhealthy",)))
    assert got.scanned == 0 and got.total > 0


def test_suspended_filter_reads_the_suspended_index_not_the_rows(rb: redis.Redis) -> None:
    rows = [
        make_row("c00", f"ns{n:03d}", "HelmRelease", f"h{i}", "unhealthy", i == 0 and n % 10 == 0)
        for n in range(100)
        for i in range(10)
    ]
    write_rows(rb, rows)
    reader = Reader(rb, KINDS)
    page = reader.page(ACCESSES["admin"], PageRequest(Filters(suspended=True), 50))
    assert len(page.rows) == 10 and page.cursor is None and page.scanned == 10
    assert all(r["suspended"] for r in page.rows)
    # Unhealthy and not suspended: the status index, the suspended ones filtered out in Lua.
    page = reader.page(
        ACCESSES["admin"],
        PageRequest(Filters(statuses=("unhealthy",), suspended=False), 1000),
    )
    assert len(page.rows) == 990 and not any(r["suspended"] for r in page.rows)


def test_facets_namespaces_equal_the_oracle_whoever_asked_first(rb: redis.Redis) -> None:
    """The per-namespace counts are looked up by their text and the kinds the caller may list
    there: callers with other kinds, and other filters, asking the same texts after an admin
    each get their own counts (`facets._ROWS` keyed by both)."""
    fleet = random_fleet(seed=5)
    write_rows(rb, fleet)
    reader = Reader(rb, KINDS)
    for f in FILTERS:
        if f.get("name"):  # a name filter counts rows, not the per-namespace counts
            continue
        for who in ("admin", "mixed", "team", "one-ns"):
            expected: dict[str, int] = {}
            for row in visible(fleet, ACCESSES[who], **f):
                expected[row["namespace"]] = expected.get(row["namespace"], 0) + 1
            got = reader.facets(ACCESSES[who], Filters(**f))
            assert got.namespaces == expected, (who, f)


def test_a_cluster_wide_callers_namespaces_decode_each_counts_text_once(
    rb: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 namespaces of 3 clusters holding two different mixes of rows: a cluster admin's
    first facets decode the two counts texts, not the 900 namespaces' counts (at fleet L ~43,000
    distinct texts over ~400,000 namespaces: most of an admin's first facets' CPU)."""
    from common.index import nscounts
    from common.index.read import facets

    rows = [
        make_row(f"c{c:02d}", f"ns{n:03d}", kind, f"o{i}")
        for c in range(3)
        for n in range(300)
        for kind in (("Kustomization",) if n % 2 else ("Kustomization", "HelmRelease"))
        for i in range(2)
    ]
    write_rows(rb, rows)
    decoded: list[str] = []
    real = nscounts.decode

    def counting(value):  # type: ignore[no-untyped-def]
        decoded.append(value)
        return real(value)

    monkeypatch.setattr(nscounts, "decode", counting)
    facets._ROWS.clear()
    admin = {f"c{c:02d}": FakeAccess(ALL) for c in range(3)}
    got = Reader(rb, KINDS).facets(admin, Filters())
    assert got.namespaces == {f"ns{n:03d}": 6 if n % 2 else 12 for n in range(300)}
    assert len(decoded) == len(set(decoded)) == 2
