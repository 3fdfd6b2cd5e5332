"""After a storm (every cluster written at once, as a Redis failover or a watcher's re-list does),
what a count over every cluster reads again is read and folded a chunk of clusters at a time
(count tables, a cluster admin's namespace shares, the groups' unhealthy indexes), so a query
worker never holds the whole fleet's fresh reads beside the entries they replace
(docs/operations.md, "Where the arenas level off"). Guards: the chunks' sizes, and answers
equal to an oracle built from the rows, against a real Redis with rows written by the store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common.index import keys, rows
from common.index.read import facets as facets_mod
from common.index.read import groups as groups_mod
from common.index.read import tally
from common.index.read.groups import GroupReader
from common.index.read.reader import Filters, Reader
from common.index.write import store
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, TEAM, members
from tests.common.index.read.fleets import groups_oracle as group_oracle
from tests.support.index_fleet import KINDS, FakeAccess

CHUNK = 3  # of the 8 clusters: chunks of 3, 3 and 2


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url)


def storm(r: redis.Redis, flip: int) -> None:
    """A status transition on every cluster (of an object it holds: fleets.members leaves
    object i out of cluster c when i + c is a multiple of 9)."""
    for c in CLUSTERS:
        i = flip if (flip + int(c[1:])) % 9 else flip + 1
        store.replace_rows(r, c, members(c, flip=i))


def counted(r: redis.Redis, access: dict[str, FakeAccess]) -> dict[str, Counter[str]]:
    """The oracle: visible rows by cluster, status and namespace, from the rows."""
    out: dict[str, Counter[str]] = {"clusters": Counter(), "statuses": Counter(), "ns": Counter()}
    for c, a in access.items():
        for m in r.zrange(f"fs:{{c:{c}}}:rows", 0, -1):
            ns, kind, _name, code, _ = m.decode().split("\x00", 4)
            if kind in a.cluster_wide | a.namespaces.get(ns, frozenset()):
                out["clusters"][c] += 1
                out["statuses"][rows.CODE_STATUS[code]] += 1
                out["ns"][ns] += 1
    return out


def sizes_of(monkeypatch: pytest.MonkeyPatch, cls: Any, name: str, arg: int) -> list[int]:
    """The number of clusters each call of `cls.name` was given (its positional `arg`)."""
    seen: list[int] = []
    real = getattr(cls, name)

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        seen.append(len(a[arg]))
        return real(self, *a, **k)

    monkeypatch.setattr(cls, name, spy)
    return seen


@pytest.mark.parametrize("who", ["admin", "team"])
def test_facets_after_a_storm_are_read_a_chunk_at_a_time(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    monkeypatch.setattr(tally, "COMPUTE_CHUNK", CHUNK)
    monkeypatch.setattr(facets_mod, "WHOLE_CHUNK", CHUNK)
    tables = sizes_of(monkeypatch, tally.Tallies, "_compute", 0)
    shares = sizes_of(monkeypatch, facets_mod.Extras, "_cluster_namespaces", 0)
    access = ADMIN if who == "admin" else TEAM
    reader = Reader(fleet, KINDS)
    for flip in (None, 5, 7, 5):
        if flip is not None:
            storm(fleet, flip)
        tables.clear()
        shares.clear()
        got = reader.facets(access, Filters())
        want = counted(fleet, access)
        assert got.clusters == dict(want["clusters"]), flip
        assert got.statuses == dict(want["statuses"]), flip
        assert {ns: n for ns, n in got.namespaces.items() if n} == dict(want["ns"]), flip
        # every cluster's table read again (each one was written), a chunk a round trip
        assert sorted(tables) == [2, 3, 3], flip
        assert shares and max(shares) <= CHUNK and sum(shares) == len(CLUSTERS), flip


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_group_pages_after_a_storm_read_the_indexes_a_chunk_at_a_time(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    """A storm the clusters' feeds can say moves each cluster's unhealthy part by its feed, a
    chunk of feeds a round trip; one they cannot (trimmed, as after a Redis rebuild) has every
    index read again, a chunk a round trip."""
    monkeypatch.setattr(groups_mod, "INDEX_CHUNK", CHUNK)
    indexes = sizes_of(monkeypatch, GroupReader, "_indexes", 0)
    follows = sizes_of(monkeypatch, Reader, "follow", 0)
    moved: list[int] = []
    real_moved = groups_mod._keys_moved

    def spy(*a: Any) -> Any:
        moved.append(1)
        return real_moved(*a)

    monkeypatch.setattr(groups_mod, "_keys_moved", spy)
    groups = GroupReader(Reader(fleet, KINDS))
    for flip, trimmed in ((None, False), (5, False), (7, True), (8, False)):
        before = tally.status_generations(fleet, CLUSTERS)[0]
        if flip is not None:
            storm(fleet, flip)
        after = tally.status_generations(fleet, CLUSTERS)[0]
        written = sum(a != b for a, b in zip(before, after, strict=True))
        if trimmed:
            for c in CLUSTERS:
                fleet.delete(keys.feed(c))
        indexes.clear()
        follows.clear()
        moved.clear()
        page = groups.page(ADMIN, Filters(), by, 50)
        got = [(g.order, g.key, [(m.cluster, m.status) for m in g.clusters]) for g in page.groups]
        assert got == group_oracle(fleet, ADMIN, by, Filters())[:50], flip
        if flip is None or trimmed:  # every cluster's index read (new), a chunk at a time
            assert indexes and max(indexes) <= CHUNK, flip
            assert sum(indexes) >= len(CLUSTERS), flip
        else:  # every cluster moved by its feed, none read
            assert not indexes and len(moved) == written >= len(CLUSTERS) - 1, flip
            if by == "object":  # (namespace pages follow feeds for their counts too)
                assert follows and max(follows) <= CHUNK, flip


@pytest.mark.parametrize("read", ["feeds", "indexes"])
def test_a_chunk_failing_mid_page_leaves_the_counts_true(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """Redis lost between two chunks: the page fails, and the next one (Redis back) counts
    each cluster once, the chunks replaced before the failure included."""
    monkeypatch.setattr(groups_mod, "INDEX_CHUNK", CHUNK)
    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(ADMIN, Filters(), "object", 50)
    storm(fleet, 5)
    if read == "indexes":  # the feeds cannot say: every index is read again
        for c in CLUSTERS:
            fleet.delete(keys.feed(c))
    cls, name = (GroupReader, "_indexes") if read == "indexes" else (Reader, "follow")
    real, calls = getattr(cls, name), []

    def failing(self: Any, *a: Any, **k: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise redis.ConnectionError("lost between two chunks")
        return real(self, *a, **k)

    monkeypatch.setattr(cls, name, failing)
    with pytest.raises(redis.ConnectionError):
        groups.page(ADMIN, Filters(), "object", 50)
    monkeypatch.setattr(cls, name, real)
    page = groups.page(ADMIN, Filters(), "object", 50)
    got = [(g.order, g.key, [(m.cluster, m.status) for m in g.clusters]) for g in page.groups]
    assert got == group_oracle(fleet, ADMIN, "object", Filters())[:50]
