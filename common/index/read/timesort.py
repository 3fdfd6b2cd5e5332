"""Pages in lastTransitionTime order across clusters (`sort=lastTransitionTime` and
`sort=-lastTransitionTime`), RBAC-filtered, from the time index (common.index.timeline).

A page merges the caller's clusters, each a stream of its visible entries in time order, taking
the best head of all until the page is full. Per cluster, the plan is one of two:

- walk the time index: its windows newest (or oldest) first, each tested against the caller's
  access and the filters here. Windows are read whole (small listpack sets) and remembered per
  process with their versions (the directory's, re-read when the cluster's generation moves), so
  a write makes the next page read the one or two windows it touched, nothing else;
- for a sparse status filter (statuses without `healthy`, or `suspended=true`) and a caller who
  sees only some namespaces of the cluster: read the status indexes (the caller's namespace
  ranges of them) and place their visible members by their time-index scores (one ZSCORE per
  member not seen before), instead of testing thousands of entries to find a few.

Visible entries are remembered per (window versions or generation, caller's visibility,
filters); a page is remembered with the generations of the caller's clusters (read first, in
the page's first round trip): the same page again costs that one round trip. After writes that
moved no status generation (common.index.keys.status_generation: rows' messages changed, most
watch events), the page's order is the same: it is kept, and only its rows on the written
clusters are read again (two more round trips, not a walk). After writes that moved some, the
page merges what its last walk knew with fresh walks of those clusters only (`_patched`): the
clusters written at the same status generation keep their entries, and a status segment is
kept across such writes too, their rows read again where the page shows them. Rows of entries
are read by identity and remembered by entry and window version.

The order is (time, cluster, entry) ascending, or exactly its reverse. The keyset cursor is the
last row's position in it, plus the time the walk began: a row that transitions after that is
placed after it (scores are never later than their write), in the rest of the current window,
so a walk skips it from then on: a row is never shown twice on one walk, and rows that did not
change are never skipped. Rows whose transition time is in a later window than the start (a
leaf's clock ahead) are placed at that window's start and always shown. Rows without a
transition time sort as the oldest.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from common import redis_client
from common.index import keys, rows, timeline
from common.index.read import tally
from common.index.read.memo import Flights, Memo, not_older
from common.index.read.plan import AccessLike, Filters
from common.index.read.reader import Visibility, labelled
from common.kinds.status import STATUSES

__all__ = ["TimeCursor", "TimePage", "TimeReader"]

ENTRIES_MAX = 500_000
"""Entries remembered per process (~120 B each), shared out among the memos: half for windows,
a quarter for callers' visible entries, the rest for status indexes, scores and rows."""
DIRS_MAX = 4096  # remembered cluster directories (one per cluster)
MORE_GROUPS = 4  # window groups read at once for a cluster whose entries ran out
PAGES_MAX = 1024  # remembered pages per process
LABEL_ROUNDS = 8
"""Batches of entries a label-selected page reads at most before returning short."""
LABEL_BATCH_MAX = 4096  # entries per batch (their rows are read by identity)
EXTRA = 16
"""Entries a walk picks beyond its page and look-ahead, so that the next page after a write
that took some out of the order can still be merged (`_patched`)."""
PATCH_MOVED_MAX = 16
"""Clusters whose status generation moved beyond which a page is walked again rather than
merged (clusters written at the same status generation do not count: `_patched`)."""


@dataclass(frozen=True)
class TimeCursor:
    """The last row a page returned: its time (ms; -1: none), cluster and time-index entry, and
    when the walk began (ms)."""

    at: int
    cluster: str
    entry: bytes
    start: int


@dataclass
class TimePage:
    members: list[tuple[str, bytes]]
    cursor: TimeCursor | None
    scanned: int = 0
    """Window entries and status-index members read from Redis for this page."""
    round_trips: int = 0
    version: keys.GrantsVersion | None = None
    window_reads: int = 0
    """Windows read from Redis (not remembered) for this page: what the tests count."""
    walked: _Walked | None = field(default=None, repr=False, compare=False)
    """What this page's walk knew of the order, for the next page after writes (`_patched`)."""
    patched: bool = False
    """Merged from the last walk and the written clusters' streams (`_patched`)."""


@dataclass(frozen=True)
class _Walked:
    """A walk's knowledge of the order: the first `picked` entries of the merged order (page,
    look-ahead and `EXTRA` more), exactly, as of `gens`; `found` the rows of the page's
    entries (None: left out); `complete` when no other entry exists; `hidden` each cluster's
    earliest entry the walk's start left out (a leaf's clock ahead)."""

    gens: dict[str, Any]
    start: int
    picked: list[tuple[str, Item]]
    found: list[bytes | None]
    complete: bool
    hidden: dict[str, int]
    versions: dict[str, Mapping[str, Any] | None]
    """Window versions per cluster (None: rows written since, read them again)."""


class _Desc:
    """A heap key in reverse order."""

    __slots__ = ("k",)

    def __init__(self, k: tuple[int, str, bytes, int]) -> None:
        self.k = k

    def __lt__(self, other: _Desc) -> bool:
        return other.k < self.k


_Segments = dict[tuple[str, ...], tuple[Any, list[Any]]]
"""Window group -> (its versions, its visible entries): one caller's visibility and filters."""
_Fetched = dict[tuple[str, str], tuple[Any, list[tuple[int, bytes]]]]
"""Windows read by one page: (cluster, suffix) -> (version, entries)."""
Item = tuple[Any, ...]
"""A visible entry of a segment: (time, entry) from a window, (time, entry, member) from a
status index; segments are in ascending order."""


