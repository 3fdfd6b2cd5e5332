"""What the reader tests share: who asks the random fleet of tests.support.index_fleet
(ACCESSES, per-cluster accesses) and a walk of the reader's pages; the group-cost fleet's
clusters, each object's status on each, its rows (`members`), and its admin and team callers;
a message-only rewrite of a cluster's first row (`reworded`) and the commands counted since the
last reset (`costs`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

from common.index import keys, rows
from common.index.read.groups import RANK
from common.index.read.reader import Filters, PageRequest, Reader
from common.index.read.tally import code_status
from common.index.write import store, store_events
from common.redis_client import text
from tests.support import topology
from tests.support.index_fleet import KINDS, FakeAccess
from tests.support.rowfactory import row
from tests.support.waiting import wait_for

ALL = frozenset(KINDS)
ACCESSES = {
    "admin": {f"c{i:02d}": FakeAccess(ALL) for i in range(4)},
    "team": {
        "c01": FakeAccess(namespaces={"team-01": ALL, "team-05": frozenset({"HelmRelease"})}),
        "c03": FakeAccess(namespaces={"ns0": ALL, "team-10": ALL, "team-11": ALL}),
    },
    "mixed": {
        "c00": FakeAccess(frozenset({"Gateway"}), {"team-02": ALL, "ns3": frozenset({"Gateway"})}),
        "c02": FakeAccess(frozenset({"Kustomization", "HelmRelease"}), {"team-04": ALL}),
    },
    "one-ns": {"c02": FakeAccess(namespaces={"team-07": ALL})},
    "nobody": {},
}


def walk(reader: Reader, access, filters: Filters, limit: int) -> tuple[list, list]:
    rows, pages, cursor = [], [], None
    while True:
        page = reader.page(access, PageRequest(filters, limit, cursor))
        rows.extend(page.rows)
        pages.append(page)
        if page.cursor is None:
            return rows, pages
        assert len(page.rows) == limit, "a page is full unless it is the last"
        cursor = page.cursor


CLUSTERS = [f"c{i:02d}" for i in range(8)]
NAMESPACED = KINDS[:-1]


def status_of(cluster: str, i: int) -> str:
    k = (i * 7 + int(cluster[1:]) * 3) % 23
    return "unhealthy" if k < 3 else "progressing" if k == 3 else "healthy"


def members(cluster: str, flip: int | None = None) -> list[str]:
    """About 30 objects per cluster, most on every cluster (so groups span clusters)."""
    out = []
    for i in range(34):
        if (i + int(cluster[1:])) % 9 == 0:
            continue  # not every object is everywhere
        status = status_of(cluster, i)
        if i == flip:
            status = "healthy" if status == "unhealthy" else "unhealthy"
        r = row(cluster, f"team-{i % 4:02d}", NAMESPACED[i % 5], f"app-{i % 11}", status)
        out.append(rows.encode(r))
    return out


ADMIN = {c: FakeAccess(frozenset(KINDS)) for c in CLUSTERS}
TEAM = {  # two namespaces on half of the clusters, and one kind only on the others
    c: FakeAccess(
        frozenset(),
        {"team-01": frozenset(KINDS), "team-02": frozenset(KINDS)}
        if i % 2
        else {"team-01": frozenset({NAMESPACED[1]})},
    )
    for i, c in enumerate(CLUSTERS)
}


def stored(
    redis_url: str, members_of: Callable[[str], list[str]] = members
) -> Iterator[redis.Redis]:
    """A client of `redis_url` holding every cluster's rows (`members_of`), closed after.
    Returns once the clock has left the millisecond of the last write: an untimed row's time
    index score is when it was written, and a group walk begun in that same millisecond counts
    such rows as changed during the walk (at or after its start) and rightly skips their groups
    on its later pages, which a walk's oracle here does not expect."""
    r = topology.client(redis_url)
    for c in CLUSTERS:
        store.replace_rows(r, c, members_of(c))
    written_ms = int(time.time() * 1000)
    wait_for(lambda: int(time.time() * 1000) > written_ms, 5.0, "the clock", interval_s=0.0005)
    yield r
    r.close()


def reworded(r: redis.Redis, cluster: str, message: str) -> None:
    m = text(r.zrange(keys.rows(cluster), 0, 0)[0])
    row = rows.decode(cluster, m)
    row["message"] = message
    change = store_events.Change.of(rows.encode(row, rows.edges_of(m)))
    assert store_events.apply_changes(r, cluster, [change]).updated == 1


def costs(r: redis.Redis) -> dict[str, int]:
    stats = topology.commandstats(r)
    stats.pop("config|resetstat", None)
    return dict(stats)


def groups_oracle(r: redis.Redis, access: dict[str, FakeAccess], by: str, f: Filters) -> list[Any]:
    """The group pages' oracle: (unhealthy clusters, key, [(cluster, status)...]) of every
    group, in order, grouped from the rows."""
    per: dict[bytes, dict[str, list[str]]] = {}
    for c, a in access.items():
        if f.clusters and c not in f.clusters:
            continue
        for m in r.zrange(f"fs:{{c:{c}}}:rows", 0, -1):
            ns, kind, name, code, _ = m.decode().split("\x00", 4)
            status = rows.CODE_STATUS[code]
            if kind not in a.cluster_wide | a.namespaces.get(ns, frozenset()):
                continue
            if (f.statuses and status not in f.statuses) or (f.kinds and kind not in f.kinds):
                continue
            if (f.namespaces and ns not in f.namespaces) or (f.name and f.name not in name):
                continue
            if f.suspended is not None and code_status(code)[1] != f.suspended:
                continue
            key = rows.sort_key(ns, kind, name).encode() if by == "object" else ns.encode() + b"\0"
            per.setdefault(key, {}).setdefault(c, []).append(status)
    out = []
    for key, found in per.items():
        worst = sorted(
            ((c, min(ss, key=RANK.__getitem__)) for c, ss in found.items()),
            key=lambda p: (RANK[p[1]], p[0]),
        )
        unhealthy = sum(1 for ss in found.values() if "unhealthy" in ss)
        out.append((unhealthy, key, worst))
    out.sort(key=lambda g: (-g[0], g[1]))
    return out
