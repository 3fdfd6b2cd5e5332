"""Groups across clusters (`GET /api/v1/groups`): one entry per object (namespace, kind, name)
or per namespace, over the rows the caller may list that pass the list filters, with how many of
the caller's clusters report each status; ordered by how many clusters report it unhealthy (most
first), then by key (namespace, kind, name; or namespace); keyset-paginated.

A page is built in two parts, as the order has them:

- the groups with unhealthy clusters come from the clusters' `st:unhealthy` indexes (small: ~1%
  of the rows), read once per cluster generation and shared by every caller, tested against each
  caller's access and filters here, and counted per group; after a write, a cluster's share of
  a caller's part is moved by its change feed (`_keys_moved`) rather than read again;
- the rest, in key order, is a merge of the clusters' visible rows in identity order
  (common.index.read.reader's streams: each cluster reads a chunk of about a page, all clusters
  in one round trip) skipping the groups of the first part; for namespace groups, a merge of
  the clusters' namespaces (the caller's own, or every namespace of the per-namespace counts).

Each group of a page then gets its clusters in one round trip: the status code of its object on
every cluster (a small script per cluster, common.index.read.lua.STATUS_REVISIONS), or its namespace's
counts by kind and status (common.index.nscounts). Counts are over the caller's visible clusters
and, on each, over the kinds the caller may list there: a team member sees counts over their
own clusters and namespaces only.

Exactly once: the continue token carries when the walk began. A group whose unhealthy count
changes moves in the order; on every page after the first, groups holding a row that
transitioned after the walk began (the time index, common.index.timeline, places it there) are
skipped, so a group is never shown twice on one walk, and groups that did not change keep their
position and are shown once. A transition that reaches fleetscope after the walk began but
happened (by the leaf's clock) before it is not seen as a change: such a group can be shown
twice (a watcher's lag is well under a second; a cluster recovering from an outage can lag more).

Drift (`drift=true`, object groups): each group's clusters come with the revision of its row
there (the same script returns the status code and the revision: no second round trip), counted
by common.index.revisions; a drift page walks the same order and keeps the groups with two or
more revisions (`_drift_page`).

A page is remembered with the status generations of the caller's clusters
(common.index.keys.status_generation: a write that changes only rows' messages does not move
them): while none moved, the same request is answered after one round trip (`MGET` of them).
After a write, a page reads and builds again only what the written clusters hold: the caller's
unhealthy counts are moved cluster by cluster (their order kept by bisection; each cluster's part
by its feed), a page's last ranking keeps the shares of the clusters not written, and the statuses,
per-namespace counts, namespace members, each cluster's run of the merge and each cluster's
share of an object page's groups are remembered per cluster status generation.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import heapq
import itertools
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

import redis

from common import redis_client
from common.errors import InvalidInput
from common.index import keys, nscounts, revisions, rows, timeline
from common.index.read import memo, tally
from common.index.read.memo import Flights, Memo
from common.index.read.memo import not_older as memo_not_older
from common.index.read.plan import AccessLike, Filters
from common.index.read.reader import Reader, Stream
from common.kinds.status import STATUSES

__all__ = ["BY", "Group", "GroupCursor", "GroupPage", "GroupReader", "Member"]

BY = ("object", "namespace")
RANK = {"unhealthy": 0, "progressing": 1, "unknown": 2, "healthy": 3}
"""A group's clusters are listed worst first: unhealthy, progressing, unknown, healthy."""
PAGES_MAX = 1024  # remembered pages per process
INDEXES_MAX = 4096  # remembered per-cluster reads (unhealthy indexes, namespaces, codes, counts)
INDEX_CHUNK = 16
"""Clusters whose unhealthy indexes one round trip reads (`GroupReader._unhealthy_keys`)."""
SHARES_MAX = 262_144
"""Members of the clusters' shares of pages remembered (`_shares`)."""
SPARE = 16
"""Groups after a page whose clusters' statuses are looked up with it (`GroupReader._spare`)."""
RUNS_MAX = 262_144
"""Identities of the clusters' first chunks remembered for the merge (`_runs`, ~25 MB)."""
REMEMBERED_PER_CLUSTER_MAX = 8192
"""Status codes (objects of pages shown) or namespace counts remembered per cluster."""
DRAIN_MAX = 100_000
"""Rows a namespace grouping with a name filter may gather (it counts every matching row)."""
DRIFT_LOOKUPS_MAX = 250_000
"""Object lookups (groups examined x the caller's clusters) one `drift=true` page makes at most
(1,250 groups on 200 clusters, all of a 50-cluster fleet's 5,000): past it, the page ends early
(fewer groups than `limit`, possibly none) with a `continue` from the last group examined."""


@dataclass(frozen=True)
class GroupCursor:
    """The last group a page returned: its unhealthy cluster count and key, and when the walk
    began (ms)."""

    unhealthy: int
    key: bytes
    start: int


_NO_STATUSES: Mapping[str, int] = MappingProxyType({})
"""An object group's Member's `statuses`: one empty mapping shared by all of them."""


@dataclass(slots=True)
class Member:
    """One cluster of a group: its status there (a namespace's worst), whether suspended (any
    of its rows), and for namespace groups its rows by status (read only once made: shared by
    the Members summed from the same counts).

    Slotted, with one shared empty `statuses` for object groups: a worker's memos hold tens of
    thousands of Members at fleet L, long-lived small objects that keep pymalloc's arenas
    resident (docs/operations.md, "Memory of a query worker"); a Member is one block of 80 bytes
    instead of two or three blocks of 128-192."""

    cluster: str
    status: str
    suspended: bool
    objects: int = 1
    statuses: Mapping[str, int] = field(default_factory=lambda: _NO_STATUSES)
    revision: str = ""
    """Object groups: the row's revision on this cluster ("" for none)."""


Share = Mapping[Any, Member]
"""One cluster's share of a page: its Member of each group of the page it holds, by group key,
in the page's order. A dict: its table is one allocation of the C heap, where pairs of (key,
Member) were one small object each in pymalloc's arenas."""
_NO_SHARE: Share = MappingProxyType({})


@dataclass
class Group:
    key: bytes
    namespace: str
    kind: str | None
    name: str | None
    clusters: list[Member]
    """Every cluster where the group appears, worst status first, then by name (`RANK`)."""
    order: int = 0
    """The unhealthy count the group was placed by (what the cursor holds)."""

    def statuses(self) -> dict[str, int]:
        """Clusters with at least one row of each status."""
        out = dict.fromkeys(STATUSES, 0)
        for m in self.clusters:
            if m.statuses:
                for s, n in m.statuses.items():
                    out[s] += 1 if n else 0
            else:
                out[m.status] += 1
        return out

    def suspended(self) -> int:
        return sum(1 for m in self.clusters if m.suspended)

    def revisions(self) -> revisions.Revisions:
        """The revisions its clusters run, with cluster counts (common.index.revisions)."""
        return revisions.count(m.revision for m in self.clusters)

    def drifts(self) -> bool:
        return revisions.drifts(m.revision for m in self.clusters)


@dataclass
class GroupPage:
    groups: list[Group]
    cursor: GroupCursor | None
    scanned: int = 0
    """Members Redis examined (streams) and unhealthy-index members read, for this page."""
    round_trips: int = 0
    version: keys.GrantsVersion | None = None


@dataclass
class _Ask:
    """One page's question (the caller's access, their clusters with their generations, the
    filters, the grouping) and the page being built (what it cost so far)."""

    access: Mapping[str, AccessLike]
    clusters: list[str]
    gens: Mapping[str, Any]
    filters: Filters
    by: str
    out: GroupPage


@dataclass
class _Tally:
    """One caller's unhealthy part: each cluster's group keys as of its generation, and how
    many of the clusters hold each key."""

    access: Mapping[str, AccessLike]
    parts: dict[str, tuple[Any, tuple[bytes, ...]]] = field(default_factory=dict)
    counts: dict[bytes, int] = field(default_factory=dict)
    order: list[bytes] = field(default_factory=list)
    """Every key, sorted by `place` (its count, then itself): the groups' order. Keys only, not
    (-count, key) pairs: an admin's tally holds tens of thousands of groups for as long as the
    memo keeps it, and a pair was one more small object each in pymalloc's arenas."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def place(self, k: bytes) -> tuple[int, bytes]:
        """A key's place in `order`: (-count, key). Read under `lock`."""
        return -self.counts[k], k

    def move(self, delta: Mapping[bytes, int]) -> None:
        """Apply count changes, keeping `order` sorted (a few hundred keys per written
        cluster: bisect, not a sort of every group)."""
        if not self.order and len(delta) > 256:  # the first time: one sort
            self.counts = {k: n for k, n in delta.items() if n > 0}
            self.order = sorted(self.counts, key=self.place)
            return
        for k, d in delta.items():
            if not d:
                continue
            n0 = self.counts.get(k, 0)
            n1 = n0 + d
            if n0 > 0:  # found at its old count, before that moves
                del self.order[bisect.bisect_left(self.order, (-n0, k), key=self.place)]
            if n1 > 0:
                self.counts[k] = n1
                bisect.insort(self.order, k, key=self.place)
            else:
                self.counts.pop(k, None)