@dataclass
class _Stream:
    """One cluster's walk: its segments in walk order (window groups, or one list from the
    status indexes), the one being walked and where in it."""

    cluster: str
    gen: Any
    groups: list[tuple[str, ...]]
    visible: Visibility
    versions: Mapping[str, Any]
    """Each window's version (from the directory); status segments: {"": generation}."""
    sgen: Any = None
    """A status stream's cluster's status generation, when read (`_status_segments`)."""
    next_group: int = 0
    seq: list[Item] = field(default_factory=list)
    idx: int = 0
    end: int = 0
    step: int = 1
    ready: list[Item] | None = None
    """A status stream's one segment, as computed for this page."""
    segs: _Segments | None = None
    """Its remembered segments (held here: the memo may drop them meanwhile)."""
    segkey: tuple[str, int, int] = ("", 0, 0)
    """Where `segs` is remembered (`TimeReader._segments`)."""

    @property
    def head(self) -> Item:
        return self.seq[self.idx]

    def exhausted(self) -> bool:
        return (self.idx >= self.end) if self.step > 0 else (self.idx < self.end)


class TimeReader:
    """Time-ordered pages (one per process; thread-safe: a page keeps what it reads for itself,
    the shared caches are only a head start)."""

    def __init__(self, r: redis.Redis, entries_max: int = ENTRIES_MAX) -> None:
        self.r = r
        self.entries_max = entries_max
        share = max(entries_max // 16, 1)  # weights: entries (and 1 per memo entry)
        self._dirs: Memo[str, _Directory] = Memo(DIRS_MAX)
        """cluster -> its windows, by generation."""
        self._windows: Memo[tuple[str, str], list[tuple[int, bytes]]] = Memo(
            8 * share, "timesort.windows"
        )
        """(cluster, suffix) -> the window's (time, entry) pairs, by the window's version."""
        self._segments: Memo[tuple[str, int, int], _Segments] = Memo(4 * share, "timesort.segments")
        """(cluster, visibility id, filters key id) -> each window group's visible entries; the
        entry holds the visibility and the key (`_key`)."""
        self._indexes: Memo[tuple[str, str], list[bytes]] = Memo(2 * share, "timesort.indexes")
        """(cluster, status index) -> its members, by generation."""
        self._scores: Memo[tuple[str, bytes], int] = Memo(share)
        """(cluster, member) -> its place in time (fixed while the member is stored)."""
        self._members: Memo[tuple[str, bytes], bytes] = Memo(share, "timesort.members")
        """(cluster, entry) -> its row, by the window holding the entry and its version."""
        self._keys: Memo[tuple[Filters, bytes], tuple[Filters, bytes]] = Memo(PAGES_MAX)
        self._visible: Memo[tuple[int, Filters], Visibility] = Memo(PAGES_MAX, "timesort.visible")
        self._pages: Memo[tuple[Any, ...], TimePage] = Memo(PAGES_MAX, "timesort.pages")
        self._orders: Memo[tuple[Any, ...], tuple[list[Any], list[Any], TimePage]] = Memo(
            PAGES_MAX, "timesort.orders"
        )
        """The last page of a request, with the status generations and generations it was
        read at: a page after writes that moved no status generation (`_reworded`)."""
        self._flights = Flights()
        """Pages being read: the same one asked meanwhile waits for it (`Flights`)."""
        self.reworded = 0
        """Pages answered from the last one's order with only their rows read again."""
        self.kept_segments = 0
        """Status segments kept across a write that moved no status generation."""
        self._rewording = True
        """Whether the last page written since kept its order (`_reworded`): the next reads its
        rows on the written clusters with the status generations (`_status_and_rows`)."""

    def page(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        limit: int,
        descending: bool,
        cursor: TimeCursor | None = None,
        confirm_version: bool = False,
    ) -> TimePage:
        """Up to `limit` visible rows after `cursor` in time order (newest first when
        `descending`); `confirm_version` as common.index.read.reader.Reader.page has it. A page is
        remembered with the generations of the caller's clusters, read first: while none of
        them was written, the same request is answered from it after that one round trip; while
        none of their status generations moved, from its order, with the rows on the written
        clusters read again (`_reworded`)."""
        wanted = set(filters.clusters)
        clusters = [c for c in sorted(access) if not wanted or c in wanted]
        out = TimePage([], None)
        gens, out.version = tally.generations(self.r, clusters, confirm_version)
        out.round_trips = 1 if clusters or confirm_version else 0
        if not clusters:
            return out
        memo = (id(access), filters, cursor, limit, descending)
        hit = self._pages.get(memo, gens, access)
        if hit is not None:
            return dataclasses.replace(
                hit, version=out.version, round_trips=1, scanned=0, window_reads=0
            )
        with self._flights.one(memo):  # the same page asked meanwhile: its answer, once
            held = self._pages.peek(memo, access)
            if held is not None and not_older(held[0], gens):
                return dataclasses.replace(
                    held[1], version=out.version, round_trips=1, scanned=0, window_reads=0
                )
            # Written since: if no status generation moved (only rows' text did: most watch
            # events), the order is the one remembered and only its rows on the written
            # clusters are read again; else the page is walked again.
            prev = self._orders.get(memo, owner=access)
            moved = _moved(clusters, gens, prev)
            sgens, reread = self._status_and_rows(clusters, moved[1])
            out.round_trips += 1
            if not self._reworded(prev, moved, clusters, gens, sgens, reread, out):
                by_sgen = dict(zip(clusters, sgens, strict=True))
                if filters.labels or not self._patched(
                    memo, access, clusters, gens, by_sgen, filters, limit, descending, cursor, out
                ):
                    self._page(
                        access, clusters, gens, by_sgen, filters, limit, descending, cursor, out
                    )
            self._pages.put(memo, out, list(gens), access)
            self._orders.put(memo, (list(sgens), list(gens), out), owner=access)
        return out

    def _status_and_rows(
        self, clusters: list[str], todo: list[tuple[int, str, Any]]
    ) -> tuple[list[Any], list[Any] | None]:
        """The clusters' status generations and, while the last pages written since kept their
        order (`_rewording`), in the same round trip the remembered page's rows on the clusters
        written since: what `_reworded` would read next if the status generations let it (two
        round trips in one under steady message updates; when they moved, the rows read are
        left unused and the page is walked or merged); `todo` as `_moved` finds them. The
        rows: None when not read."""
        if not todo or not self._rewording or redis_client.is_cluster(self.r):
            return tally.status_generations(self.r, clusters)[0], None
        commands = [tally.generations_command(clusters, status=True)]
        commands += [_row_of(c, rows.identity_bytes(m)) for _i, c, m in todo]
        got = redis_client.pipelined(self.r, commands)
        return got[0], got[1:]

    def _reworded(
        self,
        prev: _Order | None,
        moved: tuple[set[str], list[tuple[int, str, Any]]],
        clusters: list[str],
        gens: list[Any],
        sgens: list[Any],
        reread: list[Any] | None,
        out: TimePage,
    ) -> bool:
        """Fill `out` from the page remembered for this request (`prev`) when the clusters'
        status generations are those it was walked at (the time index, the rows present and
        their statuses are the same: the same rows in the same order): its rows on the clusters
        written since are read again (their messages moved; `reread` when already read), the
        others kept. False when it cannot."""
        if prev is None:
            return False
        self._rewording = prev[0] == sgens
        if not self._rewording:
            return False
        page = prev[2]
        written, todo = moved
        members = list(page.members)
        if todo:
            got = reread
            if got is None:
                commands = [_row_of(c, rows.identity_bytes(m)) for _i, c, m in todo]
                got = redis_client.pipelined(self.r, commands)
                out.round_trips += 1
            for (i, c, m), reply in zip(todo, got, strict=True):
                members[i] = (c, reply[0] if reply else m)
        self.reworded += 1
        out.members = members
        out.cursor = page.cursor
        walked = page.walked
        if walked is not None:  # the same order; rows on the moved clusters as read now
            now = dict(zip(clusters, gens, strict=True))
            shown = iter(m for _c, m in members)
            found = [next(shown) if m is not None else None for m in walked.found]
            stale = {c: None for c in written}
            out.walked = dataclasses.replace(
                walked, gens=now, found=found, versions={**walked.versions, **stale}
            )
        return True

    def _patched(
        self,
        memo: tuple[Any, ...],
        access: Mapping[str, AccessLike],
        clusters: list[str],
        gens: list[Any],
        by_sgen: Mapping[str, Any],
        filters: Filters,
        limit: int,
        descending: bool,
        cursor: TimeCursor | None,
        out: TimePage,
    ) -> bool:
        """Fill `out` by merging what the last walk of `memo` knew of the order with fresh
        walks of the clusters whose status generation moved since (a transition moves a row to
        the head of its cluster's stream; the other clusters' streams are as they were, and
        those written at the same status generation only had rows' text changed: their
        entries are kept, their rows on the page read again), instead of walking every cluster
        again. The merge is exact up to the last entry known on every stream (the walk's last
        pick, unless every entry was picked; a fresh stream's last pick); False when that does
        not cover the page, when too many clusters' statuses moved, or when the walk's start
        moved past an entry it left out."""
        prev = self._orders.get(memo, owner=access)
        walked = prev[2].walked if prev is not None else None
        if prev is None or walked is None or walked.gens.keys() != set(clusters):
            return False
        written_since = [c for c, g in zip(clusters, gens, strict=True) if walked.gens[c] != g]
        # Written since at the status generation the walk knew (only rows' text moved: most
        # watch events): their entries and order are as known, only their rows are read again.
        then = dict(zip(clusters, prev[0], strict=True))
        reread = {c for c in written_since if then[c] is not None and then[c] == by_sgen.get(c)}
        moved = [c for c in written_since if c not in reread]
        if not written_since or len(moved) > PATCH_MOVED_MAX:
            return False
        start = cursor.start if cursor is not None else int(time.time() * 1000)
        if start // timeline.WINDOW_MS != walked.start // timeline.WINDOW_MS:
            return False  # a new window: placements of future entries change
        written = set(moved)
        if any(at <= start for c, at in walked.hidden.items() if c not in written):
            return False  # an entry the last walk left out (ahead of its start) is due now
        codes = _codes(filters)
        bounds = _Bounds(cursor, descending, start)
        by_gen = dict(zip(clusters, gens, strict=True))
        streams, key, fetched = self._streams(
            access, moved, by_gen, by_sgen, filters, codes, bounds, out
        )
        cap = limit + 1 + EXTRA

        def order(e: tuple[str, Item]) -> tuple[Any, str, bytes]:
            return (e[1][0], e[0], e[1][1])

        # the written clusters' entries up to the last one the walk knew (none after it can
        # be placed: the other clusters' entries there are unknown)
        until = None if walked.complete else order(walked.picked[-1])
        fresh = self._picker(streams, bounds, key, fetched, out, descending)(cap, until)

        kept = [
            (c, _unread(item)) if c in reread else (c, item)
            for c, item in walked.picked
            if c not in written
        ]
        merged = sorted([*kept, *fresh], key=order, reverse=descending)
        ends = [] if walked.complete else [order(walked.picked[-1])]
        if len(fresh) >= cap:
            ends.append(order(fresh[-1]))
        if ends:
            end = max(ends) if descending else min(ends)  # the earliest in walk order
            merged = [e for e in merged if (order(e) >= end if descending else order(e) <= end)]
        complete = not ends and len(merged) <= cap
        picked = merged[:cap]
        if len(picked) <= limit and not complete:
            return False  # the page needs entries past what is known: walk
        page = picked[:limit]
        rows_of = {
            (c, item[1]): m
            for (c, item), m in zip(walked.picked, walked.found, strict=False)
            if c not in written and c not in reread
        }
        versions: dict[str, Mapping[str, Any] | None] = {**walked.versions}
        versions.update(dict.fromkeys(reread))
        versions.update({s.cluster: s.versions for s in streams})
        found = self._found(page, rows_of, codes, out, versions)
        out.members = [(c, m) for (c, _item), m in zip(page, found, strict=True) if m is not None]
        out.cursor = None
        if len(picked) > limit:
            c, item = page[-1]
            out.cursor = TimeCursor(item[0], c, item[1], start)
        hidden = {c: at for c, at in walked.hidden.items() if c not in written}
        hidden.update(bounds.hidden)
        out.walked = _Walked(by_gen, start, picked, found, complete, hidden, versions)
        out.patched = True
        return True

    def _found(
        self,
        page: list[tuple[str, Item]],
        known: Mapping[tuple[str, bytes], bytes | None],
        codes: bytes,
        out: TimePage,
        versions: Mapping[str, Mapping[str, Any] | None],
    ) -> list[bytes | None]:
        """The rows of a merged page's entries: as the last walk found them on the clusters not
        written since, the others read (by window version where known, else from Redis)."""
        found: list[bytes | None] = [None] * len(page)
        todo: list[int] = []
        for i, (c, item) in enumerate(page):
            if (c, item[1]) in known:
                found[i] = known[c, item[1]]
            else:
                todo.append(i)
        if not todo:
            return found
        stale = [i for i in todo if versions.get(page[i][0]) is None and len(page[i][1]) != 3]
        skip = set(stale)
        ready = [i for i in todo if i not in skip]
        if ready:
            known_versions = {c: v for c, v in versions.items() if v is not None}
            got = self._aligned([page[i] for i in ready], codes, out, known_versions)
            for i, m in zip(ready, got, strict=True):
                found[i] = m
        if stale:
            commands = [_row_of(page[i][0], timeline.identity(page[i][1][1])) for i in stale]
            replies = redis_client.pipelined(self.r, commands)
            out.round_trips += 1
            for i, reply in zip(stale, replies, strict=True):
                m = reply[0] if reply else None
                found[i] = (
                    None if m is None or (codes and rows.member_status_code(m) not in codes) else m
                )
        return found

    def _page(
        self,
        access: Mapping[str, AccessLike],
        clusters: list[str],
        gens: list[Any],
        by_sgen: Mapping[str, Any],
        filters: Filters,
        limit: int,
        descending: bool,
        cursor: TimeCursor | None,
        out: TimePage,
    ) -> None:
        start = cursor.start if cursor is not None else int(time.time() * 1000)
        codes = _codes(filters)
        bounds = _Bounds(cursor, descending, start)
        by_gen = dict(zip(clusters, gens, strict=True))
        streams, key, fetched = self._streams(
            access, clusters, by_gen, by_sgen, filters, codes, bounds, out
        )
        pick = self._picker(streams, bounds, key, fetched, out, descending)
        versions = {s.cluster: s.versions for s in streams}
        if filters.labels:
            self._selected(pick, limit + 1, codes, filters, out, versions, start)
            return
        cap = limit + 1 + EXTRA  # the look-ahead, and more for the next page's merge
        picked = pick(cap)
        page = picked[:limit]
        found = self._aligned(page, codes, out, versions)
        out.members = [(c, m) for (c, _item), m in zip(page, found, strict=True) if m is not None]
        if len(picked) > limit:
            cluster, item = page[-1]
            out.cursor = TimeCursor(item[0], cluster, item[1], start)
        complete = len(picked) < cap
        held: dict[str, Mapping[str, Any] | None] = {**versions}
        out.walked = _Walked(by_gen, start, picked, found, complete, bounds.hidden, held)

    def _streams(
        self,
        access: Mapping[str, AccessLike],
        clusters: Sequence[str],
        by_gen: Mapping[str, Any],
        by_sgen: Mapping[str, Any],
        filters: Filters,
        codes: bytes,
        bounds: _Bounds,
        out: TimePage,
    ) -> tuple[list[_Stream], tuple[Filters, bytes], _Fetched]:
        """The walk's streams of `clusters`, each at its first visible entry (or none left),
        the segments' key, and the windows read meanwhile."""
        sources = _status_sources(filters)
        # The plan, per cluster: with a sparse status filter, a caller who sees only some
        # namespaces there (few matches among many entries) reads the status indexes; one who
        # sees the whole cluster walks the time index, whose first windows hold matches.
        indexed = [c for c in clusters if sources and not _broad(access[c], filters)]
        walked = [c for c in clusters if not sources or _broad(access[c], filters)]
        streams: list[_Stream] = []
        for c in indexed:
            g = by_gen[c]
            vis = self._visibility(access[c], filters)
            streams.append(_Stream(c, g, [("",)], vis, {"": g}, sgen=by_sgen.get(c)))
        if streams:
            self._status_segments(streams, sources, filters, codes, out)
        dirs = self._directories(walked, [by_gen[c] for c in walked], out)
        for c in walked:
            d = dirs[c]
            groups = d.walk(bounds.descending, bounds.cursor)
            if groups:
                vis = self._visibility(access[c], filters)
                streams.append(_Stream(c, by_gen[c], groups, vis, d.versions))
        key = self._key(filters, codes)
        # Windows this page read, kept here too: the memos may drop them (other pages' reads
        # evict) while this page is being merged.
        fetched: _Fetched = {}
        pending = streams
        while pending:  # every stream's first visible entry (or none left), before merging
            short = [s for s in pending if self._advance(s, bounds, key, fetched) is None]
            if short:
                self._read_windows(short, out, fetched)
            pending = short
        return streams, key, fetched

    def _picker(
        self,
        streams: list[_Stream],
        bounds: _Bounds,
        key: tuple[Filters, bytes],
        fetched: _Fetched,
        out: TimePage,
        descending: bool,
    ) -> Callable[..., list[tuple[str, Item]]]:
        """`pick(n, until=None)`: the next `n` entries of the streams' merged order (fewer when
        they run out, or past `until`, a (time, cluster, entry) in that order), reading
        windows as the streams reach them."""
        heap: list[Any] = [
            _key(s, i, descending) for i, s in enumerate(streams) if not s.exhausted()
        ]
        heapq.heapify(heap)

        def pick(want: int, until: tuple[Any, str, bytes] | None = None) -> list[tuple[str, Item]]:
            got: list[tuple[str, Item]] = []
            while heap and len(got) < want:
                k = heap[0].k if descending else heap[0]
                if until is not None and (k[:3] < until if descending else k[:3] > until):
                    break
                top = heapq.heappop(heap)
                i = top.k[-1] if descending else top[-1]
                s = streams[i]
                got.append((s.cluster, s.head))
                s.idx += s.step
                while (more := self._advance(s, bounds, key, fetched)) is None:
                    self._read_windows([s], out, fetched)
                if more:
                    heapq.heappush(heap, _key(s, i, descending))
            return got

        return pick

    def _selected(
        self,
        pick: Callable[[int], list[tuple[str, Item]]],
        need: int,
        codes: bytes,
        filters: Filters,
        out: TimePage,
        versions: Mapping[str, Mapping[str, Any]],
        start: int,
    ) -> None:
        """A page under a label selector: the time index knows no labels, so entries are taken
        in order a batch at a time, their rows read and tested, until the page is full. After
        `LABEL_ROUNDS` batches a page may be short, with a `continue` where the walk stopped."""
        kept: list[tuple[str, Item, bytes]] = []
        last: tuple[str, Item] | None = None
        batch = need
        for _round in range(LABEL_ROUNDS):
            got = pick(batch)
            if not got:
                last = None
                break
            last = got[-1]
            rows_of = self._aligned(got, codes, out, versions)
            found = [m for m in rows_of if m is not None]
            matching = {id(m) for m in labelled(found, filters.labels)}
            for (cluster, item), member in zip(got, rows_of, strict=True):
                if member is not None and id(member) in matching:
                    kept.append((cluster, item, member))
            if len(kept) >= need:
                break
            if len(got) < batch:  # every entry was read
                last = None
                break
            batch = min(batch * 4, LABEL_BATCH_MAX)
        out.members = [(c, m) for c, _item, m in kept[: need - 1]]
        if len(kept) >= need:
            cluster, item, _m = kept[need - 2]
            out.cursor = TimeCursor(item[0], cluster, item[1], start)
        elif last is not None:  # rounds ran out: a short page, continued after what was read
            out.cursor = TimeCursor(last[1][0], last[0], last[1][1], start)

    # -- segments ------------------------------------------------------------------------------

    def _advance(
        self, s: _Stream, bounds: _Bounds, key: tuple[Filters, bytes], fetched: _Fetched
    ) -> bool | None:
        """Whether `s` has a head (moving on to its next segment when the current one is
        done); None: its next segment's windows must be read from Redis first."""
        while s.exhausted():
            if s.next_group >= len(s.groups):
                return False
            group = s.groups[s.next_group]
            seq = self._segment(s, group, key, fetched)
            if seq is None:
                return None
            s.next_group += 1
            if not seq:  # most windows, for a caller who sees a few namespaces
                continue
            seq, lo, hi = bounds.span(s.cluster, seq)
            s.seq = seq
            if bounds.descending:
                s.idx, s.end, s.step = hi - 1, lo, -1
            else:
                s.idx, s.end, s.step = lo, hi, 1
        return True

    def _segment(
        self, s: _Stream, group: tuple[str, ...], key: tuple[Filters, bytes], fetched: _Fetched
    ) -> list[Item] | None:
        """The visible entries of one window group (remembered per caller's visibility and
        filters while the window versions hold); None when a window must be read."""
        if s.ready is not None:
            return s.ready
        segs = s.segs
        if segs is None:
            segs = self._segs(s, key)
        versions = (
            (s.versions[group[0]],)
            if len(group) == 1
            else tuple(s.versions[suffix] for suffix in group)
        )
        hit = segs.get(group)
        if hit is not None and hit[0] == versions:
            return hit[1]
        raw: list[tuple[int, bytes]] = []
        for suffix in group:
            window = self._window(s.cluster, suffix, s.versions[suffix], fetched)
            if window is None:
                return None
            raw.extend(window)
        if len(group) > 1:
            raw.sort()
        filters, codes = key
        seq: list[Item] = list(_visible(raw, s.visible, filters, codes, hit[1] if hit else ()))
        self._remember(s, group, (versions, seq))
        return seq

    def _segs(self, s: _Stream, key: tuple[Filters, bytes]) -> _Segments:
        """The stream's remembered segments (per cluster, visibility and filters key), new
        when there are none."""
        s.segkey = (s.cluster, id(s.visible), id(key))
        owner = (s.visible, key)
        segs = self._segments.get(s.segkey, owner=owner)
        if segs is None:
            segs = {}
            self._segments.put(s.segkey, segs, owner=owner)
        s.segs = segs
        return segs

    def _remember(self, s: _Stream, group: tuple[str, ...], value: tuple[Any, list[Any]]) -> None:
        assert s.segs is not None
        old = s.segs.get(group)
        s.segs[group] = value
        self._segments.grow(s.segkey, len(value[1]) - (len(old[1]) if old is not None else 0))

    def _window(
        self, cluster: str, suffix: str, version: Any, fetched: _Fetched
    ) -> list[tuple[int, bytes]] | None:
        """A window's entries at `version`, as this page read it or as remembered; None when
        it must be read."""
        got = fetched.get((cluster, suffix))
        if got is not None and got[0] == version:
            return got[1]
        return self._windows.get((cluster, suffix), version)

    def _read_windows(self, streams: Sequence[_Stream], out: TimePage, fetched: _Fetched) -> None:
        """Read the windows of the next `MORE_GROUPS` segments of each of `streams` that are
        not remembered at their cluster's generation, in one round trip."""
        missing: dict[tuple[str, str], Any] = {}
        for s in streams:
            for group in s.groups[s.next_group : s.next_group + MORE_GROUPS]:
                for suffix in group:
                    if self._window(s.cluster, suffix, s.versions[suffix], fetched) is None:
                        missing[(s.cluster, suffix)] = s.versions[suffix]
        if not missing:
            return
        got = redis_client.pipelined(
            self.r,
            [("ZRANGE", keys.timeline_window(c, w), 0, -1, "WITHSCORES") for c, w in missing],
        )
        out.round_trips += 1
        out.window_reads += len(missing)
        for ((c, suffix), version), reply in zip(missing.items(), got, strict=True):
            window = timeline.window_number(suffix)
            # timeline.position, inlined: a written cluster's current window is read whole
            # after every write (hundreds of entries)
            if window == timeline.UNTIMED:
                entries = [(-1, m) for m, _sc in _pairs(reply)]
            else:
                base = window * timeline.WINDOW_MS
                entries = [(base + int(float(sc)), m) for m, sc in _pairs(reply)]
            out.scanned += len(entries)
            fetched[(c, suffix)] = (version, entries)
            self._windows.put((c, suffix), entries, version, weight=1 + len(entries))

    def _status_segments(
        self,
        streams: list[_Stream],
        sources: tuple[str, ...],
        filters: Filters,
        codes: bytes,
        out: TimePage,
    ) -> None:
        """For a filter on a few statuses (or on suspension), each cluster's one segment: the
        visible members of its status indexes (small), placed by their time-index scores
        (ZMSCORE of their entries, whose windows follow from the members). Remembered like
        window segments; what is missing is read in two round trips for all clusters.

        A segment is remembered with the cluster's generation and status generation. Written
        since, but at the same status generation (only rows' text changed: most watch events),
        its entries and their order are the same: it is kept, its rows marked unread (None), so
        the page reads only the rows it shows (`_aligned`), not the caller's ranges of the
        indexes again (one read per namespace the caller has there)."""
        key = self._key(filters, codes)
        todo = []
        for s in streams:
            hit = self._segs(s, key).get(("",))
            if hit is not None and hit[0] == (s.gen, s.sgen):
                s.ready = hit[1]
            elif hit is not None and s.sgen is not None and hit[0][1:] == (s.sgen,):
                s.ready = [_unread(item) for item in hit[1]]
                self.kept_segments += 1
            else:
                todo.append(s)
        if not todo:
            return
        # Local views of what is read or remembered: other threads may empty the caches.
        indexes: dict[tuple[str, str], list[bytes]] = {}
        # A caller with a few namespaces there reads their ranges of each index; others read
        # the whole index (remembered per generation, shared by every caller).
        reads: list[tuple[_Stream, str, bytes | None]] = []
        for s in todo:
            spaces = _namespaces(s.visible, filters)
            for src in sources:
                if spaces is not None:
                    reads += [(s, src, ns) for ns in spaces]
                    continue
                whole = self._indexes.get((s.cluster, src), s.gen)
                if whole is None:
                    reads.append((s, src, None))
                else:
                    indexes[(s.cluster, src)] = whole
        ranged: dict[str, list[bytes]] = {}
        if reads:
            commands: list[tuple[Any, ...]] = []
            for s, src, ns in reads:
                k = _index_key(s.cluster, src)
                if ns is None:
                    commands.append(("ZRANGE", k, 0, -1))
                else:
                    commands.append(("ZRANGEBYLEX", k, b"[" + ns + b"\x00", b"(" + ns + b"\x01"))
            got = redis_client.pipelined(self.r, commands)
            out.round_trips += 1
            for (s, src, ns), members in zip(reads, got, strict=True):
                out.scanned += len(members)
                if ns is not None:
                    ranged.setdefault(s.cluster, []).extend(members)
                    continue
                self._indexes.put((s.cluster, src), members, s.gen, weight=1 + len(members))
                indexes[(s.cluster, src)] = members
        # A member's score is fixed while the member is stored (a changed row is a new member):
        # remembered per (cluster, member), only new members' scores are read.
        scores: dict[tuple[str, bytes], int] = {}
        placed: list[tuple[_Stream, list[bytes]]] = []
        unknown: list[tuple[str, bytes, str, str]] = []
        for s in todo:
            if _namespaces(s.visible, filters) is not None:
                members = ranged.get(s.cluster, [])
            else:
                members = [m for src in sources for m in indexes[(s.cluster, src)]]
            kept = _visible_members(members, s.visible, filters, codes)
            placed.append((s, kept))
            for m in kept:
                at = self._scores.get((s.cluster, m))
                if at is not None:
                    scores[(s.cluster, m)] = at
                else:
                    suffix, entry = timeline.where(m.decode())
                    unknown.append((s.cluster, m, suffix, entry))
        if unknown:
            missed = self._read_scores(unknown, scores, out)
            # An index not yet rebuilt may hold the entry in the legacy spelling
            # (common.index.codes); else it was written since the index was read: next time.
            twins = [
                (c, m, *t) for c, m, _w, _e in missed if (t := timeline.legacy_where(m.decode()))
            ]
            if twins:
                self._read_scores(twins, scores, out)
        for s, kept in placed:
            seq: list[Item] = []
            for m in kept:
                at = scores.get((s.cluster, m))
                if at is not None:
                    seq.append((at, timeline.entry_of(m), m))
            seq.sort()
            s.ready = seq
            self._remember(s, ("",), ((s.gen, s.sgen), seq))

    def _read_scores(
        self,
        unknown: list[tuple[str, bytes, str, str]],
        scores: dict[tuple[str, bytes], int],
        out: TimePage,
    ) -> list[tuple[str, bytes, str, str]]:
        """The time-index positions of (cluster, member, window suffix, entry), into `scores`
        and the memo (one round trip); those whose entry was not found."""
        got = redis_client.pipelined(
            self.r, [("ZSCORE", keys.timeline_window(c, w), e) for c, _m, w, e in unknown]
        )
        out.round_trips += 1
        missed = []
        for item, score in zip(unknown, got, strict=True):
            c, m, suffix, _entry = item
            if score is None:
                missed.append(item)
                continue
            at = timeline.position(timeline.window_number(suffix), int(float(score)))
            scores[(c, m)] = at
            self._scores.put((c, m), at)
        return missed

    # -- reads ---------------------------------------------------------------------------------

    def _directories(
        self, clusters: Sequence[str], gens: Sequence[Any], out: TimePage
    ) -> dict[str, _Directory]:
        """Each cluster's windows (number, suffix) in order and their versions, remembered per
        generation."""
        by_gen = dict(zip(clusters, gens, strict=True))
        known = {c: self._dirs.get(c, by_gen[c]) for c in clusters}
        todo = [c for c, d in known.items() if d is None]
        if todo:
            got = redis_client.pipelined(self.r, [("HGETALL", keys.timeline(c)) for c in todo])
            out.round_trips += 1
            for c, reply in zip(todo, got, strict=True):
                versions = {f.decode(): v for f, v in _pairs(reply)}
                prev = self._dirs.peek(c)
                if prev is not None and prev[1].versions.keys() == versions.keys():
                    d = dataclasses.replace(prev[1], versions=versions)  # the same windows
                else:
                    d = _Directory.of(versions)
                self._dirs.put(c, d, by_gen[c])
                known[c] = d
        return {c: d for c, d in known.items() if d is not None}

    def _rows(
        self,
        page: list[tuple[str, Item]],
        codes: bytes,
        out: TimePage,
        versions: Mapping[str, Mapping[str, Any]],
    ) -> list[tuple[str, bytes]]:
        """The stored rows of a page's entries (the status indexes' members as read; the others
        by identity, in one round trip); a row deleted since, or whose status no longer matches
        the filter, is left out."""
        members = []
        for (cluster, _item), member in zip(
            page, self._aligned(page, codes, out, versions), strict=True
        ):
            if member is not None:
                members.append((cluster, member))
        return members

    def _aligned(
        self,
        page: list[tuple[str, Item]],
        codes: bytes,
        out: TimePage,
        versions: Mapping[str, Mapping[str, Any]],
    ) -> list[bytes | None]:
        """The stored row of each entry of `page` (None: deleted since, or its status no
        longer matches)."""
        # A window's version moves with every write to it, and a row's member changes only
        # with a write to the window holding its entry: members are remembered by entry, that
        # window and its version.
        found: list[bytes | None] = []
        todo: list[tuple[int, str, bytes, Any]] = []
        for i, (cluster, item) in enumerate(page):
            if len(item) == 3 and item[2] is not None:
                found.append(item[2])
                continue
            # a kept status segment's entry (no window): its row as of the generation
            suffix = "" if len(item) == 3 else timeline.suffix_of(item[0], item[1])
            # by window and version: versions count each window's writes, so another window
            # (where a transition that kept the status moved the entry) may be at the same one
            version = (suffix, versions.get(cluster, {}).get(suffix))
            if version[1] is None:  # not known: read, not remembered
                found.append(None)
                todo.append((i, cluster, item[1], None))
                continue
            hit = self._members.get((cluster, item[1]), version)
            if hit is not None:
                found.append(hit)
                continue
            found.append(None)
            todo.append((i, cluster, item[1], version))
        if todo:
            commands = [_row_of(c, timeline.identity(e)) for _i, c, e, _v in todo]
            got = redis_client.pipelined(self.r, commands)
            out.round_trips += 1
            for (i, cluster, entry, version), reply in zip(todo, got, strict=True):
                if reply:
                    found[i] = reply[0]
                    if version is not None:
                        self._members.put((cluster, entry), reply[0], version)
        for i, member in enumerate(found):
            if member is not None and codes and rows.member_status_code(member) not in codes:
                found[i] = None
        return found

    def _key(self, filters: Filters, codes: bytes) -> tuple[Filters, bytes]:
        """One object per (filters, codes): segments are remembered by its id (hashing the
        filters for each of hundreds of segments a page looks up cost a tenth of a page), and
        hold it."""
        hit = self._keys.get((filters, codes))
        if hit is None:
            hit = (filters, codes)
            self._keys.put(hit, hit)
        return hit

    def _visibility(self, access: AccessLike, filters: Filters) -> Visibility:
        key = (id(access), filters)
        v = self._visible.get(key, owner=access)
        if v is None:
            v = Visibility.of(access, filters, b"")
            self._visible.put(key, v, owner=access)
        return v


@dataclass(frozen=True)
class _Bounds:
    """Where a page's walk lies in a cluster's segment: after the cursor, and placed no later
    than the walk's start."""

    cursor: TimeCursor | None
    descending: bool
    start: int
    hidden: dict[str, int] = field(default_factory=dict)
    """Per cluster, the earliest entry a segment had after the start in the start's window
    (left out: a leaf's clock ahead)."""

    def span(self, cluster: str, seq: list[Item]) -> tuple[list[Item], int, int]:
        """`seq` (ascending) without the entries placed after the walk's start, and the
        indexes [lo, hi) of it the walk may show. Placed after the start means in the rest of
        the window the start is in: entries of later windows have transition times in the
        future (a leaf's clock ahead), placed at their window's start whenever they were
        written, so they are always shown (as the newest)."""
        a = bisect.bisect_left(seq, (self.start + 1, b""))
        boundary = (self.start // timeline.WINDOW_MS + 1) * timeline.WINDOW_MS
        b = bisect.bisect_left(seq, (boundary, b""), a)
        if a < b:
            at = seq[a][0]
            if at < self.hidden.get(cluster, at + 1):
                self.hidden[cluster] = at
            seq = seq[:a] + seq[b:]
        lo, hi = 0, len(seq)
        cur = self.cursor
        if cur is None:
            return seq, lo, hi
        if self.descending:  # keep (time, cluster, entry) < the cursor's
            if cluster < cur.cluster:
                hi = min(hi, bisect.bisect_left(seq, (cur.at + 1, b"")))
            elif cluster == cur.cluster:
                hi = min(hi, bisect.bisect_left(seq, (cur.at, cur.entry)))
            else:
                hi = min(hi, bisect.bisect_left(seq, (cur.at, b"")))
        elif cluster < cur.cluster:  # keep (time, cluster, entry) > the cursor's
            lo = bisect.bisect_left(seq, (cur.at + 1, b""))
        elif cluster == cur.cluster:
            lo = bisect.bisect_left(seq, (cur.at, cur.entry + b"\x00"))
        else:
            lo = bisect.bisect_left(seq, (cur.at, b""))
        return seq, lo, max(lo, hi)


def _visible(
    raw: list[tuple[int, bytes]],
    vis: Visibility,
    filters: Filters,
    codes: bytes,
    before: Sequence[Item] = (),
) -> Iterator[Item]:
    """The entries of `raw` the caller may list that match the filters. `before`: the same
    segment's visible entries at an older version, for the same caller and filters: an entry
    (its bytes) found there passes without being parsed and tested again (a cluster admin's
    current window after a write: hundreds of entries, a few of them new)."""
    test = _matcher(vis, filters, codes)
    if before:
        seen = {entry for _at, entry in before}
        return (item for item in raw if item[1] in seen or test(*timeline.parse(item[1])))
    return (item for item in raw if test(*timeline.parse(item[1])))


def _visible_members(
    members: list[bytes], vis: Visibility, filters: Filters, codes: bytes
) -> list[bytes]:
    """The stored members the caller may list that match the filters."""
    test, head = _matcher(vis, filters, codes), rows.member_head
    return [m for m in members if test(*head(m)[:4])]


def _matcher(vis: Visibility, filters: Filters, codes: bytes) -> Callable[..., bool]:
    """A test of (namespace, kind key, name, status code): may the caller list it, and does it
    match the filters."""
    code_set = frozenset(codes[i : i + 1] for i in range(len(codes)))
    namespaces = frozenset(ns.encode() for ns in filters.namespaces)
    name = filters.name.encode()
    kinds, of_ns, cw = vis.kinds, vis.namespaces.get, vis.cluster_wide

    def test(ns: bytes, kind: bytes, nm: bytes, code: bytes) -> bool:
        return (
            (not code_set or code in code_set)
            and (not namespaces or ns in namespaces)
            and (not name or name in nm)
            and (kinds is None or kind in kinds)
            and kind in of_ns(ns, cw)
        )

    return test


def _broad(access: AccessLike, filters: Filters) -> bool:
    """Whether the caller may list, cluster-wide, the kinds the filter asks for (or some kinds
    everywhere when it asks for none)."""
    cw = access.cluster_wide
    return bool(cw) and (not filters.kinds or set(filters.kinds) <= cw)


RANGED_MAX = 64
"""A caller seeing at most this many namespaces of a cluster (and no kind cluster-wide) reads
their ranges of the status indexes rather than the whole indexes."""


def _namespaces(vis: Visibility, filters: Filters) -> list[bytes] | None:
    """The namespaces whose ranges a status read visits, or None: the whole index."""
    if vis.cluster_wide:
        return None
    spaces = list(vis.namespaces)
    if filters.namespaces:
        wanted = {ns.encode() for ns in filters.namespaces}
        spaces = [ns for ns in spaces if ns in wanted]
    return sorted(spaces) if len(spaces) <= RANGED_MAX else None


def _status_sources(filters: Filters) -> tuple[str, ...]:
    """The status indexes that hold every row a filter can match, when it is a sparse one
    (some statuses without `healthy`, or `suspended=true`); () otherwise: the time index."""
    if filters.suspended is True:
        return ("suspended",)
    statuses = set(filters.statuses) & set(STATUSES)
    if statuses and "healthy" not in statuses:
        return tuple(sorted(statuses))
    return ()


def _index_key(cluster: str, source: str) -> str:
    return keys.suspended(cluster) if source == "suspended" else keys.by_status(cluster, source)


def _codes(filters: Filters) -> bytes:
    """The status codes a page keeps (b"": any)."""
    statuses = tuple(sorted(set(filters.statuses) & set(STATUSES)))
    codes = rows.codes_for(statuses, filters.suspended)
    return b"" if len(codes) == len(rows.CODE_STATUS) else codes.encode()


@dataclass(frozen=True)
class _Directory:
    """A cluster's windows: their versions, and their suffixes grouped by window number in
    ascending order (`numbers` the window numbers, `highs` the last time each can hold)."""

    versions: dict[str, Any]
    groups: list[tuple[str, ...]]
    numbers: list[int]
    highs: list[int]

    @classmethod
    def of(cls, versions: dict[str, Any]) -> _Directory:
        by_number: dict[int, list[str]] = {}
        for suffix in sorted(versions):
            by_number.setdefault(timeline.window_number(suffix), []).append(suffix)
        numbers = sorted(by_number)
        groups = [tuple(by_number[n]) for n in numbers]
        lows = [timeline.position(n, 0) for n in numbers]
        highs = [
            lo if n == timeline.UNTIMED else lo + timeline.WINDOW_MS - 1
            for n, lo in zip(numbers, lows, strict=True)
        ]
        return cls(versions, groups, numbers, highs)

    def walk(self, descending: bool, cursor: TimeCursor | None) -> list[tuple[str, ...]]:
        """The groups a walk visits, in its order, from the one holding the cursor's time."""
        if descending:
            if cursor is None:
                return self.groups[::-1]
            # the last group whose low end is <= the cursor's time
            lows = [timeline.position(n, 0) for n in self.numbers]
            end = bisect.bisect_right(lows, cursor.at)
            return self.groups[:end][::-1]
        if cursor is None:
            return self.groups
        return self.groups[bisect.bisect_left(self.highs, cursor.at) :]


_Order = tuple[list[Any], list[Any], TimePage]
"""What a page's order is remembered as: (status generations, generations, the page)."""


def _moved(
    clusters: list[str], gens: list[Any], prev: _Order | None
) -> tuple[set[str], list[tuple[int, str, Any]]]:
    """The clusters written since the remembered page, and (place, cluster, member) of its rows
    on them."""
    if prev is None:
        return set(), []
    moved = {c for c, g, pg in zip(clusters, gens, prev[1], strict=True) if g != pg}
    return moved, [(i, c, m) for i, (c, m) in enumerate(prev[2].members) if c in moved]


def _unread(item: Item) -> Item:
    """An entry whose row must be read again: a status segment's entry without the row it
    carried (`_aligned` reads it); a window's entry as it is (read by its window's version)."""
    return (item[0], item[1], None) if len(item) == 3 else item


def _row_of(cluster: str, ident: bytes) -> tuple[Any, ...]:
    """The command reading the stored row of an identity (`namespace NUL kind NUL name NUL`)."""
    lo, hi = b"[" + ident, b"(" + ident[:-1] + b"\x01"
    return ("ZRANGEBYLEX", keys.rows(cluster), lo, hi, "LIMIT", 0, 1)


def _key(s: _Stream, i: int, descending: bool) -> Any:
    item = s.head
    k = (item[0], s.cluster, item[1], i)
    return _Desc(k) if descending else k


def _pairs(reply: Any) -> list[tuple[bytes, Any]]:
    """(member, score) pairs of a WITHSCORES reply (or (field, value) of an HGETALL), flat
    (RESP2), paired (RESP3) or a dict (a client's callbacks)."""
    if isinstance(reply, dict):
        return list(reply.items())
    if reply and isinstance(reply[0], list | tuple):
        return [(m, s) for m, s in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))
