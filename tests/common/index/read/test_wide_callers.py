"""Callers with many namespaces: facets from count tables (common.index.read.tally) are exactly what a
walk of the same filters returns, for random grants and through writes, and facets and pages
cost a fixed handful of Redis commands whatever the number of namespaces or rows behind them."""

from __future__ import annotations

import random

import pytest
import redis

from common.index import keys, nscounts
from common.index.read import facets as reader_facets
from common.index.read.reader import Facets, Filters, PageRequest, Reader
from tests.support.costs import commands, count_round_trips
from tests.support.index_fleet import (
    KINDS,
    NAMESPACED,
    FakeAccess,
    delete_row,
    make_row,
    random_fleet,
    write_rows,
)

ALL = frozenset(KINDS)


def walked(reader: Reader, access, filters: Filters) -> Facets:
    """The facets a walk of every page counts: the oracle."""
    out = Facets()
    cursor = None
    while True:
        page = reader.page(access, PageRequest(filters, 97, cursor))
        for row in page.rows:
            reader_facets.add(out, row["cluster"], row["kind"], row["status"], row["suspended"], 1)
        if page.cursor is None:
            return out
        cursor = page.cursor


def random_access(rng: random.Random, clusters: list[str], namespaces: list[str]) -> dict:
    def kinds() -> frozenset[str]:
        return frozenset(rng.sample(KINDS, rng.randint(1, len(KINDS))))

    out = {}
    for c in clusters:
        if rng.random() < 0.2:
            continue
        cw = kinds() if rng.random() < 0.4 else frozenset()
        grants = {ns: kinds() for ns in rng.sample(namespaces, rng.randint(0, len(namespaces)))}
        if cw or grants:
            out[c] = FakeAccess(cw, grants)
    return out


def random_filters(rng: random.Random, namespaces: list[str]) -> Filters:
    pick = rng.random
    return Filters(
        clusters=tuple(rng.sample(["c00", "c01", "c02", "c03"], 2)) if pick() < 0.2 else (),
        namespaces=tuple(rng.sample(namespaces, rng.randint(1, 3))) if pick() < 0.3 else (),
        kinds=tuple(rng.sample(KINDS, rng.randint(1, 3))) if pick() < 0.3 else (),
        statuses=tuple(rng.sample(["healthy", "unhealthy", "progressing", "unknown"], 2))
        if pick() < 0.4
        else (),
        suspended=rng.choice([None, None, True, False]),
    )


def same(a: Facets, b: Facets) -> bool:
    return (a.total, a.clusters, a.kinds, a.statuses, a.suspended) == (
        b.total,
        b.clusters,
        b.kinds,
        b.statuses,
        b.suspended,
    )