@functools.lru_cache(maxsize=65536)
def _member(cluster: str, found: str) -> Member:
    """The Member of a STATUS_REVISIONS reply (status code, then revision) on `cluster`, shared by every
    object group (read only)."""
    status, suspended = tally.code_status(found[:1])
    return Member(cluster, status, suspended, revision=found[1:])


@functools.lru_cache(maxsize=65536)
def _decoded(value: str) -> tuple[tuple[str, str, int], ...]:
    """A per-namespace counts value as (kind, code, n): namespaces of the same shape repeat
    across a fleet's clusters, so each is decoded once."""
    return tuple((kind, code, n) for (kind, code), n in nscounts.decode(value).items())


_NONE: frozenset[str] = frozenset()


@functools.lru_cache(maxsize=65536)
def _summed(
    value: str,
    cluster_wide: frozenset[str],
    own: frozenset[str],
    kinds: frozenset[str],
    codes: frozenset[str],
) -> tuple[str, bool, int, dict[str, int]] | None:
    """One cluster's share of a namespace group from its per-namespace counts: the worst
    status, whether any row is suspended, the rows and the rows by status (read only: shared by
    every cluster whose namespace has the same counts), over the kinds the caller may list
    there (`cluster_wide`, `own`) and the filters (`kinds`, status `codes`); None: no row."""
    by_status: dict[str, int] = {}
    suspended = False
    for kind, code, n in _decoded(value):
        if (kinds and kind not in kinds) or code not in codes:
            continue
        if kind not in cluster_wide and kind not in own:
            continue
        status, susp = tally.code_status(code)
        by_status[status] = by_status.get(status, 0) + n
        suspended = suspended or susp
    if not by_status:
        return None
    worst = next(s for s in RANK if s in by_status)
    return worst, suspended, sum(by_status.values()), by_status


@dataclass(frozen=True)
class _Ranking:
    """A page's groups' Members (`_rank`), with the clusters' shares they were made from: the
    next page of the same groups moves only the groups whose Members changed."""

    clusters: tuple[str, ...]
    keys: tuple[Any, ...]
    shares: dict[str, Share]
    found: list[list[list[Member]]]
    out: list[list[Member]]
    gens: tuple[Any, ...] = ()
    """The clusters' status generations the shares were made at (None: not remembered)."""

    def kept(self, clusters: Sequence[str], gens: Mapping[str, Any]) -> dict[str, Share]:
        """The shares made over the same `clusters` whose status generation has not moved:
        still right for the same caller and filters, taken as they are (a page after a write
        then looks up the written clusters' shares only, not one memo entry per cluster)."""
        if len(self.gens) != len(self.clusters) or tuple(clusters) != self.clusters:
            return {}
        return {
            c: self.shares[c]
            for c, g in zip(self.clusters, self.gens, strict=True)
            if g is not None and (g is (now := gens.get(c)) or g == now)
        }


RERANK_MAX = 8
"""Clusters whose shares changed up to which a ranking is moved rather than made again."""


def _rank(
    clusters: Sequence[str],
    shares: Mapping[str, Share],
    keys: Sequence[Any],
    prev: _Ranking | None,
    gens: tuple[Any, ...] = (),
) -> _Ranking:
    """The Members of the groups `keys` from the clusters' shares (Member by group key): worst
    status first, clusters in name order within a status (bucketed in cluster order, not
    sorted). From `prev` when it ranked the same groups over the same clusters and only a few
    clusters' shares changed since (a write moves one cluster's): only the groups whose Member
    on those clusters changed are ranked again (a transition: one group), instead of every
    Member of the page (a page of 50 groups over 200 clusters: 10,000)."""
    cs, ks = tuple(clusters), tuple(keys)
    mine = {c: shares.get(c, _NO_SHARE) for c in cs}
    changed = None
    if prev is not None and prev.clusters == cs and prev.keys == ks:
        changed = [c for c in cs if mine[c] is not prev.shares[c]]
    if changed is None or len(changed) > RERANK_MAX:
        place = {k: j for j, k in enumerate(ks)}
        found: list[list[list[Member]]] = [[[], [], [], []] for _ in ks]
        for c in cs:
            for k, m in mine[c].items():
                found[place[k]][RANK[m.status]].append(m)
        out = [[m for b in bs for m in b] for bs in found]
        return _Ranking(cs, ks, mine, found, out, gens)
    assert prev is not None
    if not changed:
        return prev if prev.gens == gens else dataclasses.replace(prev, gens=gens)
    place = {k: j for j, k in enumerate(ks)}
    order = {c: i for i, c in enumerate(cs)}
    found = list(prev.found)
    copied: set[int] = set()
    for c in changed:
        old, new = prev.shares[c], mine[c]
        for k in old.keys() | new.keys():
            om, nm = old.get(k), new.get(k)
            if om is nm or om == nm:
                continue
            j = place[k]
            if j not in copied:  # never the previous ranking's lists: other threads read them
                found[j] = [list(b) for b in found[j]]
                copied.add(j)
            if om is not None:
                b = found[j][RANK[om.status]]
                b.pop(next(i for i, m in enumerate(b) if m.cluster == c))
            if nm is not None:
                b = found[j][RANK[nm.status]]
                b.insert(bisect.bisect_left(b, order[c], key=lambda m: order[m.cluster]), nm)
    out = list(prev.out)
    for j in copied:
        out[j] = [m for b in found[j] for m in b]
    return _Ranking(cs, ks, mine, found, out, gens)


def _key_of(identity: bytes, by: str) -> bytes:
    """A group's key: the identity (`ns NUL kind NUL name NUL`) or `ns NUL`."""
    return identity if by == "object" else rows.member_namespace_key(identity)


@dataclass(frozen=True)
class _Unhealthy:
    """One cluster's share of a caller's unhealthy part (`GroupReader._unhealthy_keys`): the
    visible unhealthy identities passing the filters, their distinct group keys (the
    identities themselves for object groups) and the generation its feed is followed from."""

    ids: tuple[bytes, ...]
    keys: tuple[bytes, ...]
    pos: int

    @classmethod
    def of(cls, ids: tuple[bytes, ...], by: str, pos: int) -> _Unhealthy:
        """From the identities: their namespaces' distinct keys for namespace groups."""
        if by == "object":
            return cls(ids, ids, pos)
        return cls(ids, tuple(dict.fromkeys(map(rows.member_namespace_key, ids))), pos)


def _keys_moved(
    held: tuple[bytes, ...], lines: bytes, vis: Any, filters: Filters
) -> tuple[bytes, ...]:
    """The visible unhealthy identities `held` moved by a cluster's feed lines since
    (common.index.read.lua.FOLLOW: identity, old code, new code, "." for a row gone): each
    identity a line names is dropped, and kept again when its last line leaves it with an
    unhealthy code the caller may list (`vis`, a Visibility, tests only namespace, kind and
    code, which the line holds) under the namespace and name filters."""
    last: dict[bytes, bytes] = {}
    for line in lines.split(b"\n"):
        if line:
            last[line[:-2]] = line[-1:]
    if not last:
        return held
    out = [i for i in held if i not in last]
    name = filters.name.encode()
    namespaces = {ns.encode() for ns in filters.namespaces}
    kinds, codes, cluster_wide, of_ns = vis.kinds, vis.codes, vis.cluster_wide, vis.namespaces.get
    for identity, code in last.items():
        if code not in codes:  # (a row gone: ".", never a code)
            continue
        ns, kind, obj, _ = identity.split(b"\x00", 3)
        if (kinds is not None and kind not in kinds) or kind not in of_ns(ns, cluster_wide):
            continue
        if (namespaces and ns not in namespaces) or (name and name not in obj):
            continue
        out.append(identity)
    return tuple(out)


def _namespace_of(identity: bytes) -> str:
    return identity[: identity.index(b"\x00")].decode()


def _order(p: tuple[int, bytes]) -> tuple[int, bytes]:
    """The groups' order: most unhealthy clusters first, then by key."""
    return -p[0], p[1]


