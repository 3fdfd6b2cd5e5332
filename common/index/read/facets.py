"""Facets (`GET /api/v1/facets`): the caller's visible rows counted by cluster, kind, status,
suspension and namespace, and per value of asked label keys.

Counts come from the count tables (common.index.read.tally), never from scanning rows: one round
trip reads the clusters' generations, the tables of clusters written since are read again, and
an answer is remembered per caller and moved by the changed clusters' tables. `namespaces` comes
from the per-namespace counts (common.index.nscounts) the writer keeps, over the kinds the caller
may list in each namespace: those its count tables were summed from, or (a caller with
cluster-wide kinds) every namespace's, read once per cluster generation, and each caller's sum
is moved by the written clusters' moved namespaces. What the tables cannot
count (a label selector, `labelKeys`, a name substring, flapping rows) is counted from the rows:
each cluster's visible rows read as a list page reads them (common.index.read.reader's streams),
remembered per cluster generation, so an unchanged fleet costs one `MGET` of generations; a
written cluster's part is moved by its change feed (common.index.read.lua.FOLLOW with the rows'
labels fields: the entries that moved a row's identity, status or labels, each state counted
out or in as the scan would have counted it), and read again only where the feed cannot say.
The generations are the status generations (common.index.keys.status_generation): a write
that changes only rows' messages moves none.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from common import redis_client
from common.index import keys, nscounts, rows
from common.index.read import tally
from common.index.read.memo import Flights, Memo, Recent, not_older
from common.index.read.memo import on_sweep as memo_on_sweep
from common.index.read.plan import AccessLike, Filters, Range, after, clip_all, same_access
from common.index.read.plan import visible_kinds_uniform as _uniform
from common.kinds.status import STATUSES

if TYPE_CHECKING:
    from common.index.read.reader import Reader, Stream, Visibility

LABEL_VALUES_TOP = 20
"""Values shown per asked label key (most rows first); the rest are counted in `labelsOmitted`."""
LABEL_KEYS_MAX = 10
"""Label keys one facets request may ask for (`labelKeys`)."""
MEMO_MAX = 65536  # remembered (cluster, access, filters) parts per process
ANSWERS_MAX = 4096  # remembered answers (caller's access, filters) per process
SUMS_MAX = 65536  # clusters of the remembered per-namespace sums (`Extras.namespaces`)
DONORS = 8
"""Sums of one filters a new sum may be seeded from (`Extras._seed`): the callers asked last."""
DONOR_FILTERS = 4096
"""Filters whose last sums are kept for seeding (`Extras._seed`)."""
WHOLE_CHUNK = 16
"""Clusters whose every-namespace counts one round trip reads (`Extras.namespaces`): ~280 KB
of strings each at fleet L, summed before the next chunk is read."""


@dataclass
class Facets:
    total: int = 0
    clusters: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    suspended: dict[str, int] = field(default_factory=dict)
    """Rows by suspension: `true` and `false`."""
    scanned: int = 0
    """Members Redis examined (0 when summed from the count tables)."""
    version: keys.GrantsVersion | None = None
    """The grants version, read in the first round trip when asked (`confirm_version`)."""
    namespaces: dict[str, int] = field(default_factory=dict)
    """Rows by namespace ("" for cluster-scoped rows)."""
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per asked label key, rows by its value (every value: the API shows the top ones)."""


@dataclass(frozen=True)
class _Summed:
    """An answer summed from count tables: the caller's clusters and their tables (None: not
    counted from a table) in that order."""

    clusters: list[str]
    out: Facets
    tables: list[Any]


@dataclass
class Part:
    """One cluster's share of a scanned facets answer."""

    total: int = 0
    kinds: dict[tuple[str, str], int] = field(default_factory=dict)
    """Rows by (kind, status code)."""
    namespaces: dict[str, int] = field(default_factory=dict)
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    scanned: int = 0
    pos: int = 0
    """The change-feed generation the part holds exactly at (0: not known: a write landed
    while it was read), which its feed is followed from (`Extras._fed`)."""
    moved: tuple[Part, Part] | None = field(default=None, repr=False, compare=False)
    """When moved by the feed: the part it was moved from and the signed counts that moved
    (an answer holding that part moves by them, not by both parts whole). One step is kept:
    the older ones are let go."""