@pytest.mark.parametrize("seed", range(5))
def test_facets_equal_the_walk_for_random_grants_through_writes(
    rb: redis.Redis, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    fleet = random_fleet(seed=seed, namespaces=15)
    write_rows(rb, fleet)
    namespaces = sorted({r["namespace"] for r in fleet} | {"nowhere"})
    clusters = ["c00", "c01", "c02", "c03"]
    reader = Reader(rb, KINDS)
    accesses = [random_access(rng, clusters, namespaces) for _ in range(6)]
    # the same filters asked again after writes: the last answer with the written clusters'
    # tables swapped (counted below), which must equal a sum from scratch
    fixed = [Filters(), Filters(statuses=("unhealthy",)), Filters(kinds=(NAMESPACED[0],))]
    swaps = []
    real_copy = reader_facets._copy_facets
    monkeypatch.setattr(reader_facets, "_copy_facets", lambda f: swaps.append(1) or real_copy(f))
    for step in range(8):
        for access in accesses:
            for f in [*fixed, *(random_filters(rng, namespaces) for _ in range(3))]:
                got = reader.facets(access, f)
                assert got.scanned == 0, "summed from the tables, no row scanned"
                assert same(got, walked(reader, access, f)), (seed, step, access, f)
        # writes between rounds: remembered tables of the written clusters must not be reused
        victims = rng.sample(fleet, 5)
        for row in victims:
            delete_row(rb, row)
            fleet.remove(row)
        new = [
            make_row(
                rng.choice(clusters),
                rng.choice(namespaces[1:]),
                rng.choice(NAMESPACED),
                f"new-{step}-{i}",
                rng.choice(["healthy", "unhealthy", "progressing"]),
                rng.random() < 0.2,
            )
            for i in range(5)
        ]
        write_rows(rb, new)
        fleet.extend(new)
    assert len(swaps) > 20


def test_clusters_without_complete_counts_are_counted_by_scanning(rb: redis.Redis) -> None:
    fleet = random_fleet(seed=2)
    write_rows(rb, fleet)
    rb.hdel(keys.sync("c01"), nscounts.READY)  # as before its first full sync with them
    rb.incr(keys.generation("c01"))
    access = {c: FakeAccess(namespaces={"team-01": ALL, "ns0": ALL}) for c in ("c00", "c01")}
    reader = Reader(rb, KINDS)
    got = reader.facets(access, Filters())
    assert same(got, walked(reader, access, Filters()))
    assert 0 < got.scanned == got.clusters["c01"]


# -- the cost for a caller with 1,500 namespaces on each cluster ------------------------------

WIDE_CLUSTERS = ["w0", "w1", "w2"]


@pytest.fixture
def wide_fleet(rb: redis.Redis) -> dict[str, FakeAccess]:
    rows = [
        make_row(
            c, f"ns-{n:04d}", "Kustomization", "app", "unhealthy" if n % 20 == 0 else "healthy"
        )
        for c in WIDE_CLUSTERS
        for n in range(2000)
    ]
    write_rows(rb, rows)
    grant = frozenset({"Kustomization", "HelmRelease", "GitRepository"})
    return {
        c: FakeAccess(namespaces={f"ns-{n:04d}": grant for n in range(1500)}) for c in WIDE_CLUSTERS
    }


@pytest.mark.standalone_only
def test_facets_of_a_1500_namespace_caller_cost_one_mget_when_nothing_changed(
    rb: redis.Redis, wide_fleet: dict[str, FakeAccess], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = Reader(rb, KINDS)
    trips = count_round_trips(monkeypatch)
    rb.config_resetstat()
    trips.clear()
    cold = reader.facets(wide_fleet, Filters())
    assert cold.total == 3 * 1500 and cold.statuses == {"healthy": 3 * 1425, "unhealthy": 3 * 75}
    assert cold.scanned == 0
    # Cold: the generations, then each cluster's table: its generation, the counts' readiness
    # and one HMGET per bucket of per-namespace counts (64), whatever the number of namespaces.
    assert trips == ["pipeline", "pipeline"]
    cmds = commands(rb)
    assert cmds["mget"] == 1 and cmds["get"] == 3 and cmds["hget"] == 3
    assert cmds["hmget"] <= 3 * nscounts.BUCKETS
    assert set(cmds) == {"mget", "get", "hget", "hmget"}
    # Warm: one MGET of generations, in one round trip; any filter reuses the same tables.
    for f in (Filters(), Filters(statuses=("unhealthy",)), Filters(kinds=("Kustomization",))):
        rb.config_resetstat()
        trips.clear()
        computed = reader.tallies.computed
        got = reader.facets(wide_fleet, f)
        assert trips == ["pipeline"] and commands(rb) == {"mget": 1}
        assert reader.tallies.computed == computed
        assert got.scanned == 0
    assert reader.facets(wide_fleet, Filters(statuses=("unhealthy",))).total == 3 * 75
    # A write to one cluster: only its table is read again.
    write_rows(rb, [make_row("w1", "ns-0003", "HelmRelease", "new", "unhealthy")])
    computed = reader.tallies.computed
    got = reader.facets(wide_fleet, Filters(statuses=("unhealthy",)))
    assert reader.tallies.computed == computed + 1
    assert got.clusters == {"w0": 75, "w1": 76, "w2": 75}


@pytest.mark.standalone_only
def test_pages_of_a_1500_namespace_caller_walk_the_sources_in_one_round_trip(
    rb: redis.Redis, wide_fleet: dict[str, FakeAccess], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = Reader(rb, KINDS, pages_max=0)  # the scans themselves, not remembered pages
    for f in (Filters(), Filters(statuses=("unhealthy",)), Filters(kinds=("Kustomization",))):
        reader.page(wide_fleet, PageRequest(f, 50))  # warm: the index sizes (estimates) read
        rb.config_resetstat()
        trips = count_round_trips(monkeypatch)
        page = reader.page(wide_fleet, PageRequest(f, 50))
        assert len(page.rows) == 50 and page.cursor is not None
        # One ZRANGEBYLEX of the rows (or the status index) from the cursor, members tested
        # against the 1,500 namespaces in the client: not 1,500 ranges in the script.
        assert trips == ["pipeline"], f
        assert commands(rb) == {"zrangebylex": 1}, f
        assert page.scanned <= 2 * 51 if not f.statuses else page.scanned <= 128
        monkeypatch.undo()
    # and a walk across clusters resumes exactly: every visible unhealthy row once
    rows, cursor = [], None
    while True:
        page = reader.page(wide_fleet, PageRequest(Filters(statuses=("unhealthy",)), 40, cursor))
        rows.extend((r["cluster"], r["namespace"]) for r in page.rows)
        if page.cursor is None:
            break
        cursor = page.cursor
    assert len(rows) == len(set(rows)) == 3 * 75


@pytest.mark.standalone_only
def test_a_name_filter_for_a_1500_namespace_caller_reads_the_name_index_once_per_cluster(
    rb: redis.Redis, wide_fleet: dict[str, FakeAccess], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_rows(
        rb, [make_row("w2", f"ns-{n:04d}", "HelmRelease", "needle") for n in range(1490, 1510)]
    )
    reader = Reader(rb, KINDS, pages_max=0)  # the scans themselves, not remembered pages
    reader.page(wide_fleet, PageRequest(Filters(name="needle"), 50))  # warm: scripts loaded
    rb.config_resetstat()
    trips = count_round_trips(monkeypatch)
    page = reader.page(wide_fleet, PageRequest(Filters(name="needle"), 50))
    # 10 of the 20 needles are in the caller's namespaces (ns-1490..1499); one NAMED call per
    # cluster over the whole key space, members tested in the client: not a window of 128
    # ranges per round trip (12 of them for 1,500 namespaces)
    assert [(r["cluster"], r["namespace"]) for r in page.rows] == [
        ("w2", f"ns-{n:04d}") for n in range(1490, 1500)
    ]
    assert trips == ["pipeline"] and commands(rb)["evalsha"] == 3
