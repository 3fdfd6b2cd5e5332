"""Count tables: a caller's visible rows on one cluster counted by (kind, status code), summed
from counts the writer keeps (never by scanning rows), and remembered while the cluster's
status generation is unchanged (common.index.keys.status_generation: a write that changes only
rows' messages leaves it, and the tables, alone).

A table is the cluster-wide `counts` hash restricted to the caller's cluster-wide kinds, plus
the per-namespace counts (common.index.nscounts) of each namespace where the caller has more
kinds, restricted to those. Computing one costs one pipelined round trip whatever the number of
namespaces (one HMGET per bucket), shared by `COMPUTE_CHUNK` clusters; a caller's tables are
then reused, per process, until a write to the cluster bumps its generation, so facets and
plans for a caller with thousands of namespaces cost one MGET of generations in the steady
state. Tables are exact as of the
generation read with them: the generation is read first, so a write landing mid-read only makes
the table look older than it is (recomputed next time), never newer.

Used by common.index.read.facets, and by common.index.read.reader to plan sparse pages (which
clusters hold matches, which namespaces of a cluster to visit).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from common import redis_client
from common.index import keys, nscounts, rows
from common.index.buckets import Groups
from common.index.read.memo import Memo
from common.index.read.plan import AccessLike

Table = dict[nscounts.Key, int]
"""Visible rows by (kind, status code)."""
TABLES_MAX = 65536  # remembered tables per process (cluster x access x namespace filter)
COMPUTE_CHUNK = 16
"""Clusters whose tables one round trip reads (`Tallies.compute`)."""
_Key = tuple[str, int, tuple[str, ...]]
"""(cluster, id of the caller's access, namespace filter): the access is the entry's owner."""


@dataclass(frozen=True)
class View:
    """What one caller may count on one cluster: `cluster_wide` kinds everywhere (from the
    `counts` hash) and, per namespace, the kinds beyond them (from the per-namespace counts)."""

    cluster_wide: frozenset[str]
    namespaces: Mapping[str, frozenset[str]]


def view(access: AccessLike, namespaces: Sequence[str] = ()) -> View:
    """The caller's view, restricted to `namespaces` when given (the `namespace` filter)."""
    cw = access.cluster_wide
    if namespaces:
        per_ns = {ns: cw | access.namespaces.get(ns, frozenset()) for ns in namespaces}
        return View(frozenset(), {ns: k for ns, k in per_ns.items() if k})
    if not cw:  # no copies of the caller's kind sets (hundreds of namespaces on each cluster)
        return View(cw, {ns: k for ns, k in access.namespaces.items() if k})
    extra = {ns: k - cw for ns, k in access.namespaces.items()}
    return View(cw, {ns: k for ns, k in extra.items() if k})


def code_status(code: str) -> tuple[str, bool]:
    """(status, suspended) of a status code."""
    return rows.CODE_STATUS[code], code in rows.SUSPENDED_CODES


@dataclass
class Entry:
    """A remembered table with the per-namespace counts it was summed from (encoded)."""

    gen: int
    table: Table
    per_ns: Mapping[str, str]
    plans: dict[Any, Any] = field(default_factory=dict)
    """What readers derived from it, by their own keys (e.g. pruned ranges per filters)."""


class Tallies:
    """Tables per (cluster, access, namespace filter), valid while the cluster's status
    generation is the one they were read at (one per process; thread-safe)."""

    def __init__(self, r: Any) -> None:
        self.r = r
        self._tables: Memo[_Key, Entry] = Memo(TABLES_MAX, "tally.tables")
        self.computed = 0
        """Tables computed from Redis (not reused) so far: what the tests count."""

    def cached(
        self, cluster: str, access: AccessLike, namespaces: tuple[str, ...], gen: int
    ) -> Table | None:
        hit = self._tables.get((cluster, id(access), namespaces), gen, access)
        return hit.table if hit is not None else None

    def entry(
        self, cluster: str, access: AccessLike, namespaces: tuple[str, ...], gen: int
    ) -> Entry | None:
        """The remembered entry `cached` would answer from (None when there is none)."""
        return self._tables.get((cluster, id(access), namespaces), gen, access)

    def entries(self, wanted: Sequence[tuple[str, AccessLike]]) -> dict[str, Entry | None]:
        """Entries for planning, whatever their generation: a plan pruned by one checks the
        generation with its scan (and `forget`s it when moved), and a batch size estimated from
        a stale one costs a round trip at worst; facets refresh them as clusters change. Missing
        ones are read in one round trip. None: per-namespace counts not complete there."""
        out: dict[str, Entry | None] = {}
        todo = []
        for c, a in wanted:
            hit = self._tables.peek((c, id(a), ()), a)
            if hit is not None:
                out[c] = hit[1]
            else:
                todo.append((c, a, ()))
        if todo:
            self.compute(todo)
            for c, a, _ in todo:
                hit = self._tables.peek((c, id(a), ()), a)
                out[c] = hit[1] if hit is not None else None
        return out

    def forget(self, cluster: str, access: AccessLike) -> None:
        """Drop a cluster's entry (its generation moved): read again next time."""
        self._tables.pop((cluster, id(access), ()))

    def compute(
        self, wanted: Iterable[tuple[str, AccessLike, tuple[str, ...]]]
    ) -> dict[str, Table | None]:
        """Read the tables of `wanted` (cluster, access, namespace filter), one pipelined round
        trip per `COMPUTE_CHUNK` clusters, and remember them; None for a cluster whose
        per-namespace counts are not complete yet (the caller counts by scanning there).

        Chunked so that what one round trip reads (a team's namespaces on 200 clusters were
        ~12 MiB of replies, names and decoded counts) is folded into tables, and each table
        replaces the one remembered before, ahead of the next chunk's read: the memory freed
        by the replaced entries is taken again by the next chunk rather than the whole read
        being held beside every old entry (what raised a query worker's high-water mark at
        every storm, docs/operations.md "Where the arenas level off")."""
        asked = list(wanted)
        out: dict[str, Table | None] = {}
        for i in range(0, len(asked), COMPUTE_CHUNK):
            out.update(self._compute(asked[i : i + COMPUTE_CHUNK]))
        self.computed += len(asked)
        return out

    def _compute(
        self, wanted: Sequence[tuple[str, AccessLike, tuple[str, ...]]]
    ) -> dict[str, Table | None]:
        todo = [(c, a, ns, view(a, ns)) for c, a, ns in wanted]
        p = self.r.pipeline(transaction=False)
        spans: list[tuple[int, Groups]] = []
        for c, _a, _ns, v in todo:
            p.get(keys.status_generation(c))  # first: a write after it makes the table look older
            p.hget(keys.sync(c), nscounts.READY)
            if v.cluster_wide:
                p.hgetall(keys.counts(c))
            groups = nscounts.queue_read(p, c, v.namespaces) if v.namespaces else []
            spans.append((3 if v.cluster_wide else 2, groups))
        replies = p.execute()
        out: dict[str, Table | None] = {}
        pos = 0
        for (c, a, ns_filter, v), (head, groups) in zip(todo, spans, strict=True):
            gen, ready = int(replies[pos] or 0), replies[pos + 1] is not None
            counts = replies[pos + 2] if v.cluster_wide else {}
            per_ns = nscounts.collect(groups, replies[pos + head : pos + head + len(groups)])
            pos += head + len(groups)
            if not ready:
                out[c] = None
                continue
            table = _table(v, counts, per_ns)
            out[c] = table
            self._tables.put((c, id(a), ns_filter), Entry(gen, table, per_ns), gen, a)
        return out


def _table(v: View, counts: Mapping[Any, Any], per_ns: Mapping[str, str]) -> Table:
    table: Table = {}
    for f, n in counts.items():
        kind, status, suspended = rows.parse_count_field(f)
        if kind in v.cluster_wide:
            k = (kind, nscounts.code_of(status, suspended))
            table[k] = table.get(k, 0) + int(n)
    for ns, value in per_ns.items():
        kinds = v.namespaces[ns]
        for (kind, code), n in nscounts.decode(value).items():
            if kind in kinds:
                table[(kind, code)] = table.get((kind, code), 0) + n
    return {k: n for k, n in table.items() if n > 0}


def matching(
    table: Table, kinds: frozenset[str], statuses: frozenset[str], suspended: bool | None
) -> int:
    """The rows of a table that pass these filters (empty sets: any)."""
    total = 0
    for (kind, code), n in table.items():
        status, susp = code_status(code)
        if (kinds and kind not in kinds) or (statuses and status not in statuses):
            continue
        if suspended is None or susp is suspended:
            total += n
    return total


def live_namespaces(
    entry: Entry,
    namespaces: Mapping[str, frozenset[str]],
    kinds: frozenset[str],
    statuses: frozenset[str],
    suspended: bool | None,
) -> dict[str, frozenset[str]]:
    """The namespaces (with their kinds) that hold rows passing these filters, by the entry's
    per-namespace counts: the only ones a sparse page must visit, as of the entry's generation."""
    out = {}
    for ns, granted in namespaces.items():
        value = entry.per_ns.get(ns)
        if not value:
            continue
        wanted = granted & kinds if kinds else granted
        counts = {k: n for k, n in nscounts.decode(value).items() if k[0] in wanted}
        if counts and matching(counts, frozenset(), statuses, suspended):
            out[ns] = wanted
    return out


_GEN_MGETS: Memo[tuple[bool, tuple[str, ...]], redis_client.Packed] = Memo(TABLES_MAX)


def generations_command(clusters: Sequence[str], status: bool = False) -> Any:
    """The packed `MGET` of the clusters' generations (their status generations when `status`;
    packed once per list of clusters: the same callers ask for the same clusters), for
    `redis_client.pipelined`."""
    names = (status, tuple(clusters))
    mget = _GEN_MGETS.get(names)
    if mget is None:
        key = keys.status_generation if status else keys.generation
        mget = redis_client.packed("MGET", *(key(c) for c in clusters))
        _GEN_MGETS.put(names, mget)
    return mget


_READ_ONCE: ContextVar[tuple[Any, dict[str, Any], Any] | None] = ContextVar(
    "fleetscope_generations", default=None
)
"""(client, cluster -> generation, grants version) read by `read_once` for the request running
in this context."""


@contextlib.contextmanager
def read_once(r: Any, clusters: Sequence[str]) -> Iterator[list[Any]]:
    """The clusters' generations and the grants version, read in one round trip; within the
    block, `generations` on `r` of any of these clusters (with the version or not) is answered
    from that read instead of reading again. For a request that needs them before its reads
    and then reads a page that starts the same way (a list's `resourceVersion`, then its
    page): the page then sees the generations as of a moment before its reads, as it would
    have read them itself. Not for anything that re-reads generations to see writes."""
    gens, version = generations(r, clusters, version=True)
    token = _READ_ONCE.set((r, dict(zip(clusters, gens, strict=True)), version))
    try:
        yield gens
    finally:
        _READ_ONCE.reset(token)


def held_version(r: Any) -> tuple[Any] | None:
    """(the grants version,) as `read_once` read it for `r` in this context; None outside."""
    held = _READ_ONCE.get()
    return (held[2],) if held is not None and held[0] is r else None


def generations(
    r: Any, clusters: Sequence[str], version: bool = False, status: bool = False
) -> tuple[list[Any], Any]:
    """The clusters' generations in one round trip (MGET), as Redis returns them (bytes, or
    None for a cluster never written: `int(g or 0)` reads one), and the grants version when asked
    (`keys.GrantsVersion`, else None). Equal lists mean no cluster was written in between.
    `status`: their status generations instead (`status_generations`). Inside `read_once`,
    its read answers, without a round trip."""
    if not clusters and not version:
        return [], None
    held = None if status else _READ_ONCE.get()
    if held is not None and held[0] is r:
        known = held[1]
        try:
            return [known[c] for c in clusters], held[2] if version else None
        except KeyError:
            pass  # a cluster it did not read: read them all
    if len(clusters) >= FLEET_GENERATION_MIN and redis_client.is_cluster(r):
        return _through_fleet(r, clusters, version, status)
    commands: list[Any] = [("GET", keys.VERSION)] if version else []
    if clusters:
        commands.append(generations_command(clusters, status))
    replies = redis_client.pipelined(r, commands)
    got = keys.GrantsVersion(replies.pop(0)) if version else None
    return (replies[0] if clusters else []), got


FLEET_GENERATION_MIN = 8
GENS_HELD_MAX = 256
"""From this many clusters on, on Redis Cluster, `generations` checks the fleet's generation
first: below, their MGET costs no more than that check. GENS_HELD_MAX: the lists of
generations a client keeps (one per distinct list of clusters: callers' access patterns)."""


def _through_fleet(
    r: Any, clusters: Sequence[str], version: bool, status: bool
) -> tuple[list[Any], Any]:
    """`generations` on Redis Cluster, where reading hundreds of clusters' generations costs a
    command each on the servers: the fleet's generation (keys.FLEET_GENERATION, raised after
    every cluster's) is read first, and while it has not moved the generations this client read
    last for the same clusters are still theirs, for at most keys.FLEET_GENERATION_MAX_AGE_S
    (a writer killed between its write and that INCR). Read before the clusters' own, so a
    write committed after those is always seen moving it."""
    held: dict[Any, tuple[Any, float, list[Any]]] = r.__dict__.setdefault("_fs_gens", {})
    commands: list[Any] = [("GET", keys.VERSION)] if version else []
    commands.append(("GET", keys.FLEET_GENERATION))
    replies = redis_client.pipelined(r, commands)
    got = keys.GrantsVersion(replies.pop(0)) if version else None
    fleet, now = replies[0], time.monotonic()
    names = (status, tuple(clusters))
    hit = held.get(names)
    fresh = hit is not None and now - hit[1] < keys.FLEET_GENERATION_MAX_AGE_S
    if fresh and fleet is not None and hit is not None and hit[0] == fleet:
        return hit[2], got
    gens = redis_client.pipelined(r, [generations_command(clusters, status)])[0]
    if len(held) >= GENS_HELD_MAX:
        held.clear()
    held[names] = (fleet, now, gens)
    return gens, got


def status_generations(
    r: Any, clusters: Sequence[str], version: bool = False
) -> tuple[list[Any], Any]:
    """`generations`, of the clusters' status generations: what answers built only from rows'
    identities, statuses, revisions, transitions and labels (count tables, facets, groups and
    their facets) are remembered at, so writes that change only rows' messages cost them no
    read."""
    return generations(r, clusters, version, status=True)