@dataclass
class _Sums:
    """One caller's rows per namespace (`Extras.namespaces`): each cluster's share and the
    generations they are at."""

    gens: list[Any] = field(default_factory=list)
    parts: dict[str, dict[str, int]] = field(default_factory=dict)
    out: dict[str, int] = field(default_factory=dict)
    view: dict[str, int] | None = None
    """A copy of `out` as answers show it, shared (read only) until `out` moves: a page's
    encoded namespaces are kept by it (query.body)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    pos: dict[str, int] = field(default_factory=dict)
    """Per cluster whose share was summed from every namespace's counts (cluster-wide kinds),
    the change-feed generation those counts held at: a write moves the share by the
    namespaces the feed touched since (`Extras._followed`), not by every namespace read again
    (at fleet L the memo budget holds a few of 200 clusters' every-namespace counts)."""
    accs: dict[str, Any] = field(default_factory=dict)
    """Per cluster, the caller's access its share was summed with: what a new sum of the same
    filters may take a share over from (`Extras._seed`)."""
    clusters: list[str] = field(default_factory=list)
    """The clusters `gens` is in the order of."""


class Extras:
    """Per-process memos of facets, by cluster generation: answers summed from the count
    tables, namespace counts, scanned parts (thread-safe)."""

    def __init__(self, r: Any, follow: Callable[..., list[Any]] | None = None) -> None:
        self.r = r
        self.follow = follow
        """`Reader.follow`: what the clusters' change feeds say moved since a generation."""
        self.answers: Memo[tuple[int, Filters], _Summed] = Memo(ANSWERS_MAX, "facets.answers")
        """(caller's access, filters) -> the last answer, at the generations it was summed at."""
        self._ns: Memo[tuple[str, int, Filters], _Shares] = Memo(MEMO_MAX, "facets.ns")
        """(cluster, access, filters) -> the cluster's rows per namespace, with the counts
        they were summed from (the next generation's re-sums only the namespaces that moved)."""
        self._parts: Memo[tuple[Any, ...], Part] = Memo(MEMO_MAX, "facets.parts")
        self._raw: Memo[str, tuple[Mapping[str, str], int]] = Memo(MEMO_MAX, "facets.raw")
        """Every namespace's counts of a cluster (encoded), by status generation, and the
        generation its change feed is followed from: for wide callers."""
        self.counted: Memo[
            tuple[int, Filters, tuple[str, ...]], tuple[list[str], Facets, dict[str, Part]]
        ] = Memo(ANSWERS_MAX, "facets.counted")
        """(caller's access, filters, label keys) -> the clusters, the answer counted from
        their rows (a label selector, label keys, a name) and each cluster's part, at the
        generations it was counted at: summing 1,000 clusters' parts was the request's cost at
        fleet XL; after a write the answer is moved by the written clusters' parts
        (`_moved_count`). Never mutated."""
        self.moved = 0
        """Answers counted from rows moved by the written clusters' parts: for tests."""
        self._sums: Memo[tuple[int, Filters, tuple[str, ...]], _Sums] = Memo(
            SUMS_MAX, "facets.sums"
        )
        """(caller's access, filters, clusters) -> rows per namespace, moved cluster by cluster."""
        self._lock = threading.Lock()
        self._donors: Recent[Filters, _Sums] = Recent(DONORS, DONOR_FILTERS)
        """Per filters, the sums made last: what a new sum is seeded from (`_seed`)."""
        self.seeded = 0
        """Clusters' shares a new sum took over from another (`_seed`): for tests."""
        self.flights = Flights()
        """Answers being counted: the same one asked meanwhile waits for it (`Flights`)."""
        self.reads = 0
        """Clusters whose rows or counts were read (not answered from memory): for tests."""
        self.summed = 0
        """Clusters' shares of a caller's per-namespace sums moved (`namespaces`): for tests."""
        self.fed = 0
        """Clusters' scanned parts moved by their change feeds (`_fed`): for tests."""
        self.by_moves = 0
        """Clusters whose moves alone moved an answer counted from rows: for tests."""
        self.followed = 0
        """Clusters whose namespaces' counts were moved by their change feeds: for tests."""
        self.resummed = 0
        """Namespaces re-summed from a cluster's moved counts (`_shares`): for tests."""

    # -- namespaces from the per-namespace counts --------------------------------------------

    def namespaces(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        clusters: Sequence[str],
        gens: Sequence[Any],
        tallies: tally.Tallies,
    ) -> dict[str, int]:
        """Visible rows per namespace ("" for cluster-scoped rows) under `filters` (no name,
        selector or flapping filter: those are counted from rows). A caller who sees only some
        namespaces is summed from the per-namespace counts its count table was read from (no
        read of its own); one with cluster-wide kinds from every namespace's counts, read once
        per cluster generation and shared by every such caller while the memo budget holds
        them. The caller's sum is kept and moved by the clusters whose (status) generation
        moved since: a request after a write re-sums the written clusters only, one on a still
        fleet none; a cluster-wide caller's share of a written cluster is moved by the
        namespaces its change feed says were touched (read again), whether or not every
        namespace's counts are still remembered. The dict is shared (read only) while the sum
        does not move."""
        key = (id(access), filters, tuple(clusters))
        with self._lock:
            st = self._sums.get(key, owner=access)
            donors = None
            if st is None:
                # held until seeded: a thread asking meanwhile waits for the seed, not recounts
                st = _Sums(clusters=list(clusters))
                st.lock.acquire()
                donors = self._donors.push(filters, st)
                self._sums.put(key, st, owner=access, weight=len(clusters))
        if donors is not None:
            try:
                self._seed(st, access, clusters, donors)
            finally:
                st.lock.release()
        with st.lock:
            old = st.gens
            moved = [i for i, g in enumerate(gens) if len(old) != len(gens) or old[i] != g]
            for j in range(0, len(moved), WHOLE_CHUNK):
                # chunk by chunk, each cluster's new share replacing its old one before the
                # next chunk's are made: after a storm every share is new (~10 MiB for a
                # cluster admin at fleet L), and making them all before dropping any held
                # both (docs/operations.md, "Where the arenas level off")
                chunk = moved[j : j + WHOLE_CHUNK]
                parts, pos = self._cluster_namespaces(
                    [(clusters[i], gens[i]) for i in chunk], access, filters, tallies, st
                )
                for i in chunk:
                    c = clusters[i]
                    gone, new = st.parts.get(c), parts[c]
                    if gone is None:
                        _add_all(st.out, new)
                    elif gone is not new and gone != new:  # a transition moves none
                        # by the namespaces that differ (set operations in C), not all of them
                        touched = {ns for ns, _n in gone.items() ^ new.items()}
                        _sub_all(st.out, {ns: gone[ns] for ns in touched if ns in gone})
                        _add_all(st.out, {ns: new[ns] for ns in touched if ns in new})
                    st.parts[c] = new
                    st.accs[c] = access[c]
                    if c in pos:
                        st.pos[c] = pos[c]
                    else:
                        st.pos.pop(c, None)
                    if gone is None or (gone is not new and gone != new):
                        st.view = None
            if moved:
                st.gens = list(gens)
                self.summed += len(moved)
            if st.view is None:
                st.view = dict(st.out)
            return st.view

    def _seed(
        self,
        st: _Sums,
        access: Mapping[str, AccessLike],
        clusters: Sequence[str],
        donors: list[_Sums],
    ) -> None:
        """Start a new sum (`st`, locked) from the shares of a recent sum of the same filters
        (`donors`) summed with the same access in a cluster (`_Sums.accs`), at the
        generations they were summed at: the caller's request then moves them like any written
        cluster's. A caller's access map is a new object whenever any of its clusters' access
        changes, a cluster is added, removed or hidden (query.scope), and summing every
        cluster again was a whole-fleet read in the request for a cluster-wide caller (every
        namespace's counts of 200 clusters at fleet L: ~13,000 commands, ~0.7 s of CPU)."""
        best: tuple[int, _Sums, list[str]] | None = None
        for d in donors:
            with d.lock:
                same = [c for c in clusters if same_access(d.accs.get(c), access[c])]
            if same and (best is None or len(same) > best[0]):
                best = (len(same), d, same)
        missing = object()  # no generation equals it: such a cluster is summed
        st.gens = [missing] * len(clusters)
        if best is None:
            return
        _n, d, same = best
        with d.lock:
            at = dict(zip(d.clusters, d.gens, strict=True))
            same = [c for c in same if c in d.parts and same_access(d.accs.get(c), access[c])]
            taken = set(same)
            if len(taken) * 2 >= len(d.parts):  # fewer to take away than to add
                st.out = dict(d.out)
                for c, part in d.parts.items():
                    if c not in taken:
                        _sub_all(st.out, part)
            else:
                for c in same:
                    _add_all(st.out, d.parts[c])
            for c in same:
                st.parts[c], st.accs[c] = d.parts[c], d.accs[c]
                if c in d.pos:
                    st.pos[c] = d.pos[c]
        index = {c: i for i, c in enumerate(clusters)}
        for c in same:
            st.gens[index[c]] = at[c]
        self.seeded += len(same)

    def _cluster_namespaces(
        self,
        wanted: Sequence[tuple[str, Any]],
        access: Mapping[str, AccessLike],
        filters: Filters,
        tallies: tally.Tallies,
        held: _Sums | None = None,
    ) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """Each cluster's visible rows per namespace (`namespaces`), remembered per cluster
        generation, and for those summed from every namespace's counts the change-feed
        generation the counts held at. A cluster whose share `held` holds at a known feed
        generation is moved by its feed (`_followed`); the others not remembered are read in
        round trips of `WHOLE_CHUNK` clusters."""
        out: dict[str, dict[str, int]] = {}
        pos: dict[str, int] = {}
        ns_key = tuple(sorted(set(filters.namespaces)))
        todo: list[tuple[str, int]] = []
        followed: list[tuple[str, int, int]] = []
        for c, g in wanted:
            gen, a = int(g or 0), access[c]
            hit = self._ns.get((c, id(a), filters), gen, a)
            if hit is not None:
                out[c] = hit[1]
                if hit[2]:
                    pos[c] = hit[2]
                continue
            # tally.view's cluster-wide kinds, without building the view
            wide = not ns_key and a.cluster_wide
            entry = None if wide else tallies.entry(c, a, ns_key, gen)
            values: Mapping[str, str] | None = None
            at = 0
            if entry is not None:
                values = entry.per_ns
            elif (raw := self._raw.get(c, gen)) is not None:
                values, at = raw
            elif held is not None and held.pos.get(c) and c in held.parts and self.follow:
                followed.append((c, gen, held.pos[c]))
                continue
            if values is None:
                todo.append((c, gen))
                continue
            out[c] = self._shares(c, gen, a, filters, values, at)
            if at:
                pos[c] = at
        if followed:
            assert held is not None
            todo += self._followed(followed, access, filters, held, out, pos)
        for i in range(0, len(todo), WHOLE_CHUNK):
            # a chunk's counts are summed before the next is read: at fleet L every cluster's
            # were ~110 MiB of strings in flight in one round trip
            for c, (gen, values, at) in self._every_namespace(todo[i : i + WHOLE_CHUNK]).items():
                out[c] = self._shares(c, gen, access[c], filters, values, at)
                if at:
                    pos[c] = at
        return out, pos

    def _followed(
        self,
        followed: Sequence[tuple[str, int, int]],
        access: Mapping[str, AccessLike],
        filters: Filters,
        held: _Sums,
        out: dict[str, dict[str, int]],
        pos: dict[str, int],
    ) -> list[tuple[str, int]]:
        """Move each (cluster, status generation, feed generation) share `held` holds by the
        namespaces its change feed touched since (their counts read again, in one round trip
        after the feed's), into `out` and `pos`. Returns the clusters whose feed no longer
        reaches back (read whole)."""
        fed = self._touched([(c, at) for c, _g, at in followed])
        touched = {c: t for (c, _g, _at), t in zip(followed, fed, strict=True) if t is not None}
        whole = [(c, gen) for c, gen, _at in followed if c not in touched]
        p = self.r.pipeline(transaction=False)
        groups = {c: nscounts.queue_read(p, c, spaces) for c, (_g, spaces) in touched.items()}
        replies = p.execute() if any(groups.values()) else []
        self.followed += len(touched)
        at = 0
        for c, (g, spaces) in touched.items():
            got = nscounts.collect(groups[c], replies[at : at + len(groups[c])])
            at += len(groups[c])
            out[c], pos[c] = _moved(held.parts[c], access[c], filters, got, spaces), g
            self.resummed += len(spaces)
        return whole

    def _touched(self, asked: Sequence[tuple[str, int]]) -> list[tuple[int, list[str]] | None]:
        """Per (cluster, feed generation) asked, in one round trip: the cluster's generation now
        and the namespaces its change feed's entries since touched, or None when the feed no
        longer reaches back (common.index.read.lua.FOLLOW)."""
        assert self.follow is not None
        out: list[tuple[int, list[str]] | None] = []
        for g, whole, lines in self.follow(asked):
            if int(whole):
                out.append(None)
                continue
            found = {rows.member_ns_kind(line)[0] for line in lines.split(b"\n") if line}
            out.append((int(g), sorted(s.decode() for s in found)))
        return out

    def _every_namespace(
        self, todo: Sequence[tuple[str, int]]
    ) -> dict[str, tuple[int, Mapping[str, str], int]]:
        """Every namespace's counts of each (cluster, status generation), remembered (`_raw`),
        with the change-feed generation they hold at: a cluster held at an older generation is
        moved by its change feed (the namespaces its entries since touch read again,
        common.index.read.lua.FOLLOW), the others read whole (after their generation: the
        feed is followed from there next time)."""
        if not todo:
            return {}
        held = {c: hit[1] for c, _g in todo if (hit := self._raw.peek(c)) is not None}
        asked = [(c, pos) for c, (_v, pos) in held.items() if pos and self.follow is not None]
        fed = self._touched(asked) if asked else []
        touched = {c: t for (c, _pos), t in zip(asked, fed, strict=True) if t is not None}
        whole_read = [(c, gen) for c, gen in todo if c not in touched]
        p = self.r.pipeline(transaction=False)
        spans = []
        for c, _g in whole_read:
            p.get(keys.generation(c))  # first: the counts read after it hold at least it
            spans.append(nscounts.queue_read_all(p, c))
        groups = {c: nscounts.queue_read(p, c, spaces) for c, (_g, spaces) in touched.items()}
        replies = p.execute() if whole_read or any(groups.values()) else []
        self.reads += len(whole_read)
        self.followed += len(touched)
        out: dict[str, tuple[int, Mapping[str, str], int]] = {}
        at = 0
        for (c, gen), n in zip(whole_read, spans, strict=True):
            pos = int(replies[at] or 0)
            values = nscounts.collect_all(replies[at + 1 : at + 1 + n])
            at += 1 + n
            self._raw.put(c, (values, pos), gen)
            out[c] = (gen, values, pos)
        gen_of = dict(todo)
        for c, (pos, spaces) in touched.items():
            got = nscounts.collect(groups[c], replies[at : at + len(groups[c])])
            at += len(groups[c])
            # read after the feed: as new as it, or newer (moved again)
            moved: Mapping[str, str] = _overlaid(held[c][0], spaces, got)
            self._raw.put(c, (moved, pos), gen_of[c])
            out[c] = (gen_of[c], moved, pos)
        return out

    def _shares(
        self,
        c: str,
        gen: int,
        a: AccessLike,
        filters: Filters,
        values: Mapping[str, str],
        at: int = 0,
    ) -> dict[str, int]:
        """The cluster's rows per namespace from its per-namespace counts `values` (held at
        change-feed generation `at` when read whole, else 0): from the previous generation's,
        re-summing only the namespaces whose counts moved."""
        key = (c, id(a), filters)
        prev = self._ns.peek(key, a)
        if prev is None:
            mine = _namespace_rows(a, filters, values)
        else:
            old_values, mine = prev[1][0], prev[1][1]
            moved = list({ns for ns, _v in values.items() ^ old_values.items()})
            mine = _moved(mine, a, filters, values, moved)
            self.resummed += len(moved)
        self._ns.put(key, (values, mine, at), gen, a)
        return mine

    # -- counted from rows ---------------------------------------------------------------------

    def scanned(
        self,
        reader: Reader,
        access: Mapping[str, AccessLike],
        filters: Filters,
        clusters: Sequence[str],
        gens: Sequence[Any],
        label_keys: tuple[str, ...],
        out: Facets | None,
    ) -> dict[str, Part]:
        """Count every visible row passing `filters` into `out` (with `namespaces` and the
        values of `label_keys`; None: not summed), from the rows; clusters not written since
        are remembered. Returns each cluster's part."""
        parts: dict[str, Part] = {}
        todo, held = [], []
        for c, g in zip(clusters, gens, strict=True):
            key = (c, id(access[c]), filters, label_keys)
            hit = self._parts.get(key, int(g or 0), access[c])
            if hit is not None:
                parts[c] = hit
                continue
            older = self._parts.peek(key, access[c])
            # (a name is matched on the names index, flapping by the time: not from a line)
            known = older is not None and older[1].pos and self.follow is not None
            if known and older is not None and not (filters.name or filters.flapping):
                held.append((c, int(g or 0), older[1]))
            else:
                todo.append((c, int(g or 0)))
        if held:
            fed = self._fed(reader, access, filters, label_keys, held)
            for (c, g, _old), part in zip(held, fed, strict=True):
                if part is None:
                    todo.append((c, g))
                else:
                    parts[c] = part
                    self._parts.put((c, id(access[c]), filters, label_keys), part, g, access[c])
        streams = []
        for c, _g in todo:
            parts[c] = Part()
            s = reader.stream(c, access[c], filters)
            if s is not None:
                streams.append(s)
        self.reads += len(todo)
        before = self._feed_gens([c for c, _g in todo]) if todo and self.follow else []
        while streams:
            left = []
            for s, chunk in zip(streams, reader.more(streams, filters, 1024), strict=True):
                _count(parts[s.cluster], chunk.members, label_keys)
                parts[s.cluster].scanned += chunk.scanned
                if not chunk.done:
                    left.append(s)
            streams = left
        if before:  # a part is exact at its feed generation when no write landed meanwhile
            after_scans = self._feed_gens([c for c, _g in todo])
            for (c, _g), was, now in zip(todo, before, after_scans, strict=True):
                parts[c].pos = was if was == now else 0
        for c, g in todo:  # gens were read before the scans: a later write moves them
            self._parts.put((c, id(access[c]), filters, label_keys), parts[c], g, access[c])
        if out is not None:
            read_now = {c for c, _g in todo}
            for c in clusters:
                _add_part(out, c, parts[c], label_keys)
                out.scanned += parts[c].scanned if c in read_now else 0
        return parts

    def _feed_gens(self, clusters: Sequence[str]) -> list[int]:
        """The clusters' change-feed generations read now, in one round trip (not
        `tally.generations`, which answers a request's first read again inside `read_once`)."""
        got = redis_client.pipelined(self.r, [tally.generations_command(clusters)])[0]
        return [int(g or 0) for g in got]

    def _fed(
        self,
        reader: Reader,
        access: Mapping[str, AccessLike],
        filters: Filters,
        label_keys: tuple[str, ...],
        held: Sequence[tuple[str, int, Part]],
    ) -> list[Part | None]:
        """Each held part moved by its cluster's change feed since it was held, in one round
        trip (common.index.read.lua.FOLLOW with labels: the entries that moved a row's
        identity, status code or labels); None where the feed cannot say (read the rows)."""
        assert self.follow is not None
        replies = self.follow([(c, part.pos) for c, _g, part in held], labelled=True)
        out: list[Part | None] = []
        codes = _codes_kept(filters)
        for (c, _g, old), (gen, whole, lines) in zip(held, replies, strict=True):
            if int(whole):
                out.append(None)
                continue
            part, delta = _copied(old, int(gen)), Part()
            test = _RowTest(reader.visibility(access[c], filters, codes), filters, label_keys)
            for line in lines.split(b"\n") if lines else ():
                ns, kind, name, rest = line.split(b"\0", 3)
                was, now = rest[:1], rest[1:2]
                lo, _, ln = rest[2:].partition(b"\0")
                if was != b"+":
                    test.count((part, delta), ns, kind, name, was, lo, -1)
                if now != b".":
                    test.count((part, delta), ns, kind, name, now, ln, 1)
            old.moved = None  # one step kept
            part.moved = (old, delta)
            self.fed += 1
            out.append(part)
        return out


# -- one answer ------------------------------------------------------------------------------


def count(
    reader: Reader,
    access: Mapping[str, AccessLike],
    filters: Filters,
    confirm_version: bool = False,
    label_keys: tuple[str, ...] = (),
) -> Facets:
    """The caller's facets under `filters` (`Reader.facets`): summed from the count tables, or
    counted from the rows for a label selector, `label_keys` (the values of those keys), a
    name substring or flapping rows."""
    if filters.flapping:
        return _flapping(reader, access, filters, confirm_version)
    if filters.labels or label_keys or filters.name:
        clusters = reader.candidates(access, filters, None)
        gens, version = tally.status_generations(reader.r, clusters, confirm_version)
        key = (id(access), filters, label_keys)
        hit = reader.extras.counted.get(key, gens, access)
        if hit is not None and hit[0] == clusters:
            return replace(hit[1], version=version, scanned=0)
        with reader.extras.flights.one(key):  # asked meanwhile: counted once
            older = reader.extras.counted.peek(key, access)
            if older is not None and older[1][0] == clusters and not_older(older[0], gens):
                return replace(older[1][1], version=version, scanned=0)
            out, parts = _moved_count(reader, access, filters, clusters, gens, label_keys, older)
            out.version = version
            value = (list(clusters), replace(out), parts)
            reader.extras.counted.put(key, value, list(gens), access)
        return out
    return _from_tables(reader, access, filters, confirm_version)


MOVED_MAX = 0.25
"""Of a caller's clusters, the share written since its last answer counted from rows up to
which that answer is moved by their parts rather than summed again."""


def _moved_count(
    reader: Reader,
    access: Mapping[str, AccessLike],
    filters: Filters,
    clusters: list[str],
    gens: Sequence[Any],
    label_keys: tuple[str, ...],
    older: tuple[Any, tuple[list[str], Facets, dict[str, Part]]] | None,
) -> tuple[Facets, dict[str, Part]]:
    """The caller's facets counted from the rows, and each cluster's part: from the last answer
    (`older`: its generations and value) when it covered the same clusters and a few of them
    were written since, by taking their old parts away and adding their new ones (summing
    every cluster's label values again was the request at fleet L under writes); else summed
    from every cluster's part."""
    if older is not None and older[1][0] == clusters:
        ogens, (_clusters, last, oparts) = older
        moved = [i for i, g in enumerate(gens) if len(ogens) != len(gens) or ogens[i] != g]
        if len(moved) <= MOVED_MAX * len(clusters):
            fresh = reader.extras.scanned(
                reader,
                access,
                filters,
                [clusters[i] for i in moved],
                [gens[i] for i in moved],
                label_keys,
                None,
            )
            out = replace(
                last,
                clusters=dict(last.clusters),
                kinds=dict(last.kinds),
                statuses=dict(last.statuses),
                suspended=dict(last.suspended),
                namespaces=dict(last.namespaces),
                labels={k: dict(v) for k, v in last.labels.items()},
                scanned=0,
            )
            parts = dict(oparts)
            for c, part in fresh.items():
                step = part.moved
                if step is not None and step[0] is parts[c]:  # by what moved only
                    _add_moves(out, c, step[1], label_keys)
                    reader.extras.by_moves += 1
                else:
                    _add_part(out, c, parts[c], label_keys, -1)
                    _add_part(out, c, part, label_keys)
                out.scanned += part.scanned
                parts[c] = part
            _drop_zeros(out)
            reader.extras.moved += 1
            return out, parts
    out = Facets()
    parts = reader.extras.scanned(reader, access, filters, clusters, gens, label_keys, out)
    return out, parts


def _from_tables(
    reader: Reader, access: Mapping[str, AccessLike], filters: Filters, confirm_version: bool
) -> Facets:
    """Counts of visible rows by cluster, kind, status, suspension and namespace, summed from
    the callers' count tables: one round trip reads the clusters' generations (and the grants
    version when `confirm_version`); the tables of clusters written since are read again in one
    more. A cluster whose per-namespace counts are not complete yet is counted by scanning."""
    clusters = reader.candidates(access, filters, None)
    extras, tallies = reader.extras, reader.tallies
    gens, version = tally.status_generations(reader.r, clusters, confirm_version)
    key = (id(access), filters)
    hit = extras.answers.get(key, gens, access)
    if hit is None or hit.clusters != clusters:
        with extras.flights.one(key):  # asked meanwhile: summed once, then answered from it
            hit = extras.answers.get(key, gens, access)
            if hit is None or hit.clusters != clusters:
                return _summed(reader, access, filters, clusters, gens, version)
    spaces = extras.namespaces(access, filters, clusters, gens, tallies)
    return replace(hit.out, version=version, namespaces=spaces)


def _summed(
    reader: Reader,
    access: Mapping[str, AccessLike],
    filters: Filters,
    clusters: list[str],
    gens: Sequence[Any],
    version: Any,
) -> Facets:
    """`_from_tables` when no answer is remembered at these generations: the last one moved by
    the tables of the clusters written since, or every table summed."""
    extras, tallies = reader.extras, reader.tallies
    key = (id(access), filters)
    older = extras.answers.peek(key, access)
    last = older[1] if older is not None and older[1].clusters == clusters else None
    # the clusters not written since the last answer take their tables from it, not from one
    # memo lookup each (200 at fleet L, after every write)
    then = older[0] if older is not None and last is not None else [None] * len(clusters)
    namespaces = tuple(sorted(set(filters.namespaces)))
    tables: dict[str, tally.Table | None] = {}
    stale = []
    for i, (c, gen) in enumerate(zip(clusters, gens, strict=True)):
        if last is not None and then[i] == gen and last.tables[i] is not None:
            tables[c] = last.tables[i]
            continue
        table = tallies.cached(c, access[c], namespaces, int(gen or 0))
        if table is None:
            stale.append((c, access[c], namespaces))
        else:
            tables[c] = table
    tables.update(tallies.compute(stale))
    unready = [c for c in clusters if tables[c] is None]
    if last is not None and not unready:
        # The last answer with only the changed clusters' tables swapped: at fleet scale
        # under writes a few of hundreds of clusters change between requests, and summing all
        # of them was the cost.
        out = _copy_facets(last.out)
        for c, old in zip(clusters, last.tables, strict=True):
            new = tables[c]
            if new is not old and new != old:
                # by the entries that differ (a transition: two), not the whole tables
                was, now = old or {}, new or {}
                touched = {k for k, _n in was.items() ^ now.items()}
                _sum_table(out, c, {k: was[k] for k in touched if k in was}, filters, -1)
                _sum_table(out, c, {k: now[k] for k in touched if k in now}, filters, 1)
        _drop_zeros(out)
    else:
        out = Facets()
        for c in clusters:
            _sum_table(out, c, tables[c], filters, 1)
    if unready:
        _merge(out, _scanned_counts(reader, access, filters, unready))
    else:
        extras.answers.put(key, _Summed(clusters, out, [tables[c] for c in clusters]), gens, access)
    ready = [(c, g) for c, g in zip(clusters, gens, strict=True) if c not in unready]
    late = [(c, g) for c, g in zip(clusters, gens, strict=True) if c in unready]
    spaces = extras.namespaces(
        access, filters, [c for c, _ in ready], [g for _, g in ready], tallies
    )
    if unready:  # their per-namespace counts are not complete: counted from the rows
        rest = Facets()
        extras.scanned(reader, access, filters, unready, [g for _, g in late], (), rest)
        spaces = dict(spaces)  # the sums' own is shared
        for ns, n in rest.namespaces.items():
            spaces[ns] = spaces.get(ns, 0) + n
    return replace(out, version=version, namespaces=spaces)


def _flapping(
    reader: Reader, access: Mapping[str, AccessLike], filters: Filters, confirm_version: bool
) -> Facets:
    """Facets of `flapping=true`: the flapping rows (`Reader.flapping_members`) counted."""
    out = Facets()
    found, out.version, out.scanned = reader.flapping_members(access, filters, confirm_version)
    for c, m in found:
        ns, kind, _name, code, _ = rows.member_head(m)
        status, suspended = tally.code_status(code.decode())
        add(out, c, kind.decode(), status, suspended, 1)
        out.namespaces[ns.decode()] = out.namespaces.get(ns.decode(), 0) + 1
    return out


def _scanned_counts(
    reader: Reader, access: Mapping[str, AccessLike], filters: Filters, clusters: Sequence[str]
) -> Facets:
    """Counts by scanning: the counts hash for callers who see the same kinds everywhere, COUNT
    scans over their ranges otherwise (through the name index for a name filter)."""
    out = Facets()
    streams = [s for c in clusters if (s := reader.stream(c, access[c], filters, ranged=True))]
    fast = [
        s
        for s in streams
        if not filters.namespaces
        and not filters.name
        and _uniform(access[s.cluster], filters, reader.all_kinds)
    ]
    _count_hashes(reader, fast, access, filters, out)
    tasks: list[tuple[str, str, bytes, list[Range]]] = []
    for s in streams:
        if s not in fast:
            sources, codes = reader.sources(s.cluster, filters)
            tasks.extend((s.cluster, key, codes, s.ranges) for key in sources)
    window = reader.window
    while tasks:
        calls = [
            reader.script_calls(cluster, [key], 0, codes, filters.name, ranges[:window], True)[0]
            for cluster, key, codes, ranges in tasks
        ]
        pending = []
        for (cluster, key, codes, ranges), reply in zip(tasks, reader.run(calls), strict=True):
            out.scanned += int(reply[1])
            for f, n in zip(reply[3::2], reply[4::2], strict=True):
                kind, status, suspended = rows.parse_count_field(f)
                add(out, cluster, kind, status, suspended, int(n))
            if reply[0] != b"done":
                rest = clip_all(ranges, after(rows.identity_bytes(reply[2])))
                pending.append((cluster, key, codes, rest))
            elif len(ranges) > window:
                pending.append((cluster, key, codes, ranges[window:]))
        tasks = pending
    return out


def _count_hashes(
    reader: Reader,
    streams: list[Stream],
    access: Mapping[str, AccessLike],
    filters: Filters,
    out: Facets,
) -> None:
    if not streams:
        return
    pipe = reader.r.pipeline(transaction=False)
    for s in streams:
        pipe.hgetall(keys.counts(s.cluster))
    statuses = set(filters.statuses or STATUSES)
    for s, h in zip(streams, pipe.execute(), strict=True):
        visible = access[s.cluster].cluster_wide
        for f, n in h.items():
            kind, status, suspended = rows.parse_count_field(f)
            wanted = not filters.kinds or kind in filters.kinds
            if filters.suspended is not None and suspended is not filters.suspended:
                continue
            if wanted and kind in visible and status in statuses:
                add(out, s.cluster, kind, status, suspended, int(n))


# -- sums ------------------------------------------------------------------------------------


def add(out: Facets, cluster: str, kind: str, status: str, suspended: bool, n: int) -> None:
    """Count `n` rows of one cluster, kind, status and suspension into `out`."""
    if n <= 0:
        return
    out.total += n
    out.clusters[cluster] = out.clusters.get(cluster, 0) + n
    out.kinds[kind] = out.kinds.get(kind, 0) + n
    out.statuses[status] = out.statuses.get(status, 0) + n
    flag = "true" if suspended else "false"
    out.suspended[flag] = out.suspended.get(flag, 0) + n


def _take(out: Facets, cluster: str, kind: str, status: str, suspended: bool, n: int) -> None:
    out.total -= n
    out.clusters[cluster] = out.clusters.get(cluster, 0) - n
    out.kinds[kind] = out.kinds.get(kind, 0) - n
    out.statuses[status] = out.statuses.get(status, 0) - n
    flag = "true" if suspended else "false"
    out.suspended[flag] = out.suspended.get(flag, 0) - n


def _sum_table(out: Facets, c: str, table: tally.Table | None, filters: Filters, sign: int) -> None:
    """Add (`sign` 1) or take away (-1) one cluster's table under `filters`."""
    if not table:
        return
    kinds, statuses = filters.kinds, filters.statuses
    for (kind, code), n in table.items():
        status, suspended = tally.code_status(code)
        if (kinds and kind not in kinds) or (statuses and status not in statuses):
            continue
        if filters.suspended is None or suspended is filters.suspended:
            if sign > 0:
                add(out, c, kind, status, suspended, n)
            else:
                _take(out, c, kind, status, suspended, n)


def _copy_facets(f: Facets) -> Facets:
    return Facets(
        f.total, dict(f.clusters), dict(f.kinds), dict(f.statuses), dict(f.suspended), f.scanned
    )


def _drop_zeros(out: Facets) -> None:
    """What a sum from scratch would not hold: entries counted down to zero."""
    for d in (out.clusters, out.kinds, out.statuses, out.suspended):
        for k in [k for k, n in d.items() if n == 0]:
            del d[k]


def _merge(out: Facets, more: Facets) -> None:
    out.total += more.total
    out.scanned += more.scanned
    for mine, theirs in (
        (out.clusters, more.clusters),
        (out.kinds, more.kinds),
        (out.statuses, more.statuses),
        (out.suspended, more.suspended),
    ):
        for k, n in theirs.items():
            mine[k] = mine.get(k, 0) + n


_Shares = tuple[Mapping[str, str], dict[str, int], int]
"""A cluster's per-namespace counts (encoded), the caller's rows per namespace from them, and
the change-feed generation the counts held at when read whole (0: unknown)."""


def _moved(
    mine: dict[str, int],
    access: AccessLike,
    filters: Filters,
    values: Mapping[str, str],
    spaces: Sequence[str],
) -> dict[str, int]:
    """A cluster's rows per namespace `mine` with the namespaces `spaces` summed again from
    their counts `values`: a new dict, or `mine` itself (shared, read only) when none moved."""
    if not spaces:
        return mine
    fresh = _namespace_rows(access, filters, values, spaces)
    return cast(dict[str, int], _overlaid(mine, spaces, fresh))


_V = TypeVar("_V")


def _overlaid(
    base: Mapping[str, _V], spaces: Sequence[str], fresh: Mapping[str, _V]
) -> Mapping[str, _V]:
    """`base` with each of `spaces` set to its `fresh` value, or dropped when it has none: a new
    dict, or `base` itself (shared, read only) when `spaces` is empty."""
    if not spaces:
        return base
    out = dict(base)
    for ns in spaces:
        if ns in fresh:
            out[ns] = fresh[ns]
        else:
            out.pop(ns, None)
    return out


def _namespace_rows(
    access: AccessLike,
    filters: Filters,
    values: Mapping[str, str],
    only: Sequence[str] | None = None,
) -> dict[str, int]:
    """Visible rows per namespace of `values` (those of `only` when given) under `filters`.
    A namespace's count is a function of its counts' text and the kinds the caller may list
    there, so it is looked up in `_ROWS` (a fleet's ~400,000 namespace counts at L are ~43,000
    distinct texts: a cluster admin's first facets decoded every one of them, ~2 s of CPU)."""
    kinds = frozenset(filters.kinds)
    statuses = frozenset(filters.statuses)
    wanted = frozenset(filters.namespaces)
    shape = (kinds, statuses, filters.suspended)
    out: dict[str, int] = {}
    pairs = values.items() if only is None else ((ns, values.get(ns, "")) for ns in only)
    wide = access.cluster_wide
    for ns, value in pairs:
        if (wanted and ns not in wanted) or not value:
            continue
        extra = access.namespaces.get(ns)
        own = wide | extra if extra else wide
        key = (value, own, shape)
        n = _ROWS.get(key)
        if n is None:
            n = _rows_of(value, own, kinds, statuses, filters.suspended)
            if len(_ROWS) >= _ROWS_MAX:
                _ROWS.clear()
            _ROWS[key] = n
        if n:
            # interned: a fleet's clusters share namespace names, and a caller's sum keeps
            # every cluster's share (at fleet L ~24 MiB of names per sum otherwise)
            out[sys.intern(ns)] = n
    return out


_ROWS: dict[tuple[str, frozenset[str], tuple[Any, ...]], int] = {}
"""(counts text, kinds the caller may list in the namespace, filters' kinds, statuses and
suspension) -> visible rows: `_namespace_rows`'s lookups, cleared when full and by every memo
sweep (common.index.read.memo.on_sweep). Its keys share the texts and kind sets the memos
hold."""
_ROWS_MAX = 65536
memo_on_sweep(_ROWS.clear)


def _rows_of(
    value: str,
    own: frozenset[str],
    kinds: frozenset[str],
    statuses: frozenset[str],
    suspended: bool | None,
) -> int:
    """Rows of one namespace's counts text visible with `own` under the filters."""
    mine = {k: n for k, n in nscounts.decode(value).items() if k[0] in own}
    return tally.matching(mine, kinds, statuses, suspended)


def _codes_kept(filters: Filters) -> bytes:
    """The status codes of rows `filters` keep (b"": any), as `Reader.sources` keeps them."""
    statuses = tuple(sorted(set(filters.statuses) & set(STATUSES)))
    codes = rows.codes_for(statuses, filters.suspended)
    return b"" if len(codes) == len(rows.CODE_STATUS) else codes.encode()


def _copied(part: Part, pos: int) -> Part:
    """A copy of `part` to move (parts are shared by answers and the memo: never mutated),
    holding at feed generation `pos`."""
    return Part(
        part.total,
        dict(part.kinds),
        dict(part.namespaces),
        {k: dict(v) for k, v in part.labels.items()},
        0,
        pos,
    )


@dataclass(frozen=True)
class _RowTest:
    """Whether one state of a row (from a change feed's line) is counted in a caller's part
    under `filters`, as the part's scan would have read it, and counting it in or out."""

    vis: Visibility
    """The caller's member test under the filters (`Reader.visibility`: kinds and codes)."""
    filters: Filters
    label_keys: tuple[str, ...]

    def count(
        self,
        into: tuple[Part, Part],
        ns_b: bytes,
        kind_b: bytes,
        name_b: bytes,
        code_b: bytes,
        field: bytes,
        sign: int,
    ) -> None:
        """Count the row state (namespace, kind, name, status code, stored labels field) into
        each part of `into` (`sign` 1) or out of it (-1) when the caller sees it under the
        filters (a part and the signed counts of what moved)."""
        f, vis = self.filters, self.vis
        if vis.codes and code_b not in vis.codes:
            return
        if (vis.kinds is not None and kind_b not in vis.kinds) or kind_b not in vis.namespaces.get(
            ns_b, vis.cluster_wide
        ):
            return
        ns, kind = ns_b.decode(), kind_b.decode()
        if f.namespaces and ns not in f.namespaces:
            return
        labels: dict[str, str] = {}
        if field and (f.labels.requirements or self.label_keys):
            labels = rows.parse_labels(field.decode(), name_b.decode(), ns)[0]
        if f.labels.requirements and not f.labels.matches(labels):
            return
        code = code_b.decode()
        for part in into:
            _bump(part.kinds, (kind, code), sign)
            _bump(part.namespaces, ns, sign)
            part.total += sign
            for k in self.label_keys:
                v = labels.get(k)
                if v is not None:
                    values = part.labels.setdefault(k, {})
                    _bump(values, v, sign)
                    if not values:
                        del part.labels[k]


def _bump(counts: dict[Any, int], key: Any, by: int) -> None:
    """Move one count by `by`, a count reaching zero dropped (as a scan never holds one)."""
    n = counts.get(key, 0) + by
    if n:
        counts[key] = n
    else:
        counts.pop(key, None)


def _count(part: Part, members: list[bytes], label_keys: tuple[str, ...]) -> None:
    for m in members:
        ns, kind, _name, code, _ = rows.member_head(m)
        key = (kind.decode(), code.decode())
        part.total += 1
        part.kinds[key] = part.kinds.get(key, 0) + 1
        space = ns.decode()
        part.namespaces[space] = part.namespaces.get(space, 0) + 1
        if label_keys:
            labels = rows.labels_of(m)
            for k in label_keys:
                v = labels.get(k)
                if v is not None:
                    values = part.labels.setdefault(k, {})
                    values[v] = values.get(v, 0) + 1


def _add_all(out: dict[str, int], more: Mapping[str, int]) -> None:
    for k, n in more.items():
        out[k] = out.get(k, 0) + n


def _sub_all(out: dict[str, int], less: Mapping[str, int]) -> None:
    for k, n in less.items():
        left = out.get(k, 0) - n
        if left > 0:
            out[k] = left
        else:
            out.pop(k, None)


def _add_part(
    out: Facets, cluster: str, part: Part, label_keys: tuple[str, ...], sign: int = 1
) -> None:
    """Count one cluster's part into `out` (`sign` -1: take it away, counts left at zero:
    `_drop_zeros`)."""
    count, merge = (add, _add_all) if sign > 0 else (_take, _sub_all)
    for (kind, code), n in part.kinds.items():
        status, susp = tally.code_status(code)
        count(out, cluster, kind, status, susp, n)
    merge(out.namespaces, part.namespaces)
    for k in label_keys:
        merge(out.labels.setdefault(k, {}), part.labels.get(k, {}))


def _add_moves(out: Facets, cluster: str, moves: Part, label_keys: tuple[str, ...]) -> None:
    """Count one cluster's signed moves (`Part.moved`) into `out` (counts left at zero:
    `_drop_zeros`; namespaces and label values at zero dropped here, as `_sub_all` does)."""
    for (kind, code), n in moves.kinds.items():
        status, susp = tally.code_status(code)
        (add if n > 0 else _take)(out, cluster, kind, status, susp, abs(n))
    for counts, more in (
        (out.namespaces, moves.namespaces),
        *((out.labels.setdefault(k, {}), moves.labels.get(k, {})) for k in label_keys),
    ):
        for key, n in more.items():
            _bump(counts, key, n)


def top_values(
    values: Mapping[str, int], n: int = LABEL_VALUES_TOP
) -> tuple[dict[str, int], int, int]:
    """The `n` values with most rows (ties by value), and how many values and rows were left."""
    ranked = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    rest = ranked[n:]
    return dict(ranked[:n]), len(rest), sum(c for _v, c in rest)


def group_counts(
    reader: Reader,
    access: Mapping[str, AccessLike],
    filters: Filters,
    by: str,
    clusters: Sequence[str],
    rows_max: int,
) -> Facets:
    """Facets of groups (`by` object or namespace) under a label selector, from the matching
    rows (the group counts' compact arrays know no labels): as common.index.read.group_facets
    counts them. More than `rows_max` matching rows is an InvalidInput."""
    from common.errors import InvalidInput

    sets: dict[str, dict[str, set[bytes]]] = {
        "clusters": {},
        "kinds": {},
        "statuses": {},
        "suspended": {},
    }
    every: set[bytes] = set()
    streams = [s for c in clusters if (s := reader.stream(c, access[c], filters)) is not None]
    seen = 0
    scanned = 0
    while streams:
        left = []
        for s, chunk in zip(streams, reader.more(streams, filters, 1024), strict=True):
            scanned += chunk.scanned
            seen += len(chunk.members)
            for m in chunk.members:
                ns, kind, _name, code, _ = rows.member_head(m)
                key = rows.identity_bytes(m) if by == "object" else ns + b"\x00"
                status, susp = tally.code_status(code.decode())
                every.add(key)
                for field_name, value in (
                    ("clusters", s.cluster),
                    ("kinds", kind.decode()),
                    ("statuses", status),
                    ("suspended", "true" if susp else "false"),
                ):
                    sets[field_name].setdefault(value, set()).add(key)
            if not chunk.done:
                left.append(s)
        streams = left
        if seen > rows_max:
            raise InvalidInput(
                "labelSelector",
                f"matches more than {rows_max} objects: too many to count groups of; "
                "narrow the selector or add filters",
            )
    out = Facets(total=len(every), scanned=scanned)
    out.clusters = {k: len(v) for k, v in sets["clusters"].items()}
    out.kinds = {k: len(v) for k, v in sets["kinds"].items()}
    out.statuses = {k: len(v) for k, v in sets["statuses"].items()}
    out.suspended = {k: len(v) for k, v in sets["suspended"].items()}
    return out
