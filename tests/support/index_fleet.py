"""Test fleets written straight into Redis (rows, status indexes, counts, sync, grants-free).

Rows go in through `common.index.rows.encode` + ZADD (the name index and the per-namespace
counts rebuilt from them, the generation bumped as the writer does) so the reader and query
tests do not depend on the collector; `visible` is the oracle: which rows a caller sees,
computed without the reader; `row_of` reads one object's stored row back.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import redis

from common.index import keys, nscounts
from common.index.rows import Row, encode, sort_key
from common.index.write import name_index
from tests.support import rowfactory

NAMESPACED = ("Kustomization", "HelmRelease", "GitRepository", "VirtualService", "Gateway")
KINDS = (*NAMESPACED, "GatewayClass")  # GatewayClass is cluster-scoped: rows with namespace ""
STATUS_WEIGHTS = (
    ("healthy", 80),
    ("unhealthy", 8),
    ("progressing", 5),
    ("unknown", 3),
)


@dataclass(frozen=True)
class FakeAccess:
    """Stands in for common.rbac.grants.Access in reader tests."""

    cluster_wide: frozenset[str] = frozenset()
    namespaces: Mapping[str, frozenset[str]] = field(default_factory=dict)


def make_row(
    cluster: str, ns: str, kind: str, name: str, status: str = "healthy", suspended: bool = False
) -> Row:
    # as served: no transition time and no recorded transitions, so not known since when
    return rowfactory.row(
        cluster,
        ns,
        kind,
        name,
        status,
        suspended=suspended,
        message=f"msg {name}",
        failingSince=None,
        transitions24h=0,
        labels=fleet_labels(ns, kind, name),
    )


def fleet_labels(ns: str, kind: str, name: str) -> dict[str, str]:
    """Labels as a function of the identity (no random draws: the fleets stay as they were):
    most rows have an app name (some the object's own name), a tier on some, a team on the
    team namespaces' rows, and a few have none."""
    n = sum(name.encode()) + len(ns) + len(kind)
    if n % 7 == 0:
        return {}
    out = {"app.kubernetes.io/name": name if n % 5 == 0 else f"app{n % 4}"}
    if n % 3:
        out["tier"] = ("web", "db", "cache")[n % 3]
    if ns.startswith("team-"):
        out["team"] = ns
    if n % 11 == 0:
        out["example.com/release-x"] = str(n % 13)
    return out


def random_fleet(seed: int, clusters: int = 4, namespaces: int = 12, per_ns: int = 6) -> list[Row]:
    rnd = random.Random(seed)
    statuses = [s for s, w in STATUS_WEIGHTS for _ in range(w)]
    out = []
    for c in range(clusters):
        for g in range(2):  # cluster-scoped rows: an empty namespace, visible cluster-wide only
            out.append(
                make_row(f"c{c:02d}", "", "GatewayClass", f"class-{g}", rnd.choice(statuses))
            )
        for n in range(namespaces):
            ns = f"team-{n:02d}" if n % 3 else f"ns{n}"
            for i in range(rnd.randint(0, per_ns)):
                out.append(
                    make_row(
                        f"c{c:02d}",
                        ns,
                        rnd.choice(NAMESPACED),
                        f"app-{rnd.randint(0, 99)}-{i}",
                        rnd.choice(statuses),
                        rnd.random() < 0.05,
                    )
                )
    return out


def write_rows(r: redis.Redis, rows: Iterable[Row]) -> None:
    rows = list(rows)
    pipe = r.pipeline(transaction=False)
    for row in rows:
        c, m = row["cluster"], encode(row)
        pipe.zadd(keys.rows(c), {m: 0})
        if row["status"] != "healthy":
            pipe.zadd(keys.by_status(c, row["status"]), {m: 0})
        if row["suspended"]:
            pipe.zadd(keys.suspended(c), {m: 0})
        pipe.hincrby(keys.counts(c), _count_field(row), 1)
    pipe.execute()
    reindex_names(r, {row["cluster"] for row in rows})


def delete_row(r: redis.Redis, row: Row) -> None:
    c, m = row["cluster"], encode(row)
    r.zrem(keys.rows(c), m)
    if row["status"] != "healthy":
        r.zrem(keys.by_status(c, row["status"]), m)
    if row["suspended"]:
        r.zrem(keys.suspended(c), m)
    r.hincrby(keys.counts(c), _count_field(row), -1)
    reindex_names(r, {c})


def _count_field(row: Row) -> str:
    return keys.counts_field(row["kind"], row["status"], row["suspended"])


def reindex_names(r: redis.Redis, clusters: Iterable[str]) -> None:
    """Rebuild the name index and per-namespace counts of `clusters` from their rows (as the
    writer keeps them) and bump their generations (the status one too: rows moved)."""
    for c in clusters:
        members = [m.decode() for m in r.zrange(keys.rows(c), 0, -1)]
        index = name_index.build(members)
        r.delete(keys.names(c), *(keys.nscounts(c, b) for b in range(nscounts.BUCKETS)))
        if index:
            r.hset(keys.names(c), mapping=index)
        per_ns = {ns: nscounts.encode(n) for ns, n in nscounts.of_members(members).items()}
        nscounts.queue_write(r, c, per_ns, [])
        r.hset(keys.sync(c), nscounts.READY, nscounts.READY_VALUE)
        r.incr(keys.generation(c))
        r.incr(keys.status_generation(c))


def order(row: Row) -> tuple[str, bytes]:
    return row["cluster"], sort_key(row["namespace"], row["kind"], row["name"]).encode()


def visible(
    rows: Iterable[Row],
    access: Mapping[str, FakeAccess],
    *,
    clusters=(),
    namespaces=(),
    kinds=(),
    statuses=(),
    name="",
    suspended=None,
    labels=None,
) -> list[Row]:
    """The oracle: rows a caller with `access` sees under these filters, in list order."""
    out = []
    for row in rows:
        a = access.get(row["cluster"])
        if a is None:
            continue
        ok = row["kind"] in a.cluster_wide or row["kind"] in a.namespaces.get(row["namespace"], ())
        ok = ok and (not clusters or row["cluster"] in clusters)
        ok = ok and (not namespaces or row["namespace"] in namespaces)
        ok = ok and (not kinds or row["kind"] in kinds)
        ok = ok and (not statuses or row["status"] in statuses)
        ok = ok and name.lower() in row["name"]
        ok = ok and (suspended is None or row["suspended"] is suspended)
        ok = ok and (labels is None or labels.matches(row.get("labels") or {}))
        if ok:
            out.append(row)
    return sorted(out, key=order)


def row_of(r: redis.Redis, cluster: str, ns: str, kind: str, name: str) -> str | None:
    """The stored member of one object (by its sort key), or None."""
    prefix = sort_key(ns, kind, name).encode()
    found = r.zrangebylex(keys.rows(cluster), b"[" + prefix, b"[" + prefix + b"\xff")
    return found[0].decode() if found else None
