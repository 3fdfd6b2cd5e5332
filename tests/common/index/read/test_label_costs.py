"""Count guards for the label selector read path (the "label selector" query benchmark's
numbers): a selected page reads a bounded number of members and round trips for the rows it
finds, a repeated one costs one round trip, and facets counted from rows (a selector,
`labelKeys`) or from the per-namespace counts (`namespaces`) read a cluster again only after
it was written."""

from __future__ import annotations

from typing import Any

import redis

from common import labels
from common.index import keys
from common.index.read.reader import Filters, PageRequest, Reader
from tests.support.costs import count_round_trips
from tests.support.index_fleet import (
    KINDS,
    FakeAccess,
    fleet_labels,
    make_row,
    reindex_names,
    write_rows,
)
from tests.support.query_fleet import FORTY

ALL = frozenset(KINDS)
ADMIN = {c: FakeAccess(ALL) for c in FORTY}


def test_a_selected_page_reads_about_what_it_shows(wide: redis.Redis, monkeypatch) -> None:
    sel = labels.parse("tier=db")
    total = sum(wide.zcard(keys.rows(c)) for c in FORTY)
    trips = count_round_trips(monkeypatch)
    page = Reader(wide, KINDS).page(ADMIN, PageRequest(Filters(labels=sel), 50))
    assert len(page.rows) == 50
    assert all(r["labels"].get("tier") == "db" for r in page.rows)
    # About a third of the rows have tier=db: the page's 51 rows are found among ~150-300
    # members read (a cluster's chunk grows 4x a round trip), in a handful of round trips.
    assert page.scanned <= 400, page.scanned
    assert len(trips) <= 8, trips
    assert page.scanned < total / 2


def test_a_repeated_selected_page_is_one_round_trip(wide: redis.Redis, monkeypatch) -> None:
    r = Reader(wide, KINDS)
    req = PageRequest(Filters(labels=labels.parse("tier in (db,web),team")), 20)
    first = r.page(ADMIN, req)
    trips = count_round_trips(monkeypatch)
    again = r.page(ADMIN, req)
    assert again.members == first.members and len(trips) == 1


def test_selector_and_label_facets_read_only_written_clusters(wide: redis.Redis) -> None:
    r = Reader(wide, KINDS)
    f = Filters(labels=labels.parse("tier"))
    asked = ("tier", "team")
    first = r.facets(ADMIN, f, label_keys=asked)
    assert r.extras.reads == len(FORTY) and first.scanned > 0
    again = r.facets(ADMIN, f, label_keys=asked)
    assert r.extras.reads == len(FORTY) and again.scanned == 0
    assert (again.total, again.namespaces, again.labels) == (
        first.total,
        first.namespaces,
        first.labels,
    )
    write_rows(wide, [make_row(FORTY[3], "team-00", "Kustomization", "new-one")])
    reindex_names(wide, [FORTY[3]])
    moved = r.facets(ADMIN, f, label_keys=asked)
    assert r.extras.reads == len(FORTY) + 1  # only the written cluster
    added = fleet_labels("team-00", "Kustomization", "new-one")
    assert moved.total == first.total + (1 if "tier" in added else 0)


def test_namespace_facets_come_from_the_counts(wide: redis.Redis, monkeypatch) -> None:
    r = Reader(wide, KINDS)
    first = r.facets(ADMIN, Filters())
    assert first.namespaces == {"team-00": 400, "team-01": 400, "team-02": 400}
    assert first.scanned == 0 and r.extras.reads == len(FORTY)
    trips = count_round_trips(monkeypatch)
    again = r.facets(ADMIN, Filters())
    assert again.namespaces == first.namespaces
    assert len(trips) == 1 and r.extras.reads == len(FORTY)  # the generations' MGET only


def test_a_repeated_label_facets_answer_sums_no_cluster_again(
    wide: redis.Redis, monkeypatch
) -> None:
    """While no cluster was written, the same caller's label facets are the answer counted
    before (summing every cluster's part was the request's cost at 1,000 clusters)."""
    from common.index.read import facets

    r = Reader(wide, KINDS)
    f, asked = Filters(), ("tier",)
    first = r.facets(ADMIN, f, label_keys=asked)
    summed: list[str] = []
    real = facets._add_part

    def counted(out: Any, c: str, *a: Any) -> None:
        if len(a) < 3 or a[2] > 0:  # added (not taken away)
            summed.append(c)
        real(out, c, *a)

    monkeypatch.setattr(facets, "_add_part", counted)
    again = r.facets(ADMIN, f, label_keys=asked)
    assert summed == [] and again.scanned == 0
    assert (again.total, again.labels) == (first.total, first.labels)
    write_rows(wide, [make_row(FORTY[3], "team-00", "Kustomization", "new-one")])
    reindex_names(wide, [FORTY[3]])
    moved = r.facets(ADMIN, f, label_keys=asked)
    # the answer moved by the written cluster's part: no other cluster's summed again
    assert moved.total == first.total + 1 and summed == [FORTY[3]]
