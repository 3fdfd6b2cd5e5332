"""Facets of groups (`GET /api/v1/facets?by=object|namespace`): for each filter value, how many
groups (as `GET /api/v1/groups` with the same `by` lists them) that value would return.

- `clusters`: per cluster, the groups it holds (objects: its visible rows; namespaces: its
  namespaces holding one);
- `kinds`: per kind, the groups of that kind (namespaces: holding a row of it);
- `statuses`: per status, the groups with a row of that status on some cluster (the groups'
  own `statuses` counts clusters the same way);
- `suspended`: `true`, the groups with a suspended row; `false`, those with a row that is not;
- `total`: the groups.

Counting distinct groups across clusters needs every visible row's identity, so each cluster's
rows are held here as compact arrays, in identity order: an interned identity number and a
status code per row, read once per cluster status generation (a write that changes only rows'
messages does not move it: common.index.keys.status_generation; a script returns identities and codes
only, a chunk at a time: common.index.read.lua.IDENTS) and shared by every caller. Each
caller's counts (per access, filters and grouping) are kept per group and moved cluster by
cluster: a write to a cluster costs the next request that cluster's change feed since its rows
were held (common.index.feed, one script: common.index.read.lua.FOLLOW, which returns only the
entries that moved an identity or a status code), the held rows move by it, and the caller's
counts move by the difference (a transition: one row's code). Where the feed cannot say what
moved (its entries since were trimmed, or the generation moved past its last entry) the
cluster's rows are read again whole, from the generation read before them. While
one request moves a caller's counts, that caller's other requests get the answer before it
(exact as of the generations it was counted at) instead of waiting.

So the first answer in a process reads and counts every cluster, a further caller's counts cost
a few integers per group (by namespace, also per (namespace, kind) pair), and an answer while no
cluster was written costs one `MGET` (figures: docs/benchmarks.md).
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from common.index import rows
from common.index.read import tally
from common.index.read.memo import Memo, Recent
from common.index.read.plan import AccessLike, Filters, same_access
from common.index.read.reader import Facets, Reader
from common.kinds.status import STATUSES

__all__ = ["GroupFacets"]

CHUNK = 8192
"""Rows one script call returns (the rest in further round trips)."""
CLUSTERS_PER_READ = 16
"""Clusters read in one round trip (up to CHUNK rows each, ~70 bytes a row: ~9 MB). At fleet XL
every cluster in one round trip was ~180 MB per shard in one pipeline: seconds of script time
ahead of every other client of that shard, past the query timeout, for every worker at once."""
STATES_MAX = 64
"""Callers' counts (access, filters, grouping) remembered per process."""
DONORS = 8
"""Callers' counts of one (filters, grouping) that new counts may be seeded from (`_seed`)."""
DONOR_KEYS = 1024
"""(filters, grouping) whose last counts are kept for seeding."""
IDS_MAX = 4_000_000
"""Interned identities before they (and everything counted from them) are dropped."""

_STATUS_CODES = sorted(rows.CODE_STATUS)
_TO_INDEX = bytes.maketrans("".join(_STATUS_CODES).encode(), bytes(range(len(_STATUS_CODES))))
"""A status code byte to its index in `_STATUS_CODES`."""
_STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}
_CODE_PARTS = [
    (_STATUS_INDEX[tally.code_status(c)[0]], int(tally.code_status(c)[1])) for c in _STATUS_CODES
]
"""Per code index: (status index, 1 if suspended)."""
DELETED = ord(".")
"""The code FOLLOW gives a row gone."""
_SLOTS = 3 + len(STATUSES)
"""Per group: rows, rows not suspended, rows suspended, then rows by status."""


@dataclass(frozen=True)
class _Held:
    """One cluster's rows as of a generation: identity numbers and code indexes in identity
    order, and where each namespace's rows start (`starts` has one more entry: the end)."""

    gen: Any
    ids: array[int]
    codes: bytes
    namespaces: list[str]
    starts: array[int]
    pos: int = 0
    """The cluster's generation whose change feed entries (and every one before) the rows
    hold (common.index.feed): the next write moves them by the entries after it. 0: unknown."""
    delta: list[Any] = field(default_factory=list, compare=False)
    """[the Held this one replaced, its rows gone, its rows new] ((identity, code) pairs):
    callers who counted the one before move by the difference (usually a few rows) instead
    of counting both whole. Cleared on the one before, so only one step is kept."""