def _statuses_allowed(filters: Filters) -> frozenset[str]:
    return frozenset(filters.statuses) & frozenset(STATUSES) or frozenset(STATUSES)


def _code_ok(code: str, filters: Filters) -> bool:
    status, suspended = tally.code_status(code)
    if status not in _statuses_allowed(filters):
        return False
    return filters.suspended is None or suspended is filters.suspended


def _visible_kinds(access: AccessLike, ns: str) -> frozenset[str]:
    return access.cluster_wide | access.namespaces.get(ns, frozenset())


@dataclass(slots=True)
class _Changes:
    """A cluster's groups changed since a walk began, as (key, namespace, kind), at its change
    feed's generation `gen`; `shown`: the last caller's access and the keys of it they may list
    (`GroupReader._visible_changes`)."""

    found: frozenset[tuple[bytes, str, str]]
    gen: int
    shown: list[Any] = field(default_factory=lambda: [None, frozenset()])


def _may_list(access: AccessLike, ns: str, kind: str) -> bool:
    return kind in access.cluster_wide or kind in access.namespaces.get(ns, ())


class GroupReader:
    """Group pages (one per process; thread-safe: the memos are, and a page keeps what it read
    for itself)."""

    def __init__(self, reader: Reader, pages_max: int = PAGES_MAX) -> None:
        self.reader = reader
        self.r: redis.Redis = reader.r
        self.pages_max = pages_max
        # Each by generation (a cluster's, or the caller's clusters' for pages); those keyed
        # by an access's id hold that access.
        self._pages: Memo[Any, GroupPage] = Memo(pages_max, "groups.pages")
        self._unhealthy: Memo[str, tuple[list[bytes], int]] = Memo(INDEXES_MAX)
        """cluster -> its unhealthy index, and the generation its change feed is followed
        from."""
        self._namespaces: Memo[str, tuple[list[str], int]] = Memo(INDEXES_MAX)
        """cluster -> its namespaces (those of the per-namespace counts), sorted, and the
        generation its change feed is followed from."""
        self._keys: Memo[Any, _Unhealthy] = Memo(INDEXES_MAX * 4, "groups.keys")
        """(cluster, access, filters, by) -> the cluster's unhealthy group keys."""
        self._tallies: Memo[Any, _Tally] = Memo(pages_max, "groups.tallies")
        """(access, filters, by) -> the unhealthy part's counts, moved cluster by cluster."""
        self._codes: Memo[str, tuple[dict[bytes, str], int]] = Memo(INDEXES_MAX, "groups.codes")
        """cluster -> (identity -> its status code and revision there ("" for none), the
        generation its change feed is followed from: `_held`)."""
        self._nsvalues: Memo[str, tuple[dict[str, str], int]]
        self._nsvalues = Memo(INDEXES_MAX, "groups.nsvalues")
        """cluster -> (namespace -> its per-namespace counts ("" for none), the generation its
        change feed is followed from)."""
        self._nsmembers: Memo[Any, dict[str, Member | None]] = Memo(
            INDEXES_MAX * 4, "groups.nsmembers"
        )
        """(cluster, access, filters) -> namespace -> its Member."""
        self._runs: Memo[Any, tuple[tuple[bytes, ...], bool]] = Memo(RUNS_MAX, "groups.runs")
        """(cluster, access, filters, after key) -> the identities of the cluster's first chunk
        after that key, and whether they are all (weighted by identities)."""
        self._shares: Memo[Any, Share] = Memo(SHARES_MAX, "groups.shares")
        """(cluster, access, filters, page serial) -> the cluster's Members of that page's
        groups, with their places (weighted by Members)."""
        self._rankings: Memo[Any, _Ranking] = Memo(SHARES_MAX, "groups.rankings")
        """(access, filters, by, page serial) -> the last ranking of that page's groups
        (weighted by Members)."""
        self._serials: Memo[frozenset[Any], int] = Memo(PAGES_MAX)
        self._next_serial = itertools.count()
        self._changes: Memo[tuple[str, int, str], _Changes]
        self._changes = Memo(INDEXES_MAX * 4, "groups.changes")
        """(cluster, walk start, by) -> the groups changed there since."""
        self._walks: Memo[Any, tuple[tuple[str, ...], tuple[Any, ...], set[bytes]]]
        self._walks = Memo(SHARES_MAX, "groups.walks")
        """(access, walk start, by) -> the caller's clusters, their status generations and
        the keys of the groups changed on them since, as the caller may list them (weighted
        by keys; read only)."""
        self._lock = threading.Lock()
        self._flights = Flights()
        """Pages being read: the same one asked meanwhile waits for it (`Flights`)."""
        self.index_reads = 0
        """Unhealthy indexes and namespace lists read from Redis (not remembered): for tests."""
        self.lookups = 0
        """Clusters asked for the status codes (or counts) of a page's groups: for tests."""
        self.streams_read = 0
        """Clusters whose streams a merge read (not remembered): for tests."""
        self.shares_built = 0
        """Clusters' shares of group pages built (not remembered): for tests."""
        self.changes_filtered = 0
        """Clusters' changed sets filtered by a caller's access (not remembered): for tests."""
        self.parts_followed = 0
        """Clusters' shares of an unhealthy part moved by their change feeds
        (`_unhealthy_keys`): for tests."""
        self.followed = 0
        """Clusters' namespace lists, codes and counts carried through a write by their change
        feeds (`_held`): for tests."""

    # -- pages ---------------------------------------------------------------------------------

    def page(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        by: str,
        limit: int,
        cursor: GroupCursor | None = None,
        confirm_version: bool = False,
    ) -> GroupPage:
        """Up to `limit` groups after `cursor`; `confirm_version` as Reader.page has it."""
        if by not in BY:
            raise ValueError(f"by is one of {BY}")
        wanted = set(filters.clusters)
        clusters = [c for c in sorted(access) if not wanted or c in wanted]
        out = GroupPage([], None)
        gens, out.version = tally.status_generations(self.r, clusters, confirm_version)
        out.round_trips = 1 if clusters or confirm_version else 0
        if not clusters:
            return out
        memo = (id(access), filters, by, cursor, limit)
        hit = None if filters.flapping else self._pages.get(memo, gens, access)
        if hit is not None:  # (flapping slides with time: never remembered)
            return dataclasses.replace(hit, version=out.version, round_trips=1, scanned=0)
        with self._flights.one(memo) as flight:  # the same page asked meanwhile: once
            held = None if filters.flapping else self._pages.peek(memo, access)
            if held is not None and memo_not_older(held[0], gens):
                return dataclasses.replace(held[1], version=out.version, round_trips=1, scanned=0)
            if flight.others() and not filters.flapping:  # made at generations read now, it
                gens = tally.status_generations(self.r, clusters)[0]  # answers them too
                out.round_trips += 1
            start = cursor.start if cursor is not None else int(time.time() * 1000)
            # Drift under a label selector is kept on the selector's drained groups (_page);
            # otherwise drifting groups are picked from the plain walk (_drift_page).
            drained = bool(filters.labels) or bool(filters.flapping)
            base = (
                dataclasses.replace(filters, drift=False)
                if filters.drift and not drained
                else filters
            )
            ask = _Ask(access, clusters, dict(zip(clusters, gens, strict=True)), base, by, out)
            if filters.drift and by == "object" and not drained:
                self._drift_page(ask, limit, cursor, start)
            else:
                self._page(ask, limit, cursor, start)
            if not filters.flapping:
                self._pages.put(memo, out, list(gens), access)
        return out

    def _page(
        self,
        q: _Ask,
        limit: int,
        cursor: GroupCursor | None,
        start: int,
    ) -> None:
        filters, by, out = q.filters, q.by, q.out
        need = limit + 1
        changed = self._changed(q, start) if cursor is not None else set()
        drained: dict[bytes, Group] = {}
        pos = (-cursor.unhealthy, cursor.key) if cursor is not None else None
        picked: list[tuple[int, bytes]] = []
        drain = bool(filters.labels or filters.flapping) or (
            by == "namespace" and bool(filters.name)
        )
        if drain:  # labels, flapping (and names, by namespace): from the matching rows
            for n, k in self._drained_order(q, drained):
                if filters.drift and not drained[k].drifts():
                    continue
                if (pos is None or (-n, k) > pos) and k not in changed:
                    picked.append((n, k))
                    if len(picked) >= need:
                        break
            unhealthy: Mapping[bytes, int] = {}
        else:
            picked, unhealthy = self._unhealthy_part(q, pos, changed, need)
        rest = _statuses_allowed(filters) - {"unhealthy"}
        if len(picked) < need and rest and not drain:
            after_key = cursor.key if cursor is not None and cursor.unhealthy == 0 else b""
            skip = changed | set(unhealthy)
            if by == "object":
                more = self._merge_objects(q, after_key, skip, need - len(picked))
                picked += [(0, k) for k in more]
            else:
                picked += self._merge_namespaces(q, after_key, skip, need - len(picked))
        page = picked[:limit]
        spare = () if drain else self._spare(q, picked[limit:], changed)
        if drain:
            out.groups = [drained[k] for _n, k in page]
        elif by == "object":
            out.groups = self._object_groups(q, page, spare)
        else:
            out.groups = self._namespace_groups(q, page, spare)
        if len(picked) > limit:
            n, k = page[-1]
            out.cursor = GroupCursor(n, k, start)

    def _spare(
        self, q: _Ask, after: list[tuple[int, bytes]], changed: set[bytes]
    ) -> tuple[bytes, ...]:
        """The keys of up to `SPARE` groups right after a page in the unhealthy order (from
        the one after its last, `after`): looked up with the page on the clusters asked anyway,
        so that when a write moves one of them onto the page it is already known there (else
        every cluster is asked for it: hundreds of commands for one new group)."""
        if not after or after[0][0] <= 0:
            return ()
        t = self._tallies.get((id(q.access), q.filters, q.by), owner=q.access)
        if t is None:
            return ()
        with t.lock:
            i = bisect.bisect_left(t.order, (-after[0][0], after[0][1]), key=t.place)
            return tuple(k for k in t.order[i : i + SPARE] if k not in changed)

    # -- drift: object groups whose clusters run two or more revisions ------------------------

    def _drift_page(
        self,
        q: _Ask,
        limit: int,
        cursor: GroupCursor | None,
        start: int,
    ) -> None:
        """A page of drifting object groups: the object groups of the same walk, in the same
        order, examined in batches (their clusters' codes and revisions in one round trip per
        batch) and kept when they drift. A revision never moves a group in the order (only its
        unhealthy count does, and `_changed` skips such groups as on any walk), so a group is
        shown at most once: drifting when its page is read. At most `DRIFT_LOOKUPS_MAX` lookups
        (groups x clusters) per page; past it the page ends early, its cursor the last
        examined."""
        out = q.out
        changed = self._changed(q, start) if cursor is not None else set()
        shown: list[Group] = []
        at, examined, more = cursor, 0, True
        budget = max(DRIFT_LOOKUPS_MAX // max(len(q.clusters), 1), 1)  # groups this page
        while len(shown) <= limit and more and examined < budget:
            want = min(max(4 * (limit + 1 - len(shown)), 64), budget - examined)
            picked = self._pick_objects(q, at, changed, want)
            more = len(picked) >= want
            examined += len(picked)
            shown += [g for g in self._object_groups(q, picked) if g.drifts()]
            if picked:
                at = GroupCursor(picked[-1][0], picked[-1][1], start)
        out.groups = shown[:limit]
        if len(shown) > limit:
            last = out.groups[-1]
            out.cursor = GroupCursor(last.order, last.key, start)
        elif more and at is not None:  # the budget ran out: go on from the last examined
            out.cursor = at

    def _pick_objects(
        self,
        q: _Ask,
        cursor: GroupCursor | None,
        changed: set[bytes],
        need: int,
    ) -> list[tuple[int, bytes]]:
        """The next `need` object groups after `cursor` (unhealthy count, key), as `_page`
        picks them: the unhealthy part, then the rest in key order."""
        pos = (-cursor.unhealthy, cursor.key) if cursor is not None else None
        picked, unhealthy = self._unhealthy_part(q, pos, changed, need)
        if len(picked) < need and _statuses_allowed(q.filters) - {"unhealthy"}:
            after_key = cursor.key if cursor is not None and cursor.unhealthy == 0 else b""
            more = self._merge_objects(q, after_key, changed | set(unhealthy), need - len(picked))
            picked += [(0, k) for k in more]
        return picked

    # -- the unhealthy part --------------------------------------------------------------------

    def _unhealthy_part(
        self,
        q: _Ask,
        pos: tuple[int, bytes] | None,
        changed: set[bytes],
        need: int,
    ) -> tuple[list[tuple[int, bytes]], Mapping[bytes, int]]:
        """The page's groups with unhealthy clusters after `pos` (up to `need`, but those in
        `changed`), most unhealthy first, then by key; and, when they do not fill the page, every
        such group (the rest of the page skips them). The counts are the caller's, kept per
        (access, filters, grouping) and moved by the clusters written since: a write costs the
        next page that cluster's index and its keys, never a recount of the fleet."""
        if "unhealthy" not in _statuses_allowed(q.filters):
            return [], {}
        memo = (id(q.access), q.filters, q.by)
        with self._lock:  # one _Tally per caller
            t = self._tallies.get(memo, owner=q.access)
            if t is None:
                t = _Tally(q.access)
                self._tallies.put(memo, t, owner=q.access)
        with t.lock:  # one page at a time moves and reads a caller's counts
            moved = [c for c in q.clusters if (t.parts.get(c) or (None,))[0] != q.gens[c]]
            delta: Counter[bytes] = Counter()
            try:
                for i in range(0, len(moved), INDEX_CHUNK):
                    # each chunk's keys replace the old ones before the next chunk's are made
                    chunk = moved[i : i + INDEX_CHUNK]
                    fresh = self._unhealthy_keys(q, chunk)
                    for c in chunk:
                        old = t.parts.get(c)
                        if old is None:
                            delta.update(fresh[c])
                        elif old[1] is not fresh[c]:  # a part's keys are distinct
                            was, now = set(old[1]), set(fresh[c])
                            delta.subtract(was - now)
                            delta.update(now - was)
                        t.parts[c] = (q.gens[c], fresh[c])
            finally:  # the counts follow every part replaced, even when a later chunk failed
                t.move(delta)
            picked: list[tuple[int, bytes]] = []
            i = bisect.bisect_right(t.order, pos, key=t.place) if pos is not None else 0
            while len(picked) < need and i < len(t.order):
                k = t.order[i]
                i += 1
                if k not in changed:
                    picked.append((t.counts[k], k))
            return picked, (dict(t.counts) if len(picked) < need else {})

    def _unhealthy_keys(self, q: _Ask, clusters: list[str]) -> dict[str, tuple[bytes, ...]]:
        """Each cluster's keys of groups with unhealthy rows the caller may list (under the
        filters), remembered per (generation, access, filters) with the visible unhealthy
        identities they come from and the generation its change feed is followed from.

        A cluster held at an older status generation is moved by its feed since (`_keys_moved`:
        a line names the identity and its new status code, all that decides whether the row is
        in the caller's unhealthy part) instead of its whole index being read and tested again
        (~270 members a cluster at fleet L, a third of a group page's CPU after a transition);
        one that the feed cannot say for (trimmed) is read afresh."""
        access, gens, filters, by = q.access, q.gens, q.filters, q.by
        got: dict[str, tuple[bytes, ...]] = {}
        todo = []
        older: dict[str, _Unhealthy] = {}
        for c in clusters:
            key = (c, id(access[c]), filters, by)
            hit = self._keys.get(key, gens[c], access[c])
            if hit is not None:
                got[c] = hit.keys
            elif (old := self._keys.peek(key, access[c])) is not None and old[1].pos:
                older[c] = old[1]
            else:
                todo.append(c)
        codes = rows.codes_for(("unhealthy",), filters.suspended).encode()
        held = list(older.items())
        for i in range(0, len(held), INDEX_CHUNK):  # a chunk's feeds a round trip, as below
            asked = [(c, h.pos) for c, h in held[i : i + INDEX_CHUNK]]
            replies = self.reader.follow(asked)
            q.out.round_trips += 1
            for (c, _pos), (gen, whole, lines) in zip(asked, replies, strict=True):
                if int(whole):
                    todo.append(c)
                    continue
                vis = self.reader.visibility(access[c], filters, codes)
                ids = _keys_moved(older[c].ids, lines, vis, filters)
                moved = _Unhealthy.of(ids, by, int(gen))
                self._keys.put((c, id(access[c]), filters, by), moved, gens[c], access[c])
                self.parts_followed += 1
                got[c] = moved.keys
        for i in range(0, len(todo), INDEX_CHUNK):
            # a chunk's indexes are read and reduced to keys before the next is read: after a
            # storm every cluster's index is new, and reading them all at once held ~18 MiB at
            # fleet L beside the entries they replace (docs/operations.md, "Where the arenas
            # level off")
            chunk = todo[i : i + INDEX_CHUNK]
            indexes = self._indexes(chunk, gens, q.out)
            for c in chunk:
                members, pos = indexes[c]
                vis = self.reader.visibility(access[c], filters, codes)
                ids = self._cluster_ids(vis.keep(members), filters)
                found = _Unhealthy.of(ids, by, pos)
                self._keys.put((c, id(access[c]), filters, by), found, gens[c], access[c])
                got[c] = found.keys
        return got

    @staticmethod
    def _cluster_ids(members: list[bytes], filters: Filters) -> tuple[bytes, ...]:
        """The identities of one cluster's visible unhealthy members that pass the namespace
        and name filters."""
        name = filters.name.encode()
        namespaces = {ns.encode() for ns in filters.namespaces}
        found: list[bytes] = []
        for m in members:
            if namespaces or name:
                ns, _kind, obj, _code, _ = rows.member_head(m)
                if (namespaces and ns not in namespaces) or (name and name not in obj):
                    continue
            found.append(rows.identity_bytes(m))
        return tuple(found)

    def _indexes(
        self, clusters: Sequence[str], gens: Mapping[str, Any], out: GroupPage
    ) -> dict[str, tuple[list[bytes], int]]:
        """Each cluster's unhealthy index with the generation its feed is followed from,
        remembered per status generation (read in one round trip for those whose status
        generation moved)."""
        got: dict[str, tuple[list[bytes], int]] = {}
        todo = []
        for c in clusters:
            hit = self._unhealthy.get(c, gens[c])
            if hit is not None:
                got[c] = hit
            else:
                todo.append(c)
        if todo:
            commands: list[Any] = []
            for c in todo:  # the generation first: what is written after it is followed
                commands.append(("GET", keys.generation(c)))
                commands.append(("ZRANGE", keys.by_status(c, "unhealthy"), 0, -1))
            replies = redis_client.pipelined(self.r, commands)
            out.round_trips += 1
            for j, c in enumerate(todo):
                got[c] = (list(replies[2 * j + 1]), int(replies[2 * j] or 0))
                self._unhealthy.put(c, got[c], gens[c])
                out.scanned += len(got[c][0])
            self.index_reads += len(todo)
        return got

    # -- what changed since the walk began -----------------------------------------------------

    def _visible_changes(self, changes: _Changes, access: AccessLike) -> frozenset[bytes]:
        """The keys of a cluster's remembered changed set that `access` may list, kept on the
        entry for the access that asked last: a walk's later pages under writes filter again
        only the clusters whose set moved (a storm's third page re-filtered every cluster's
        set, 8 % of its time)."""
        shown = changes.shown
        if shown[0] is access:
            return shown[1]  # type: ignore[no-any-return]
        keys_ = frozenset(k for k, ns, kind in changes.found if _may_list(access, ns, kind))
        self.changes_filtered += 1
        changes.shown[:] = [access, keys_]  # racing threads store the same for the same access
        return keys_

    def _changed(self, q: _Ask, start: int) -> set[bytes]:
        """`_changed_on` the caller's clusters (read only). The caller's union is kept per
        walk with the status generations it was made at (`_walks`): a later page unions into
        it the sets of the clusters written since only, not every cluster's (200 lookups and
        unions at fleet L). A cluster's set only grows while a walk lasts (a row placed after
        its start stays after it; its feed only adds), so the union made before still holds."""
        key = (id(q.access), start, q.by)
        clusters = tuple(q.clusters)
        gens = tuple(q.gens[c] for c in clusters)
        prev = self._walks.get(key, owner=q.access)
        if prev is not None and prev[0] == clusters:
            moved = [c for c, was, now in zip(clusters, prev[1], gens, strict=True) if was != now]
            if not moved:
                return prev[2]
            changed = prev[2] | self._changed_on(q, start, moved)
        else:
            changed = self._changed_on(q, start, clusters)
        self._walks.put(key, (clusters, gens, changed), owner=q.access, weight=1 + len(changed))
        return changed

    def _changed_on(
        self,
        q: _Ask,
        start: int,
        clusters: Sequence[str],
    ) -> set[bytes]:
        """The groups with a visible row placed at or after `start` in the time index: those
        that transitioned since the walk began (and rows of clocks ahead: placed later), and
        those with a row without a transition time whose status changed since (the untimed
        sets' scores are when their entries were written).

        A cluster's set is remembered at its status generation with the generation it was
        read at; once that moved, the cluster's change feed since then (`Reader.follow`: the
        rows new, gone or whose status moved) adds their groups to it instead of reading every
        time window since `start` again (one script call for a cluster, against one
        ZRANGEBYSCORE per window: a walk begun ten minutes into a storm re-read them all on
        every written cluster). A group so added changed in the walk's time even when its
        row's transition time is older (an event delivered late, a row gone): skipping it is
        what the walk does for a changed group. A feed that cannot say (trimmed) has the
        cluster read afresh."""
        access, by = q.access, q.by
        changed: set[bytes] = set()
        todo: list[str] = []
        older: dict[str, _Changes] = {}
        for c in clusters:
            hit = self._changes.get((c, start, by), q.gens[c])
            if hit is not None:
                changed |= self._visible_changes(hit, access[c])
            elif (old := self._changes.peek((c, start, by))) is not None:
                older[c] = old[1]
            else:
                todo.append(c)
        if older:
            asked = [(c, old.gen) for c, old in older.items()]
            replies = self.reader.follow(asked)
            q.out.round_trips += 1
            for (c, _gen), (gen, whole, lines) in zip(asked, replies, strict=True):
                if int(whole):
                    todo.append(c)
                    continue
                moved = set(older[c].found)
                for line in lines.split(b"\n"):
                    if line:
                        identity = line[:-2]
                        ns, kind, _name, _ = identity.split(b"\x00", 3)
                        moved.add((_key_of(identity, by), ns.decode(), kind.decode()))
                now_changed = _Changes(frozenset(moved), int(gen))
                self._changes.put((c, start, by), now_changed, q.gens[c])
                self.followed += 1
                changed |= self._visible_changes(now_changed, access[c])
        if not todo:
            return changed
        now = int(time.time() * 1000)
        first, last = start // timeline.WINDOW_MS, now // timeline.WINDOW_MS + 1
        untimed = timeline.untimed_suffixes()  # scored by when their entries were written
        commands: list[Any] = []
        spans = []
        for c in todo:
            # the generation first: what is written after it is followed from it next time
            commands.append(("GET", keys.generation(c)))
            for w in range(first, last + 1):
                low = max(start - w * timeline.WINDOW_MS, 0)
                commands.append(("ZRANGEBYSCORE", keys.timeline_window(c, str(w)), low, "+inf"))
            for suffix in untimed:
                commands.append(("ZRANGEBYSCORE", keys.timeline_window(c, suffix), start, "+inf"))
            spans.append(len(commands))
        read: list[Any] = redis_client.pipelined(self.r, commands)
        q.out.round_trips += 1
        at = 0
        for c, end in zip(todo, spans, strict=True):
            gen = int(read[at] or 0)
            read_set: set[tuple[bytes, str, str]] = set()
            for entries in read[at + 1 : end]:
                for e in entries:
                    ns, kind, name, _code = timeline.parse(e)
                    key = _key_of(b"%s\x00%s\x00%s\x00" % (ns, kind, name), by)
                    read_set.add((key, ns.decode(), kind.decode()))
            at = end
            # kept with each row's namespace and kind: what the caller may list is theirs
            read_changed = _Changes(frozenset(read_set), gen)
            self._changes.put((c, start, by), read_changed, q.gens[c])
            changed |= self._visible_changes(read_changed, access[c])
        return changed

    # -- the rest, in key order ----------------------------------------------------------------

    def _merge_objects(
        self,
        q: _Ask,
        after_key: bytes,
        skip: set[bytes],
        want: int,
    ) -> list[bytes]:
        """The next `want` identities after `after_key` held by any of the clusters (visible,
        passing the filters), but those in `skip`: a merge of the clusters' streams. What each
        cluster's stream yielded after `after_key` is remembered per status generation
        (`_runs`), so after a write only the written clusters' streams are read again."""
        access, clusters, filters, out = q.access, q.clusters, q.filters, q.out
        chunk = max(want, 16)
        n = len(clusters)
        seen: list[list[bytes]] = [[] for _ in range(n)]
        done = [False] * n
        read = [False] * n  # read from Redis by this merge: remembered at the end
        streams: list[Stream | None] = [None] * n
        for i, c in enumerate(clusters):
            run = self._runs.get((c, id(access[c]), filters, after_key), q.gens[c], access[c])
            if run is not None:
                seen[i], done[i] = list(run[0]), run[1]
        bufs = [deque(ids) for ids in seen]
        got: list[bytes] = []
        while len(got) < want:
            empty = [i for i, b in enumerate(bufs) if not b and not done[i]]
            if empty:
                for i in empty:
                    if streams[i] is None:  # from the end of what is known of it
                        c = clusters[i]
                        start = seen[i][-1] if seen[i] else after_key
                        streams[i] = self.reader.stream(c, access[c], filters, start)
                        read[i] = True
                        self.streams_read += 1
                        done[i] = streams[i] is None
                live = [i for i in empty if streams[i] is not None]
                if not live:
                    continue
                chunks = self.reader.more([s for i in live if (s := streams[i])], filters, chunk)
                out.round_trips += 1
                for i, ch in zip(live, chunks, strict=True):
                    more = [rows.identity_bytes(m) for m in ch.members]
                    bufs[i].extend(more)
                    seen[i].extend(more)
                    done[i] = ch.done
                    out.scanned += ch.scanned
                continue
            heads = [b[0] for b in bufs if b]
            if not heads:
                break
            k = min(heads)
            for b in bufs:
                if b and b[0] == k:
                    b.popleft()
            if k not in skip:
                got.append(k)
        for i, c in enumerate(clusters):
            if read[i]:
                run = (tuple(seen[i]), done[i])
                key = (c, id(access[c]), filters, after_key)
                self._runs.put(key, run, q.gens[c], access[c], 1 + len(seen[i]))
        return got

    def _merge_namespaces(
        self,
        q: _Ask,
        after_key: bytes,
        skip: set[bytes],
        want: int,
    ) -> list[tuple[int, bytes]]:
        """The next `want` namespaces after `after_key` with rows passing the filters on any of
        the clusters, but those in `skip`: candidates from the clusters' namespace lists (the
        caller's namespaces, or all the cluster has when the caller has cluster-wide kinds),
        confirmed by their counts."""
        lists = self._namespace_lists(q)
        after = after_key[:-1].decode() if after_key else None
        merged = heapq.merge(
            *(ns[bisect.bisect_right(ns, after) if after is not None else 0 :] for ns in lists)
        )
        got: list[tuple[int, bytes]] = []
        last = None
        batch: list[str] = []
        for ns in merged:
            if ns == last:
                continue
            last = ns
            if ns.encode() + b"\x00" in skip:
                continue
            batch.append(ns)
            if len(batch) >= max(2 * (want - len(got)), 16):
                got += self._confirmed(q, batch)
                batch = []
                if len(got) >= want:
                    return got[:want]
        if batch:
            got += self._confirmed(q, batch)
        return got[:want]

    def _confirmed(
        self,
        q: _Ask,
        batch: list[str],
    ) -> list[tuple[int, bytes]]:
        members = self._namespace_members(q, batch)
        return [(0, ns.encode() + b"\x00") for ns in batch if members.get(ns)]

    def _namespace_lists(
        self,
        q: _Ask,
    ) -> list[list[str]]:
        """Per cluster, the namespaces the caller may see rows in, sorted (narrowed to the
        namespace filter)."""
        access, clusters, gens, filters, out = q.access, q.clusters, q.gens, q.filters, q.out
        wide = [c for c in clusters if access[c].cluster_wide and not filters.namespaces]
        known: dict[str, list[str] | None] = {}
        for c in wide:
            hit = self._namespaces.get(c, gens[c])
            known[c] = hit[0] if hit is not None else None
        todo = [c for c, names in known.items() if names is None]
        if todo:
            todo = self._namespaces_followed(todo, gens, known, out)
        if todo:
            p = self.r.pipeline(transaction=False)
            for c in todo:
                p.get(keys.generation(c))  # first: the feed is followed from it next time
                for b in range(nscounts.BUCKETS):
                    p.hkeys(keys.nscounts(c, b))
            replies = p.execute()
            out.round_trips += 1
            span = 1 + nscounts.BUCKETS
            for i, c in enumerate(todo):
                buckets = replies[i * span + 1 : (i + 1) * span]
                names = sorted({redis_client.text(n) for ns in buckets for n in ns})
                self._namespaces.put(c, (names, int(replies[i * span] or 0)), gens[c])
                known[c] = names
            self.index_reads += len(todo)
        lists = []
        for c in clusters:
            if c in wide:
                lists.append(known[c] or [])
            elif filters.namespaces:
                a = access[c]
                lists.append(
                    sorted(ns for ns in filters.namespaces if a.cluster_wide or ns in a.namespaces)
                )
            else:
                lists.append(sorted(access[c].namespaces))
        return lists

    def _held(
        self,
        memo: Memo[str, Any],
        clusters: Sequence[str],
        q: _Ask,
        every: bool,
        key_of: Any,
    ) -> dict[str, tuple[dict[Any, str], int]]:
        """Per cluster, what `memo` holds of it ((values by key, the generation its change feed
        is followed from)): at its status generation, or of an older one carried forward by the
        feed since (common.index.read.lua.FOLLOW; every entry's line when `every`): the keys
        (`key_of` a line's identity) the entries touched are dropped, to be read again, the rest
        kept. Clusters neither held nor carried are left out (read afresh)."""
        out: dict[str, tuple[dict[Any, str], int]] = {}
        older: dict[str, tuple[dict[Any, str], int]] = {}
        for c in clusters:
            hit = memo.get(c, q.gens.get(c))
            if hit is not None:
                out[c] = hit
            elif c in q.gens and (old := memo.peek(c)) is not None and old[1][1]:
                older[c] = old[1]
        if not older:
            return out
        asked = [(c, pos) for c, (_values, pos) in older.items()]
        replies = self.reader.follow(asked, every)
        q.out.round_trips += 1
        for (c, _pos), (gen, whole, lines) in zip(asked, replies, strict=True):
            if int(whole):
                continue
            values = older[c][0]
            touched = {key_of(line[:-2]) for line in lines.split(b"\n") if line}
            if any(k in values for k in touched):
                values = {k: v for k, v in values.items() if k not in touched}
            out[c] = (values, int(gen))
            memo.put(c, out[c], q.gens[c])
            self.followed += 1
        return out

    @staticmethod
    def _codes_moved(
        known: dict[bytes, str], ids: list[bytes], whole: int, lines: bytes, codes: list[bytes]
    ) -> dict[bytes, str]:
        """A cluster's codes held at an older generation, moved by a CODES_SINCE reply for
        `ids` (the held ones first): the identities its feed touched dropped, the page's
        looked up (or, "=", still right) kept; all of them afresh when the feed could not say."""
        if whole:
            known = {}
        else:
            touched = {line[:-2] for line in lines.split(b"\n") if line}
            if any(k in known for k in touched):
                known = {k: v for k, v in known.items() if k not in touched}
        looked = {
            k: sys.intern(code.decode()) for k, code in zip(ids, codes, strict=True) if code != b"="
        }
        if looked:
            known = {**known, **looked}
        return known

    def _namespaces_followed(
        self,
        todo: list[str],
        gens: Mapping[str, Any],
        known: dict[str, list[str] | None],
        out: GroupPage,
    ) -> list[str]:
        """The clusters of `todo` whose namespaces are still those held at an older status
        generation, by their change feeds since (common.index.read.lua.FOLLOW: no row came or
        went, so no namespace did; a transition moves only codes), set in `known`; returns
        the others, to be read."""
        held = {c: hit[1] for c in todo if (hit := self._namespaces.peek(c)) is not None}
        asked = [(c, pos) for c, (_names, pos) in held.items() if pos]
        if not asked:
            return todo
        replies = self.reader.follow(asked)
        out.round_trips += 1
        for (c, _pos), (gen, whole, lines) in zip(asked, replies, strict=True):
            if int(whole) or any(
                line[-2:-1] == b"+" or line[-1:] == b"." for line in lines.split(b"\n") if line
            ):
                continue
            names = held[c][0]
            self._namespaces.put(c, (names, int(gen)), gens[c])
            known[c] = names
            self.followed += 1
        return [c for c in todo if known[c] is None]

    # -- a page's groups with their clusters ---------------------------------------------------

    def _object_groups(
        self,
        q: _Ask,
        page: list[tuple[int, bytes]],
        spare: Sequence[bytes] = (),
    ) -> list[Group]:
        """The page's object groups, with the status of each on every cluster that holds it
        (one script call per cluster, all in one round trip). Each cluster's share of a page
        (its Members of the page's groups) is remembered per status generation (`_shares`):
        after a write, only the written clusters' shares are built again."""
        access, clusters, filters, out = q.access, q.clusters, q.filters, q.out
        if not page:
            return []
        ids_of_page = tuple(k for _n, k in page)
        serial = self._serial(frozenset(ids_of_page))
        shares = self._kept_shares(q, serial)
        need: list[tuple[str, list[bytes]]] = []
        extra: dict[str, list[bytes]] = {}
        parts: list[tuple[bytes, str, str]] | None = None
        spares: list[tuple[bytes, str, str]] = []
        for c in clusters:
            if c in shares:
                continue
            a = access[c]
            hit = self._shares.get((c, id(a), filters, serial), q.gens.get(c), a)
            if hit is not None:
                shares[c] = hit
                continue
            if parts is None:
                parts = [(k, *rows.split_identity(k.decode())[:2]) for k in ids_of_page]
                spares = [(k, *rows.split_identity(k.decode())[:2]) for k in spare]
            need.append((c, [k for k, ns, kind in parts if _may_list(a, ns, kind)]))
            extra[c] = [k for k, ns, kind in spares if _may_list(a, ns, kind)]
        # Per cluster: its codes as held at its status generation; or held at an older one,
        # whose feed since says which of them still hold (CODES_SINCE, in the round trip that
        # looks up the rest); or none, looked up with the generation they are read after.
        pending: list[tuple[str, list[bytes], dict[bytes, str], int]] = []
        asked: list[tuple[str, list[bytes]]] = []
        since: list[tuple[str, int, list[bytes], list[bytes]]] = []
        fresh: list[str] = []
        older: dict[str, dict[bytes, str]] = {}
        for c, ids in need:
            now = self._codes.get(c, q.gens.get(c))
            old = self._codes.peek(c) if now is None and c in q.gens else None
            if now is not None:
                known, pos = now  # read only
            elif old is not None and old[1][1]:
                older[c], pos = old[1]
                wanted = ids + [k for k in extra[c] if k not in older[c]]
                since.append(
                    (
                        c,
                        pos,
                        [k for k in wanted if k in older[c]],
                        [k for k in wanted if k not in older[c]],
                    )
                )
                pending.append((c, ids, {}, pos))
                continue
            else:
                known, pos = {}, 0
                fresh.append(c)
            pending.append((c, ids, known, pos))
            unknown = [k for k in ids if k not in known]
            if unknown:  # asked anyway: the spares it does not know too
                asked.append((c, unknown + [k for k in extra[c] if k not in known]))
        fresh = [c for c in fresh if c in q.gens]
        replies: dict[str, list[bytes]] = {}
        moved: dict[str, tuple[dict[bytes, str], int]] = {}
        positions: dict[str, int] = {}
        if asked or since:  # only what the clusters written since the last page hold
            # the generations of clusters held afresh first: their feeds are followed from them
            lead = tally.generations_command(fresh) if fresh else None
            got = self.reader.codes(asked, lead, since)
            if lead is not None:
                positions = {c: int(g or 0) for c, g in zip(fresh, got.pop(0), strict=True)}
            replies = dict(zip((c for c, _ in asked), got[: len(asked)], strict=True))
            for (c, _pos, held_ids, rest), (gen, whole, lines, codes) in zip(
                since, got[len(asked) :], strict=True
            ):
                known = self._codes_moved(older[c], held_ids + rest, int(whole), lines, codes)
                moved[c] = (known, int(gen))
            out.round_trips += 1
            self.lookups += len(asked) + len(since)
            self.followed += len(moved)
        unknowns = dict(asked)
        allowed = {code for code in rows.CODE_STATUS if _code_ok(code, filters)}
        for c, ids, known, pos in pending:
            if c in moved:
                known, pos = moved[c]
                if len(known) >= REMEMBERED_PER_CLUSTER_MAX:  # start again with this page's
                    keep = {*ids, *extra[c]}
                    known = {k: v for k, v in known.items() if k in keep}
                self._codes.put(c, (known, pos), q.gens[c])
            elif c in unknowns:
                # interned: the same code and revision repeat across objects and clusters
                new = {
                    k: sys.intern(code.decode())
                    for k, code in zip(unknowns[c], replies[c], strict=True)
                }
                if len(known) >= REMEMBERED_PER_CLUSTER_MAX:  # start again with this page's
                    known = {k: known[k] for k in ids if k in known}
                known = {**known, **new}  # the page's and its spares
                if c in q.gens:
                    self._codes.put(c, (known, pos or positions.get(c, 0)), q.gens[c])
            # one Member per (cluster, code, revision): shared
            share = {k: _member(c, known[k]) for k in ids if known[k][:1] in allowed}
            shares[c] = share
            self.shares_built += 1
            if c in q.gens:
                key = (c, id(access[c]), filters, serial)
                self._shares.put(key, share, q.gens[c], access[c], 1 + len(share))
        groups = []
        ranked = self._ranked(q, serial, shares, ids_of_page)
        for (n, k), members in zip(page, ranked, strict=True):
            ns, kind, name = rows.split_identity(k.decode())
            groups.append(Group(k, ns, kind, name, members, n))
        return groups

    def _kept_shares(self, q: _Ask, serial: int) -> dict[str, Share]:
        """The shares of the last ranking of the same groups for this caller and filters on the
        clusters whose status generation has not moved since (`_Ranking.kept`)."""
        prev = self._rankings.get((id(q.access), q.filters, q.by, serial), owner=q.access)
        return prev.kept(q.clusters, q.gens) if prev is not None else {}

    def _ranked(
        self,
        q: _Ask,
        serial: int,
        shares: Mapping[str, Share],
        keys: Sequence[Any],
    ) -> list[list[Member]]:
        """`_rank`, moved from the last ranking of the same groups for this caller and filters
        (`_rankings`)."""
        key = (id(q.access), q.filters, q.by, serial)
        prev = self._rankings.get(key, owner=q.access)
        gens = tuple(q.gens.get(c) for c in q.clusters)
        got = _rank(q.clusters, shares, keys, prev, gens)
        if got is not prev:
            weight = 1 + sum(len(ms) for ms in got.out)
            self._rankings.put(key, got, owner=q.access, weight=weight)
        return got.out

    def _serial(self, ids: frozenset[Any]) -> int:
        """A number for a page's groups, whatever their order (the same groups, the same number
        while remembered): what the clusters' shares are keyed by, hashed once per page instead
        of per cluster."""
        got = self._serials.get(ids)
        if got is None:
            with self._lock:
                got = next(self._next_serial)
            self._serials.put(ids, got)
        return got

    def _namespace_groups(
        self,
        q: _Ask,
        page: list[tuple[int, bytes]],
        spare: Sequence[bytes] = (),
    ) -> list[Group]:
        names = [k[:-1].decode() for _n, k in page]
        members = self._namespace_members(q, names, [k[:-1].decode() for k in spare])
        return [
            Group(k, ns, None, None, members.get(ns, []), n)
            for (n, k), ns in zip(page, names, strict=True)
        ]

    def _namespace_members(
        self,
        q: _Ask,
        names: list[str],
        spare: Sequence[str] = (),
    ) -> dict[str, list[Member]]:
        """Per namespace, the clusters where the caller may list rows there that pass the
        filters, from the per-namespace counts (one round trip). Each cluster's share of the
        page is remembered per status generation (`_shares`, as for object groups)."""
        access, clusters, filters, out = q.access, q.clusters, q.filters, q.out
        if not names:
            return {}
        serial = self._serial(frozenset(names))
        shares = self._kept_shares(q, serial)
        need: list[tuple[str, list[str]]] = []
        for c in clusters:
            if c in shares:
                continue
            a = access[c]
            hit = self._shares.get((c, id(a), filters, serial), q.gens.get(c), a)
            if hit is not None:
                shares[c] = hit
                continue
            mine = [ns for ns in names if a.cluster_wide or ns in a.namespaces]
            if mine:
                need.append((c, mine))
        values = self._held(
            self._nsvalues, [c for c, _ in need], q, every=False, key_of=_namespace_of
        )
        p = self.r.pipeline(transaction=False)
        spans = []
        held: list[tuple[str, dict[str, str], int]] = []
        for c, mine in need:
            known, at = values.get(c, ({}, 0))  # read only
            held.append((c, known, at))
            unknown = [ns for ns in mine if ns not in known]
            if unknown:  # only what the clusters written since the last page hold
                a = access[c]
                unknown += [
                    ns for ns in spare if ns not in known and (a.cluster_wide or ns in a.namespaces)
                ]
                if c not in values:  # held afresh: its feed is followed from this generation
                    p.get(keys.generation(c))
                spans.append((c, unknown, nscounts.queue_read(p, c, unknown)))
        replies = p.execute() if spans else []
        out.round_trips += 1 if spans else 0
        self.lookups += len(spans)
        pos = 0
        fresh = {}
        positions: dict[str, int] = {}
        for c, unknown, groups in spans:
            if c not in values:
                positions[c] = int(replies[pos] or 0)
                pos += 1
            fresh[c] = nscounts.collect(groups, replies[pos : pos + len(groups)])
            fresh[c].update((ns, "") for ns in unknown if ns not in fresh[c])
            pos += len(groups)
        kinds = frozenset(filters.kinds)
        codes = frozenset(code for code in rows.CODE_STATUS if _code_ok(code, filters))
        for c, known, at in held:
            if c in fresh:
                known = (
                    {**known, **fresh[c]} if len(known) < REMEMBERED_PER_CLUSTER_MAX else fresh[c]
                )
                if c in q.gens:
                    self._nsvalues.put(c, (known, at or positions.get(c, 0)), q.gens[c])
            a = access[c]
            # This caller's members on this cluster, remembered by its generation: a page
            # after a write re-sums only the written clusters.
            mkey = (c, id(a), filters)
            shown = None if c in fresh else self._nsmembers.get(mkey, q.gens.get(c), a)
            if shown is None:
                shown = {}
                if c in q.gens:
                    self._nsmembers.put(mkey, shown, q.gens[c], a)
            share: dict[str, Member] = {}
            for ns in names:
                if ns in shown:
                    m = shown[ns]
                else:
                    m = None
                    value = known.get(ns)
                    summed = value and _summed(
                        value, a.cluster_wide, a.namespaces.get(ns, _NONE), kinds, codes
                    )
                    if summed:
                        m = Member(c, *summed)
                    if len(shown) < REMEMBERED_PER_CLUSTER_MAX:
                        shown[ns] = m
                if m is not None:
                    share[ns] = m
            shares[c] = share
            self.shares_built += 1
            if c in q.gens:
                self._shares.put(
                    (c, id(a), filters, serial), shares[c], q.gens[c], a, 1 + len(share)
                )
        ranked = self._ranked(q, serial, shares, names)
        return {ns: ms for ns, ms in zip(names, ranked, strict=True) if ms}

    # -- namespaces of name-filtered rows ------------------------------------------------------

    def _drained_rows(self, q: _Ask) -> Iterator[tuple[str, bytes]]:
        """Every row of the caller's clusters that passes the filters, as (cluster, member),
        read from all clusters' streams a chunk per round trip (at most DRAIN_MAX rows)."""
        access, filters, out = q.access, q.filters, q.out
        streams = [
            s for c in q.clusters if (s := self.reader.stream(c, access[c], filters)) is not None
        ]
        total = 0
        while streams:
            chunks = self.reader.more(streams, filters, 256)
            out.round_trips += 1
            left = []
            for s, ch in zip(streams, chunks, strict=True):
                out.scanned += ch.scanned
                total += len(ch.members)
                for m in ch.members:
                    yield s.cluster, m
                if not ch.done:
                    left.append(s)
            streams = left
            if total > DRAIN_MAX:
                _too_many(filters)

    def _drained_order(
        self,
        q: _Ask,
        groups: dict[bytes, Group],
    ) -> list[tuple[int, bytes]]:
        """Namespace groups of a name filter, or any groups of a label selector, from every
        matching row (at most DRAIN_MAX), in the groups' order; the groups go into `groups`."""
        if q.by == "object":
            return self._drained_objects(q, groups)
        per: dict[str, dict[str, Member]] = {}
        for cluster, m in self._drained_rows(q):
            ns, _kind, _name, code, _ = rows.member_head(m)
            status, susp = tally.code_status(code.decode())
            mem = per.setdefault(ns.decode(), {}).get(cluster)
            if mem is None:
                mem = per[ns.decode()][cluster] = Member(cluster, status, susp, 0, {})
            mem.objects += 1
            counted = cast(dict[str, int], mem.statuses)  # its own dict, made just above
            counted[status] = counted.get(status, 0) + 1
            mem.suspended = mem.suspended or susp
            if RANK[status] < RANK[mem.status]:
                mem.status = status
        order = []
        for space, ms in per.items():
            members = sorted(ms.values(), key=lambda m: (RANK[m.status], m.cluster))
            k = space.encode() + b"\x00"
            g = Group(k, space, None, None, members)
            g.order = sum(1 for m in members if m.statuses.get("unhealthy"))
            groups[k] = g
            order.append((g.order, k))
        order.sort(key=_order)
        return order

    def _drained_objects(self, q: _Ask, groups: dict[bytes, Group]) -> list[tuple[int, bytes]]:
        """Object groups of a label selector, from every matching row (the selector may hold
        for an object on some clusters only: a group counts those), in the groups' order."""
        per: dict[bytes, list[Member]] = {}
        for cluster, m in self._drained_rows(q):
            code = rows.member_status_code(m).decode()
            # shared per (cluster, code, revision), as the STATUS_REVISIONS path's members
            member = _member(cluster, code + rows.revision_of(m))
            per.setdefault(rows.identity_bytes(m), []).append(member)
        order = []
        for k, members in per.items():
            members.sort(key=lambda m: (RANK[m.status], m.cluster))
            ns, kind, name = rows.split_identity(k.decode())
            g = Group(k, ns, kind, name, members)
            g.order = sum(1 for m in members if m.status == "unhealthy")
            groups[k] = g
            order.append((g.order, k))
        order.sort(key=_order)
        return order

    # -- one group -----------------------------------------------------------------------------

    def group(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        key: bytes,
        by: str,
        confirm_version: bool = False,
    ) -> tuple[Group, list[tuple[str, bytes]], keys.GrantsVersion | None]:
        """One group with every cluster where the caller may list it, and for an object group
        its rows (cluster, member), worst status first, then by cluster."""
        wanted = set(filters.clusters)
        clusters = [c for c in sorted(access) if not wanted or c in wanted]
        commands: list[Any] = [("GET", keys.VERSION)] if confirm_version else []
        if by == "namespace":
            version = keys.GrantsVersion(self.r.get(keys.VERSION)) if confirm_version else None
            ns = key[:-1].decode()
            if filters.labels:  # the per-namespace counts know no labels: from the rows
                narrowed = dataclasses.replace(filters, namespaces=(ns,))
                ask = _Ask(access, clusters, {}, narrowed, by, GroupPage([], None))
                drained: dict[bytes, Group] = {}
                self._drained_order(ask, drained)
                got = drained.get(key)
                return Group(key, ns, None, None, got.clusters if got else []), [], version
            ask = _Ask(access, clusters, {}, filters, by, GroupPage([], None))
            members = self._namespace_members(ask, [ns])
            return Group(key, ns, None, None, members.get(ns, [])), [], version
        ns, kind, name = rows.split_identity(key.decode())
        asked = [c for c in clusters if kind in _visible_kinds(access[c], ns)]
        commands += [
            ("ZRANGEBYLEX", keys.rows(c), b"[" + key, b"(" + key + b"\xff", "LIMIT", 0, 1)
            for c in asked
        ]
        replies = redis_client.pipelined(self.r, commands)
        version = keys.GrantsVersion(replies.pop(0)) if confirm_version else None
        found: list[tuple[Member, tuple[str, bytes]]] = []
        for c, got in zip(asked, replies, strict=True):
            if not got:
                continue
            code = rows.member_status_code(got[0]).decode()
            if not _code_ok(code, filters):
                continue
            if filters.labels and not filters.labels.matches(rows.labels_of(got[0])):
                continue
            status, susp = tally.code_status(code)
            member = Member(c, status, susp, revision=rows.revision_of(got[0]))
            found.append((member, (c, got[0])))
        found.sort(key=lambda p: (RANK[p[0].status], p[0].cluster))
        g = Group(key, ns, kind, name, [m for m, _ in found])
        return g, [row for _, row in found], version


def _too_many(filters: Filters) -> None:
    if filters.labels:
        raise InvalidInput(
            "labelSelector",
            f"matches more than {DRAIN_MAX} objects: too many to group; narrow the selector "
            "or add filters",
        )
    raise InvalidInput(
        "name",
        f"matches more than {DRAIN_MAX} objects: too many to group by namespace; "
        "use a longer substring, or by=object",
    )


def group_key(namespace: str, kind: str | None = None, name: str | None = None) -> bytes:
    """The key of an object group (all three given) or of a namespace group."""
    if kind is None or name is None:
        return namespace.encode() + b"\x00"
    return rows.sort_key(namespace, kind, name).encode()


for _cache in (_member, _decoded, _summed):  # decoded values of generations: cleared by sweeps
    memo.on_sweep(_cache.cache_clear)
