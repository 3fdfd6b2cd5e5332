"""The `name` substring filter through the name index (common.index.read.lua.NAMED, NAMED_COUNT) on a
real Redis: pages and facets equal the oracle through the index, through its dense fallback and
without an index; a page or a count reads only the rows whose names match (counts, not timings)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.index import keys
from common.index.read import reader
from common.index.read.reader import Filters, PageRequest, Reader
from tests.common.index.read.fleets import ACCESSES, walk
from tests.support.index_fleet import KINDS, make_row, order, random_fleet, visible, write_rows

NAME_FILTERS = [
    {"name": "app-1"},
    {"name": "-3"},
    {"name": "p-7"},
    {"name": "nothing"},
    {"name": "app", "statuses": ("unhealthy", "suspended")},
    {"name": "1", "statuses": ("healthy", "progressing"), "kinds": ("HelmRelease", "Gateway")},
    {"name": "app-2", "namespaces": ("team-01", "team-02", "ns3")},
]


def check_oracle(rb: redis.Redis, fleet: list, reader_: Reader) -> None:
    for who, access in ACCESSES.items():
        for f in NAME_FILTERS:
            expected = visible(fleet, access, **f)
            facets = reader_.facets(access, Filters(**f))
            assert facets.total == len(expected), (who, f)
            assert facets.clusters == count(r["cluster"] for r in expected)
            assert facets.kinds == count(r["kind"] for r in expected)
            assert facets.statuses == count(r["status"] for r in expected)
            for limit in (1, 7, 500):
                got, _ = walk(reader_, access, Filters(**f), limit)
                assert [order(r) for r in got] == [order(r) for r in expected], (who, f, limit)
            assert got == expected


def count(values: Iterator[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def test_index_pages_and_facets_equal_the_oracle(rb: redis.Redis) -> None:
    fleet = random_fleet(seed=21)
    write_rows(rb, fleet)
    check_oracle(rb, fleet, Reader(rb, KINDS, budget=40, window=2, max_batch=2))


def test_dense_fallback_equals_the_oracle(rb: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "NAME_DENSE", 3)  # most clusters scan, a few use the index
    fleet = random_fleet(seed=22)
    write_rows(rb, fleet)
    check_oracle(rb, fleet, Reader(rb, KINDS, budget=40, window=2, max_batch=2))


def test_without_an_index_the_rows_are_scanned(rb: redis.Redis) -> None:
    fleet = random_fleet(seed=23)
    write_rows(rb, fleet)
    for c in {r["cluster"] for r in fleet}:
        rb.delete(keys.names(c))
    check_oracle(rb, fleet, Reader(rb, KINDS))


def test_a_name_filtered_page_reads_only_matching_rows(rb: redis.Redis) -> None:
    fleet = [
        make_row("c00", f"ns-{n:02d}", kind, f"web-{i}")
        for n in range(40)
        for kind in KINDS
        for i in range(10)
    ]  # 2,000 rows, none named like "vm"
    vm = [make_row("c00", f"ns-{n:02d}", "Gateway", "vmagent") for n in (3, 17, 31)]
    write_rows(rb, fleet + vm)
    admin = {"c00": ACCESSES["admin"]["c00"]}
    page = Reader(rb, KINDS).page(admin, PageRequest(Filters(name="vm"), 50))
    assert [r["namespace"] for r in page.rows] == ["ns-03", "ns-17", "ns-31"]
    assert page.scanned == 3 and page.cursor is None
    page = Reader(rb, KINDS).page(admin, PageRequest(Filters(name="vm"), 2))
    assert page.scanned == 3 and page.cursor is not None  # limit + 1: is there a next page
    page = Reader(rb, KINDS).page(admin, PageRequest(Filters(name="vm"), 2, page.cursor))
    assert [r["namespace"] for r in page.rows] == ["ns-31"] and page.scanned == 1
    assert Reader(rb, KINDS).facets(admin, Filters(name="vm")).scanned == 3
    solo = {"c00": type(admin["c00"])(namespaces={"ns-17": frozenset(KINDS)})}
    page = Reader(rb, KINDS).page(solo, PageRequest(Filters(name="vm"), 50))
    assert [r["namespace"] for r in page.rows] == ["ns-17"] and page.scanned <= 1


def test_a_name_matching_nothing_reads_no_rows(rb: redis.Redis) -> None:
    write_rows(rb, random_fleet(seed=24))
    page = Reader(rb, KINDS).page(ACCESSES["admin"], PageRequest(Filters(name="zzz"), 50))
    assert page.rows == [] and page.scanned == 0
    assert page.round_trips == 1  # the first round trip reads 4 clusters under a name filter


def test_the_index_matches_names_case_insensitively(rb: redis.Redis) -> None:
    write_rows(rb, [make_row("c00", "a", "Gateway", n) for n in ("VMAgent", "web", "my-vm")])
    admin = {"c00": ACCESSES["admin"]["c00"]}
    page = Reader(rb, KINDS).page(admin, PageRequest(Filters(name="vm"), 50))
    assert [r["name"] for r in page.rows] == ["VMAgent", "my-vm"] and page.scanned == 2
