"""Pages in lastTransitionTime order across clusters (`sort=lastTransitionTime` and
`sort=-lastTransitionTime`), RBAC-filtered, from the time index (common.index.timeline).

A page merges the caller's clusters: each cluster's entries come in time order from its windows,
are tested against the caller's access and the filters here, and the best head of all clusters
is taken until the page is full; the page's rows are then read by identity in one round trip.
Windows are read whole (small: listpack sets) and remembered per process with the cluster's
generation, read first in each page's first round trip: while a cluster is not written, its
windows cost no Redis work, and a write makes its next page read them again.

The order is (time, cluster, entry) ascending, or exactly its reverse. The keyset cursor is the
last row's position in it, plus the time the walk began: a row whose transition moved after that
is placed after it (common.index.timeline's scores are never later than their write), so a walk
skips it from then on: a row is never shown twice on one walk, and rows that did not change are
never skipped. Rows without a transition time sort as the oldest.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from common import redis_client
from common.index import keys, rows, tally, timeline
from common.index.reader import Visibility
from common.index.reader_plan import AccessLike, Filters
from common.kinds.status import STATUSES

__all__ = ["TimeCursor", "TimePage", "TimeReader"]

ENTRIES_MAX = 500_000
"""Window entries remembered per process (~120 B each: ~60 MB at most)."""
MORE_GROUPS = 4  # windows read at once for a cluster whose buffered entries ran out


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
    """Time-index entries tested for this page."""
    round_trips: int = 0
    version: keys.GrantsVersion | None = None
    window_reads: int = 0
    """Windows read from Redis (not remembered) for this page: what the tests count."""
    extra: dict[str, Any] = field(default_factory=dict)


class _Desc:
    """A heap key in reverse order."""

    __slots__ = ("k",)

    def __init__(self, k: tuple[int, str, bytes]) -> None:
        self.k = k

    def __lt__(self, other: _Desc) -> bool:
        return other.k < self.k


@dataclass
class _Stream:
    """One cluster's walk: its windows grouped by window number in walk order, and the
    entries of the groups read so far that are after the cursor and visible, in walk order."""

    cluster: str
    gen: Any
    groups: list[list[str]]
    visible: Visibility
    next_group: int = 0
    buffer: list[tuple[int, bytes]] = field(default_factory=list)
    pos: int = 0


class TimeReader:
    """Time-ordered pages (one per process; thread-safe enough: its caches are replaced whole)."""

    def __init__(self, r: redis.Redis, entries_max: int = ENTRIES_MAX) -> None:
        self.r = r
        self.entries_max = entries_max
        self._dirs: dict[str, tuple[Any, list[tuple[int, str]]]] = {}
        self._windows: dict[tuple[str, str], tuple[Any, list[tuple[int, bytes]]]] = {}
        self._held = 0
        self._visible: dict[tuple[int, Filters, bytes], tuple[AccessLike, Visibility]] = {}

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
        `descending`); `confirm_version` as common.index.reader.Reader.page has it."""
        wanted = set(filters.clusters)
        clusters = [c for c in sorted(access) if not wanted or c in wanted]
        start = cursor.start if cursor is not None else int(time.time() * 1000)
        out = TimePage([], None)
        gens, out.version = tally.generations(self.r, clusters, confirm_version)
        out.round_trips = 1 if clusters or confirm_version else 0
        if not clusters:
            return out
        codes = _codes(filters)
        dirs = self._directories(clusters, gens, out)
        streams = []
        for c, g in zip(clusters, gens, strict=True):
            groups = _groups(dirs[c], descending, cursor, start)
            if groups:
                vis = self._visibility(access[c], filters, codes)
                streams.append(_Stream(c, g, groups, vis))
        bounds = _Bounds(cursor, descending, start, filters, codes)
        pending = streams
        while pending:  # every stream's first visible entry (or none left), before merging
            self._fill(pending, bounds, out)
            pending = [s for s in pending if not s.buffer and s.next_group < len(s.groups)]
        heap: list[Any] = []
        for i, s in enumerate(streams):
            if s.buffer:
                heapq.heappush(heap, _key(s, i, descending))
        need = limit + 1
        picked: list[tuple[int, str, bytes]] = []
        while heap and len(picked) < need:
            top = heapq.heappop(heap)
            i = top.k[-1] if descending else top[-1]
            s = streams[i]
            at, entry = s.buffer[s.pos]
            picked.append((at, s.cluster, entry))
            s.pos += 1
            if s.pos >= len(s.buffer):
                s.buffer, s.pos = [], 0
                while not s.buffer and s.next_group < len(s.groups):
                    self._fill([s], bounds, out)
            if s.pos < len(s.buffer):
                heapq.heappush(heap, _key(s, i, descending))
        page = picked[:limit]
        out.members = self._rows(page, codes, out)
        if len(picked) > limit:
            at, cluster, entry = page[-1]
            out.cursor = TimeCursor(at, cluster, entry, start)
        return out

    # -- reads ---------------------------------------------------------------------------------

    def _directories(
        self, clusters: Sequence[str], gens: Sequence[Any], out: TimePage
    ) -> dict[str, list[tuple[int, str]]]:
        """Each cluster's windows (number, suffix) in order, remembered per generation."""
        todo = [
            c for c, g in zip(clusters, gens, strict=True) if self._dirs.get(c, (None,))[0] != g
        ]
        if todo:
            got = redis_client.pipelined(
                self.r, [("ZRANGE", keys.timeline(c), 0, -1, "WITHSCORES") for c in todo]
            )
            out.round_trips += 1
            by_gen = dict(zip(clusters, gens, strict=True))
            for c, reply in zip(todo, got, strict=True):
                windows = sorted((int(float(s)), m.decode()) for m, s in _pairs(reply))
                self._dirs[c] = (by_gen[c], windows)
        return {c: self._dirs[c][1] for c in clusters}

    def _fill(self, streams: Sequence[_Stream], bounds: _Bounds, out: TimePage) -> None:
        """Read the next window groups of `streams` (remembered ones from memory, the others in
        one round trip) into their buffers: the first group for a stream just begun, up to
        `MORE_GROUPS` for one whose entries ran out."""
        plans: list[tuple[_Stream, list[list[str]]]] = []
        missing: list[tuple[str, str, Any]] = []
        for s in streams:
            n = 1 if s.next_group == 0 else MORE_GROUPS
            groups = s.groups[s.next_group : s.next_group + n]
            s.next_group += len(groups)
            plans.append((s, groups))
            for group in groups:
                for suffix in group:
                    hit = self._windows.get((s.cluster, suffix))
                    if hit is None or hit[0] != s.gen:
                        missing.append((s.cluster, suffix, s.gen))
        if missing:
            got = redis_client.pipelined(
                self.r,
                [
                    ("ZRANGE", keys.timeline_window(c, w), 0, -1, "WITHSCORES")
                    for c, w, _ in missing
                ],
            )
            out.round_trips += 1
            out.window_reads += len(missing)
            if self._held > self.entries_max:
                self._windows.clear()
                self._held = 0
            for (c, suffix, gen), reply in zip(missing, got, strict=True):
                window = int(suffix) if suffix[:1] != "-" else timeline.UNTIMED
                entries = [
                    (timeline.position(window, int(float(sc))), m) for m, sc in _pairs(reply)
                ]
                self._windows[(c, suffix)] = (gen, entries)
                self._held += len(entries)
        for s, groups in plans:
            for group in groups:
                merged: list[tuple[int, bytes]] = []
                for suffix in group:
                    merged.extend(self._windows[(s.cluster, suffix)][1])
                if len(group) > 1:
                    merged.sort()
                if bounds.descending:
                    merged.reverse()
                out.scanned += len(merged)
                s.buffer.extend(bounds.keep(s.cluster, s.visible, merged))

    def _rows(
        self, page: list[tuple[int, str, bytes]], codes: bytes, out: TimePage
    ) -> list[tuple[str, bytes]]:
        """The stored rows of a page's entries, in one round trip; a row deleted since, or whose
        status no longer matches the filter, is left out."""
        if not page:
            return []
        commands = []
        for _at, cluster, entry in page:
            ident = timeline.identity(entry)
            lo, hi = b"[" + ident, b"(" + ident[:-1] + b"\x01"
            commands.append(("ZRANGEBYLEX", keys.rows(cluster), lo, hi, "LIMIT", 0, 1))
        got = redis_client.pipelined(self.r, commands)
        out.round_trips += 1
        members = []
        for (_at, cluster, _entry), reply in zip(page, got, strict=True):
            if not reply:
                continue
            member = reply[0]
            if codes and member.split(b"\x00", 4)[3] not in codes:
                continue
            members.append((cluster, member))
        return members

    def _visibility(self, access: AccessLike, filters: Filters, codes: bytes) -> Visibility:
        key = (id(access), filters, codes)
        hit = self._visible.get(key)
        if hit is not None and hit[0] is access:
            return hit[1]
        v = Visibility.of(access, filters, b"")
        if len(self._visible) >= 4096:
            self._visible.clear()
        self._visible[key] = (access, v)
        return v