def _delta(old: _Held, new: _Held) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The (identity, code) pairs of `old` not in `new`, and of `new` not in `old`."""
    if old.ids == new.ids:  # a transition: the same rows, some codes moved
        moved = [j for j, (a, b) in enumerate(zip(old.codes, new.codes, strict=True)) if a != b]
        return [(old.ids[j], old.codes[j]) for j in moved], [
            (new.ids[j], new.codes[j]) for j in moved
        ]
    before = set(zip(old.ids, old.codes, strict=True))
    after = set(zip(new.ids, new.codes, strict=True))
    return sorted(before - after), sorted(after - before)


@dataclass
class _State:
    """One caller's counts: per group, its rows by suspension and status across the clusters
    counted (the `held` of each), and the facets they make."""

    access: Mapping[str, AccessLike]
    by: str
    epoch: int
    """The interning these counts' identity numbers belong to (`GroupFacets._epoch`)."""
    held: dict[str, _Held] = field(default_factory=dict)
    slots: array[int] = field(default_factory=lambda: array("i"))
    kinds_of: dict[tuple[int, int], int] = field(default_factory=dict)
    """Namespace groups: rows per (namespace, kind)."""
    total: int = 0
    clusters: dict[str, int] = field(default_factory=dict)
    kinds: dict[int, int] = field(default_factory=dict)
    statuses: list[int] = field(default_factory=lambda: [0] * len(STATUSES))
    suspended: list[int] = field(default_factory=lambda: [0, 0])
    out: Facets | None = None
    gens: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class GroupFacets:
    """Facets of groups (one per process; thread-safe)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.r: redis.Redis = reader.r
        self._lock = threading.Lock()
        self._interning = threading.Lock()
        self._reset()
        self.reads = 0
        """Clusters whose rows were read (not held for their generation): for tests."""
        self.followed = 0
        """Clusters whose rows were moved by their change feeds (not read again): for tests."""
        self.whole = 0
        """Clusters' shares counted whole (not moved by their difference): for tests."""
        self.seeded = 0
        """Clusters' shares new counts took over from another caller's (`_seed`): for tests."""
        self._donors: Recent[tuple[Filters, str], _State] = Recent(DONORS, DONOR_KEYS)
        """Per (filters, grouping), the counts made last: what new counts are seeded from."""

    def _reset(self) -> None:
        self._epoch = getattr(self, "_epoch", 0) + 1
        self._ids: dict[bytes, int] = {}
        self._id_ns = array("I")
        self._id_kind = array("I")
        self._id_key: list[bytes] = []
        self._ns: dict[str, int] = {}
        self._ns_names: list[str] = []
        self._kinds: dict[str, int] = {}
        self._kind_names: list[str] = []
        self._held: dict[str, _Held] = {}
        self._states: Memo[Any, _State] = Memo(STATES_MAX, "group_facets.states")

    def facets(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        by: str,
        confirm_version: bool = False,
    ) -> Facets:
        """The groups' counts under `filters` over what `access` may list (one round trip
        while no cluster was written; `confirm_version` as Reader.facets has it)."""
        wanted = set(filters.clusters)
        clusters = [c for c in sorted(access) if not wanted or c in wanted]
        gens, version = tally.status_generations(self.r, clusters, confirm_version)
        # Keyed by the clusters' access objects (shared while the caller's grants hold), not
        # the mapping: a `cluster` filter narrows it to a new mapping on every request.
        mine = {c: access[c] for c in clusters}
        owners = tuple(mine.values())
        memo = (tuple(id(a) for a in owners), tuple(clusters), filters, by)
        with self._lock:
            if len(self._ids) > IDS_MAX:  # identities of rows long gone: start again
                with self._interning:
                    self._reset()
            st = self._states.get(memo, owner=owners)
            donors = None
            if st is None:
                st = _State(mine, by, self._epoch)
                st.lock.acquire()  # held until seeded: asked meanwhile, it waits for the seed
                donors = self._donors.push((filters, by), st)
                self._states.put(memo, st, owner=owners)
        if donors is not None:
            try:
                self._seed(st, filters, donors)
            except BaseException:
                st.lock.release()
                raise
        elif not st.lock.acquire(blocking=st.out is None):
            # Another request is moving these counts to newer generations: this one gets the
            # answer before it (exact as of then) rather than queueing behind its reads.
            assert st.out is not None  # set once counted, never unset
            return dataclasses.replace(st.out, version=version)
        try:
            if st.out is not None and st.gens == gens:  # the memo holds the same clusters
                return dataclasses.replace(st.out, version=version)
            stale = [c for c, g in zip(clusters, gens, strict=True) if self._stale(c, g)]
            held = self._read(stale, gens, clusters)
            if st.epoch != self._epoch:  # identities renumbered meanwhile: count afresh
                return self.facets(access, filters, by, confirm_version)
            for c in clusters:
                old, new = st.held.get(c), held[c]
                if old is new:
                    continue
                if old is not None:
                    self._move(st, c, old, new, filters)
                else:
                    self._count(st, c, new, filters, 1)
                st.held[c] = new
            st.gens = list(gens)
            st.out = self._facets(st)
            return dataclasses.replace(st.out, version=version)
        finally:
            st.lock.release()

    def _seed(self, st: _State, filters: Filters, donors: list[_State]) -> None:
        """Start new counts (`st`, locked) from the counts of a recent caller of the same
        filters and grouping who had the same access in most clusters (`donors`): theirs
        copied, the clusters where the access differs or that `st` does not count taken away
        whole; the request then counts what is left like a written cluster. A caller's access
        map changes whenever a cluster is added, removed or hidden (query.scope), or a caller
        asks with another `cluster` filter, and counting every cluster again was ~0.5 s of CPU
        for a cluster admin at fleet L."""
        best: tuple[int, _State] | None = None
        for d in donors:
            if d.epoch != st.epoch:
                continue
            with d.lock:
                n = sum(
                    1 for c, a in st.access.items() if c in d.held and same_access(d.access[c], a)
                )
            if n and (best is None or n > best[0]):
                best = (n, d)
        if best is None:
            return
        d = best[1]
        new = _State(st.access, st.by, st.epoch)  # made aside: `st` is whole or untouched
        with d.lock:
            if d.epoch != st.epoch or d.out is None:
                return
            new.slots = array("i", d.slots)
            new.kinds_of, new.kinds = dict(d.kinds_of), dict(d.kinds)
            new.total, new.clusters = d.total, dict(d.clusters)
            new.statuses, new.suspended = list(d.statuses), list(d.suspended)
            for c, held in d.held.items():
                if c in st.access and same_access(d.access[c], st.access[c]):
                    new.held[c] = held
                else:  # counted with other access, or not the new caller's: taken away
                    self.whole += 1
                    self._apply(new, self._share(d.access[c], held, filters), -1)
                    new.clusters.pop(c, None)
        st.slots, st.kinds_of, st.kinds = new.slots, new.kinds_of, new.kinds
        st.total, st.clusters, st.held = new.total, new.clusters, new.held
        st.statuses, st.suspended = new.statuses, new.suspended
        self.seeded += len(st.held)

    # -- reading -------------------------------------------------------------------------------

    def _stale(self, cluster: str, gen: Any) -> bool:
        hit = self._held.get(cluster)
        return hit is None or hit.gen != gen

    def _read(self, todo: list[str], gens: Sequence[Any], clusters: list[str]) -> dict[str, _Held]:
        """Every cluster's rows, those in `todo` moved by their change feeds since they were
        held, or read again where the feed cannot tell (`CLUSTERS_PER_READ` clusters' chunks a
        round trip)."""
        gen_of = dict(zip(clusters, gens, strict=True))
        known = {c: h for c in todo if (h := self._held.get(c)) is not None and h.pos}
        moved: dict[str, tuple[_Held, int, bytes]] = {}
        if known:
            asked = list(known.items())
            for (c, h), (gen, whole, lines) in zip(
                asked, self.reader.follow([(c, h.pos) for c, h in asked]), strict=True
            ):
                if not int(whole):
                    moved[c] = (h, int(gen), lines)
        whole_read = [c for c in todo if c not in moved]
        blobs: dict[str, list[bytes]] = {c: [] for c in whole_read}
        waiting = [(c, b"-") for c in whole_read]
        # The generations before any of their rows: feed entries after them are applied next
        # time (setting a row's code is idempotent, so rows read after such a write are fine).
        lead = tally.generations_command(whole_read) if whole_read else None
        positions: dict[str, int] = {}
        while waiting:
            pending, waiting = waiting[:CLUSTERS_PER_READ], waiting[CLUSTERS_PER_READ:]
            replies = self.reader.idents(pending, CHUNK, lead)
            if lead is not None:
                positions = {
                    c: int(g or 0) for c, g in zip(whole_read, replies.pop(0), strict=True)
                }
                lead = None
            for (c, _start), (after, blob) in zip(pending, replies, strict=True):
                if blob:
                    blobs[c].append(blob)
                if after:
                    waiting.append((c, after))
        with self._interning:  # not the states' lock: other callers' answers do not wait
            for c in todo:
                old = self._held.get(c)
                if c in moved:
                    base, pos, lines = moved[c]
                    if old is not base and old is not None and old.pos >= pos:
                        continue  # another request moved it as far meanwhile
                    new = self._moved(base, gen_of[c], pos, lines)
                    base.delta.clear()
                    if old is not base and old is not None:
                        new.delta[:] = [old, *_delta(old, new)]
                else:
                    new = self._hold(gen_of[c], blobs[c], positions[c])
                    if old is not None:
                        new.delta[:] = [old, *_delta(old, new)]
                if old is not None:
                    old.delta.clear()  # one step kept: the older ones are let go
                self._held[c] = new
            self.reads += len(whole_read)
            self.followed += len(moved)
            return {c: self._held[c] for c in clusters}

    def _hold(self, gen: Any, blobs: list[bytes], pos: int) -> _Held:
        """A cluster's rows from the script's replies (`identity code` lines), interned."""
        lines = [line for blob in blobs for line in blob.split(b"\n")]
        known = self._ids
        found = [known.get(line[:-1]) for line in lines]
        ids = array(
            "I",
            [
                self._intern(line[:-1]) if i is None else i
                for i, line in zip(found, lines, strict=True)
            ],
        )
        codes = bytes(line[-1] for line in lines).translate(_TO_INDEX)
        return self._arranged(gen, ids, codes, pos)

    def _arranged(self, gen: Any, ids: array[int], codes: bytes, pos: int) -> _Held:
        """A `_Held` of rows in identity order, with where each namespace's rows start."""
        namespaces: list[str] = []
        starts = array("I")
        id_ns, names = self._id_ns, self._ns_names
        last = -1
        for j, ns in enumerate([id_ns[i] for i in ids]):
            if ns != last:
                namespaces.append(names[ns])
                starts.append(j)
                last = ns
        starts.append(len(ids))
        return _Held(gen, ids, codes, namespaces, starts, pos)

    def _moved(self, old: _Held, gen: Any, pos: int, lines: bytes) -> _Held:
        """`old` moved by the feed's lines since it was held (common.index.read.lua.FOLLOW):
        rows whose code changed take the new one, rows gone leave and new rows join; its
        `delta` holds the difference. The arrays are shared with `old` where nothing moved."""
        last: dict[bytes, int] = {}
        for line in lines.split(b"\n") if lines else ():
            last[line[:-2]] = line[-1]  # the last entry of an identity is its state now
        key = self._id_key.__getitem__
        ids, codes = old.ids, old.codes
        recoded: dict[int, int] = {}
        gone: list[int] = []
        joined: list[tuple[bytes, int]] = []
        for ident, code in last.items():
            i = self._ids.get(ident)
            j = bisect.bisect_left(ids, ident, key=key) if i is not None else len(ids)
            here = j < len(ids) and ids[j] == i
            if code == DELETED:
                if here:
                    gone.append(j)
                continue
            c = _TO_INDEX[code]
            if not here:
                joined.append((ident, c))
            elif codes[j] != c:
                recoded[j] = c
        out = [(ids[j], codes[j]) for j in (*recoded, *gone)]
        into = [(ids[j], c) for j, c in recoded.items()]
        if not joined and not gone:
            if recoded:
                changed = bytearray(codes)
                for j, c in recoded.items():
                    changed[j] = c
                codes = bytes(changed)
            new = _Held(gen, ids, codes, old.namespaces, old.starts, pos)
        else:
            dropped = set(gone)
            kept = [(ids[j], recoded.get(j, codes[j])) for j in range(len(ids)) if j not in dropped]
            added = [(self._interned(ident), c) for ident, c in joined]
            into += added
            rows_now = sorted(kept + added, key=lambda p: self._id_key[p[0]])
            new = self._arranged(
                gen, array("I", [i for i, _ in rows_now]), bytes(c for _, c in rows_now), pos
            )
        new.delta[:] = [old, sorted(out), sorted(into)]
        return new

    def _interned(self, ident: bytes) -> int:
        i = self._ids.get(ident)
        return self._intern(ident) if i is None else i

    def _intern(self, ident: bytes) -> int:
        ns_b, kind_b, _ = rows.member_ns_kind(ident)
        ns, kind = ns_b.decode(), kind_b.decode()
        n = self._ns.get(ns)
        if n is None:
            n = self._ns[ns] = len(self._ns_names)
            self._ns_names.append(ns)
        k = self._kinds.get(kind)
        if k is None:
            k = self._kinds[kind] = len(self._kind_names)
            self._kind_names.append(kind)
        i = self._ids[ident] = len(self._id_key)
        self._id_key.append(ident)
        self._id_ns.append(n)
        self._id_kind.append(k)
        return i

    # -- counting ------------------------------------------------------------------------------

    def _every_kind(self) -> frozenset[str]:
        """The kinds of every row held."""
        return frozenset(self._kind_names)

    def _share(
        self, a: AccessLike, held: _Held, filters: Filters, only: Sequence[str] = ()
    ) -> Iterator[tuple[int, int]]:
        """The (identity, code index) of the rows of `held` the caller may list that pass the
        filters (in the namespaces `only`, when given)."""
        name = filters.name.encode()
        wanted_codes = rows.codes_for(filters.statuses, filters.suspended)
        codes_ok = [c in wanted_codes for c in _STATUS_CODES]
        wanted_ns = set(filters.namespaces)
        if only:
            wanted_ns = set(only) & wanted_ns if wanted_ns else set(only)
        if a.cluster_wide >= self._every_kind() and not (wanted_ns or filters.kinds or name):
            if all(codes_ok):  # every row (a cluster admin's first question)
                yield from zip(held.ids, held.codes, strict=True)
            else:
                yield from (
                    (i, c) for i, c in zip(held.ids, held.codes, strict=True) if codes_ok[c]
                )
            return
        if a.cluster_wide:
            spaces = [s for s in held.namespaces if not wanted_ns or s in wanted_ns]
        else:
            spaces = sorted(s for s in a.namespaces if not wanted_ns or s in wanted_ns)
        kind_ids: dict[frozenset[str], frozenset[int]] = {}
        for space in spaces:
            at = bisect.bisect_left(held.namespaces, space)
            if at == len(held.namespaces) or held.namespaces[at] != space:
                continue
            listable = a.cluster_wide | a.namespaces.get(space, frozenset())
            allowed = kind_ids.get(listable)
            if allowed is None:
                allowed = kind_ids[listable] = frozenset(
                    self._kinds[k]
                    for k in listable
                    if k in self._kinds and (not filters.kinds or k in filters.kinds)
                )
            if not allowed:
                continue
            ids, codes, id_kind = held.ids, held.codes, self._id_kind
            for j in range(held.starts[at], held.starts[at + 1]):
                i, code = ids[j], codes[j]
                if id_kind[i] in allowed and codes_ok[code]:
                    if name and name not in rows.member_name(self._id_key[i]):
                        continue
                    yield i, code

    def _visible(
        self, a: AccessLike, filters: Filters, pairs: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """The (identity, code) pairs of rows the caller may list that pass the filters."""
        wanted_codes = rows.codes_for(filters.statuses, filters.suspended)
        name = filters.name.encode()
        out = []
        for i, code in pairs:
            ns, kind = self._ns_names[self._id_ns[i]], self._kind_names[self._id_kind[i]]
            if _STATUS_CODES[code] not in wanted_codes or (
                filters.kinds and kind not in filters.kinds
            ):
                continue
            if filters.namespaces and ns not in filters.namespaces:
                continue
            if kind not in a.cluster_wide and kind not in a.namespaces.get(ns, ()):
                continue
            if name and name not in rows.member_name(self._id_key[i]):
                continue
            out.append((i, code))
        return out

    def _move(self, st: _State, cluster: str, old: _Held, new: _Held, filters: Filters) -> None:
        """Count `new` instead of `old` for one cluster: by their difference when `new` holds
        it, else by taking `old` away whole and adding `new`."""
        if not new.delta or new.delta[0] is not old:
            self._count(st, cluster, old, filters, -1)
            self._count(st, cluster, new, filters, 1)
            return
        a = st.access[cluster]
        gone, came = (
            self._visible(a, filters, new.delta[1]),
            self._visible(a, filters, new.delta[2]),
        )
        if st.by == "object":
            before, after = len(gone), len(came)
        else:  # the cluster's namespaces holding a visible row, before and after, where touched
            touched = sorted({self._ns_names[self._id_ns[i]] for i, _ in gone + came})
            before = sum(any(True for _ in self._share(a, old, filters, [s])) for s in touched)
            after = sum(any(True for _ in self._share(a, new, filters, [s])) for s in touched)
        self._apply(st, gone, -1)
        self._apply(st, came, 1)
        n = st.clusters.get(cluster, 0) - before + after
        if n:
            st.clusters[cluster] = n
        else:
            st.clusters.pop(cluster, None)

    def _count(self, st: _State, cluster: str, held: _Held, filters: Filters, sign: int) -> None:
        """Add (`sign` 1) or take away (-1) one cluster's whole share of the caller's groups."""
        self.whole += 1
        n = self._apply(st, self._share(st.access[cluster], held, filters), sign)
        if sign < 0:
            st.clusters.pop(cluster, None)
        elif n:
            st.clusters[cluster] = n

    def _apply(self, st: _State, pairs: Iterable[tuple[int, int]], sign: int) -> int:
        """Add (`sign` 1) or take away (-1) rows (identity, code) of one cluster: each group's
        counts move, and the facets move where a count leaves or reaches zero. Returns how
        many groups the rows hold (their groups' rows being adjacent, as in a whole share)."""
        slots, by_object = st.slots, st.by == "object"
        need = (len(self._id_key) if by_object else len(self._ns_names)) * _SLOTS
        if len(slots) < need:  # new groups interned since: grown with room for more
            slots.extend(array("i", [0]) * (need + need // 4 - len(slots)))
        id_ns, id_kind, parts = self._id_ns, self._id_kind, _CODE_PARTS
        kinds, statuses, suspended = st.kinds, st.statuses, st.suspended
        kinds_of = st.kinds_of
        on_cluster = 0
        last = -1
        for i, code in pairs:
            g = i if by_object else id_ns[i]
            status, susp = parts[code]
            b = g * _SLOTS
            if g != last:  # a group's rows on one cluster are adjacent
                on_cluster += 1
                last = g
            flag, health = b + 1 + susp, b + 3 + status
            if sign > 0:
                if not slots[b]:
                    st.total += 1
                    if by_object:
                        kinds[id_kind[i]] = kinds.get(id_kind[i], 0) + 1
                if not slots[flag]:
                    suspended[susp] += 1
                if not slots[health]:
                    statuses[status] += 1
                slots[b] += 1
                slots[flag] += 1
                slots[health] += 1
            else:
                slots[b] -= 1
                slots[flag] -= 1
                slots[health] -= 1
                if not slots[b]:
                    st.total -= 1
                    if by_object:
                        kinds[id_kind[i]] -= 1
                if not slots[flag]:
                    suspended[susp] -= 1
                if not slots[health]:
                    statuses[status] -= 1
            if not by_object:
                pair = (g, id_kind[i])
                n = kinds_of.get(pair, 0)
                if not n:
                    kinds[pair[1]] = kinds.get(pair[1], 0) + 1
                n += sign
                if n:
                    kinds_of[pair] = n
                else:
                    del kinds_of[pair]
                    kinds[pair[1]] -= 1
        return on_cluster

    def _facets(self, st: _State) -> Facets:
        names = self._kind_names
        return Facets(
            total=st.total,
            clusters=dict(st.clusters),
            kinds={names[k]: n for k, n in st.kinds.items() if n},
            statuses={s: n for s, n in zip(STATUSES, st.statuses, strict=True) if n},
            suspended={"false": st.suspended[0], "true": st.suspended[1]},
        )
