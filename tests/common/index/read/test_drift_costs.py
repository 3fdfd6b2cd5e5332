"""Count guards for `drift=true` and group revisions (common.index.read.groups,
common.index.revisions) against a real Redis with rows written by the store: revisions come
with the status codes (no extra round trip), a repeated drift page is one round trip, a page
makes at most `DRIFT_LOOKUPS_MAX` lookups (groups x clusters) and the walk still shows each drifting group once;
walks match an oracle from the stored rows; more than five revisions are counted in
`otherRevisions`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common.index import rows
from common.index.read import groups as reader_groups
from common.index.read.groups import GroupReader
from common.index.read.reader import Filters, Reader
from common.index.write import store
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, NAMESPACED, TEAM, status_of
from tests.support.index_fleet import KINDS, FakeAccess
from tests.support.rowfactory import row

DRIFT = Filters(drift=True)
REV_AT = rows.FIELDS.index("revision")


def revision_of(cluster: str, i: int) -> str:
    """Object 0 runs one revision per cluster (eight), every third a rollout (two), the
    rest one revision; every fifth none (a kind without revisions)."""
    c = int(cluster[1:])
    if i == 0:
        return f"1.{c}.0"
    if i % 5 == 0:
        return ""
    if i % 3 == 0:
        return "2.0.0" if c % 3 else "1.9.0"
    return "2.0.0"


def members(cluster: str, flip: int | None = None) -> list[str]:
    out = []
    for i in range(34):
        if (i + int(cluster[1:])) % 9 == 0 and i:
            continue  # not every object is everywhere
        status = status_of(cluster, i)
        if i == flip:
            status = "healthy" if status == "unhealthy" else "unhealthy"
        r = row(cluster, f"team-{i % 4:02d}", NAMESPACED[i % 5], f"app-{i}", status)
        r["revision"] = revision_of(cluster, i)
        out.append(rows.encode(r))
    return out


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url, members)


def oracle(r: redis.Redis, access: dict[str, FakeAccess], f: Filters) -> list[Any]:
    """(key, Counter of revisions) of every drifting object group the caller may list."""
    per: dict[bytes, Counter[str]] = {}
    for c, a in access.items():
        for m in r.zrange(f"fs:{{c:{c}}}:rows", 0, -1):
            fields = m.decode().split("\x00")
            ns, kind, name, code = fields[:4]
            if kind not in a.cluster_wide | a.namespaces.get(ns, frozenset()):
                continue
            if f.statuses and rows.CODE_STATUS[code] not in f.statuses:
                continue
            key = rows.sort_key(ns, kind, name).encode()
            per.setdefault(key, Counter())[fields[REV_AT]] += 1
    return sorted((k, n) for k, n in per.items() if len(set(n) - {""}) > 1)


def walk(g: GroupReader, access: Any, f: Filters, limit: int) -> list[Any]:
    got, cursor = [], None
    while True:
        page = g.page(access, f, "object", limit, cursor)
        got += [(grp.key, Counter(m.revision for m in grp.clusters)) for grp in page.groups]
        cursor = page.cursor
        if cursor is None:
            return got


@pytest.mark.parametrize("who", ["admin", "team"])
@pytest.mark.parametrize("f", [DRIFT, Filters(statuses=("healthy",), drift=True)])
def test_drift_walks_match_the_oracle(fleet: redis.Redis, who: str, f: Filters) -> None:
    access = ADMIN if who == "admin" else TEAM
    want = oracle(fleet, access, f)
    assert want
    for limit in (1, 3, 50):
        got = walk(GroupReader(Reader(fleet, KINDS)), access, f, limit)
        assert len(got) == len({k for k, _ in got}), limit
        assert sorted(got) == want, limit


def test_revisions_come_with_the_status_codes(fleet: redis.Redis) -> None:
    """A drift page that examines every group in one batch costs what a plain page of as
    many groups does (or less): the revisions ride on the status codes' script calls."""
    plain = GroupReader(Reader(fleet, KINDS)).page(ADMIN, Filters(), "object", 60)
    drift_reader = GroupReader(Reader(fleet, KINDS))
    drift = drift_reader.page(ADMIN, DRIFT, "object", 60)
    assert drift.groups and plain.cursor is None and drift.cursor is None
    assert drift.round_trips <= plain.round_trips
    assert drift_reader.lookups == len(CLUSTERS)  # one script call per cluster
    again = drift_reader.page(ADMIN, DRIFT, "object", 60)
    assert again.round_trips == 1 and again.groups is drift.groups


def test_a_page_examines_at_most_the_budget(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `DRIFT_LOOKUPS_MAX` lookups (groups x clusters) a page ends early with a continue; the walk still shows
    every drifting group once."""
    monkeypatch.setattr(reader_groups, "DRIFT_LOOKUPS_MAX", 4 * len(CLUSTERS))  # 4 groups
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(ADMIN, DRIFT, "object", 50)
    assert first.cursor is not None and len(first.groups) <= 4
    assert sorted(walk(groups, ADMIN, DRIFT, 50)) == oracle(fleet, ADMIN, DRIFT)


def test_more_than_five_revisions_are_counted_apart(fleet: redis.Redis) -> None:
    groups = GroupReader(Reader(fleet, KINDS))
    key = rows.sort_key("team-00", NAMESPACED[0], "app-0").encode()
    g = next(g for g in walk_groups(groups) if g.key == key)
    revs = g.revisions()
    assert len(g.clusters) == len(CLUSTERS)
    # one cluster each: a tie, by revision text; three more revisions on three clusters
    assert revs.top == tuple((f"1.{c}.0", 1) for c in range(5))
    assert (revs.other_revisions, revs.other_clusters) == (3, 3)
    assert revs.json()["otherRevisions"] == {"revisions": 3, "clusters": 3}


def walk_groups(groups: GroupReader) -> list[Any]:
    out, cursor = [], None
    while True:
        page = groups.page(ADMIN, DRIFT, "object", 50, cursor)
        out += page.groups
        if (cursor := page.cursor) is None:
            return out


def test_a_drifting_group_that_moves_during_the_walk_is_not_shown_twice(
    fleet: redis.Redis,
) -> None:
    """A status change moves a group in the order (its unhealthy count); the drift walk skips
    it on later pages as every group walk does, so it is never shown twice."""
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(ADMIN, DRIFT, "object", 2)
    assert first.cursor is not None
    shown = next(g for g in first.groups if g.order > 0)  # unhealthy somewhere: shown early
    i = int(shown.name.split("-")[1])
    c = next(m.cluster for m in shown.clusters if m.status == "unhealthy")
    store.replace_rows(fleet, c, members(c, flip=i))  # it recovers there: it moves later
    rest, cursor = [], first.cursor
    while cursor is not None:
        page = groups.page(ADMIN, DRIFT, "object", 2, cursor)
        rest += [g.key for g in page.groups]
        cursor = page.cursor
    assert shown.key not in rest
    assert len(rest) == len(set(rest))