@dataclass(frozen=True)
class _Bounds:
    """What a page keeps of a cluster's entries: after the cursor, placed no later than the
    walk's start, visible to the caller and matching the filters."""

    cursor: TimeCursor | None
    descending: bool
    start: int
    filters: Filters
    codes: bytes

    def keep(
        self, cluster: str, vis: Visibility, entries: Sequence[tuple[int, bytes]]
    ) -> Iterator[tuple[int, bytes]]:
        cur, desc, start, f = self.cursor, self.descending, self.start, self.filters
        codes = frozenset(self.codes[i : i + 1] for i in range(len(self.codes)))
        namespaces = frozenset(ns.encode() for ns in f.namespaces)
        name = f.name.encode()
        key = (cur.at, cur.cluster, cur.entry) if cur is not None else None
        for at, entry in entries:
            if at > start:
                continue
            if key is not None:
                k = (at, cluster, entry)
                if (k >= key) if desc else (k <= key):
                    continue
            ns, kind, nm, code = timeline.parse(entry)
            if codes and code not in codes:
                continue
            if namespaces and ns not in namespaces:
                continue
            if name and name not in nm:
                continue
            if vis.kinds is not None and kind not in vis.kinds:
                continue
            if kind in vis.namespaces.get(ns, vis.cluster_wide):
                yield at, entry


def _codes(filters: Filters) -> bytes:
    """The status codes a page keeps (b"": any)."""
    statuses = tuple(sorted(set(filters.statuses) & set(STATUSES)))
    codes = rows.codes_for(statuses, filters.suspended)
    return b"" if len(codes) == len(rows.CODE_STATUS) else codes.encode()


def _groups(
    windows: list[tuple[int, str]], descending: bool, cursor: TimeCursor | None, start: int
) -> list[list[str]]:
    """A cluster's window suffixes grouped by window, in walk order, without the windows that
    lie wholly before the cursor or after the walk's start."""
    groups: list[list[str]] = []
    last: int | None = None
    for window, suffix in windows:
        lo = timeline.position(window, 0)
        hi = lo if window == timeline.UNTIMED else lo + timeline.WINDOW_MS - 1
        if lo > start:
            continue
        if cursor is not None and ((lo > cursor.at) if descending else (hi < cursor.at)):
            continue
        if window == last:
            groups[-1].append(suffix)
        else:
            groups.append([suffix])
            last = window
    if descending:
        groups.reverse()
    return groups


def _key(s: _Stream, i: int, descending: bool) -> Any:
    at, entry = s.buffer[s.pos]
    k = (at, s.cluster, entry, i)
    return _Desc(k) if descending else k  # type: ignore[arg-type]


def _pairs(reply: Any) -> list[tuple[bytes, Any]]:
    """(member, score) pairs of a WITHSCORES reply, flat (RESP2) or paired (RESP3)."""
    if reply and isinstance(reply[0], list | tuple):
        return [(m, s) for m, s in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))
