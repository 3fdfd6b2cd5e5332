"""List pages over the stored rows, RBAC-filtered, in (cluster, namespace, kind, name).

`Reader.page` walks the caller's visible clusters in order from a keyset cursor, choosing per
cluster how to read (the ranges its access plan allows, common.index.read.plan, with server-side
Lua filtering; or a walk of the source zsets tested here, whichever reads less), several
clusters per pipelined round trip: a page costs O(page) Redis work at any depth, plus what
skipping invisible rows needs. Sparse pages are remembered with the generations they depend on.
Streams (`Reader.stream`, `Reader.more`) are the same scans one cluster at a time, for group
pages and facets counted from rows (common.index.read.groups, common.index.read.facets).
The client must not decode responses (members are compared as bytes).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from common import redis_client
from common.index import keys, rows
from common.index.read import facets as reader_facets
from common.index.read import lua as reader_lua
from common.index.read import tally
from common.index.read.facets import Facets
from common.index.read.memo import Memo
from common.index.read.plan import AccessLike, Filters, Range, after, clip_all, plan
from common.index.rows import Row, decode_page
from common.kinds.status import STATUSES
from common.labels import Selector
from common.redis_client import text

__all__ = ["AccessLike", "Chunk", "Cursor", "Facets", "Filters", "Page", "Reader", "Stream"]


_Call = tuple[str, str | tuple[str, ...], list[bytes]]  # script, key(s), ARGV
PLANS_MAX = 4096  # remembered scan plans, member tests and index sizes per process
NAME_DENSE = 256  # more rows matching a name filter in a cluster: scan instead of the index
NAME_FIRST_BATCH = 4  # clusters in a name-filtered page's first round trip
WALK_MIN_RANGES = 32  # fewer ranges: always scan them (no size estimate needed)
RANGE_COST = 3.0
"""What visiting one range costs, in members walked (measured: a range is an argument triple
built in Python plus one ZRANGEBYLEX inside the script, a walked member one transfer and one
membership test in Python); see `Reader._choose`."""
SIZES_TTL_S = 10.0  # how long a cluster's index sizes serve as estimates
PLAIN_RANGES_MAX = 4  # pruned ranges read without the script up to this many (`_plain`)
PAGES_MAX = 1024  # remembered sparse pages per process (`Reader._pages`): ~150 B x 51 rows each


@dataclass(frozen=True)
class Cursor:
    """The last row a page returned: its cluster and sort key (namespace, kind, name)."""

    cluster: str
    identity: bytes


@dataclass(frozen=True)
class PageRequest:
    """One list page: the filters, how many rows, and where the previous page ended."""

    filters: Filters
    limit: int
    cursor: Cursor | None = None


@dataclass
class Page:
    members: list[tuple[str, bytes]]
    """The page's rows as stored: (cluster, member)."""
    cursor: Cursor | None
    """Where the next page starts; None on the last page."""
    scanned: int = 0
    """Members Redis examined for this page (the cost the tests assert on)."""
    round_trips: int = 0
    version: keys.GrantsVersion | None = None
    """The grants version, read in the page's first round trip when asked (`confirm_version`)."""
    lead: list[Any] | None = None
    """The reply of the command sent first with the scans (`Reader.page`: generations)."""
    through: str | None = None
    """The cluster of the row after the page (the last one it depends on); None: the last page."""

    @property
    def rows(self) -> list[Row]:
        """The page's rows, decoded."""
        return decode_page(self.members)


@dataclass
class _Walk:
    """One cluster's scan state within a request. `visible` set: the cluster is read by walking
    its source zsets from `start` and testing each member against the caller's access here
    (`Visibility`), instead of visiting `ranges` in the script."""

    cluster: str
    ranges: list[Range]
    start: bytes = b""
    visible: Visibility | None = None
    step: int = 0
    scripted: bool = False
    """With `visible`: read through the name index script over the whole key space (a name
    filter), members then tested like a walk's."""
    expect_gen: int | None = None
    """Set when `ranges` were pruned to the namespaces the count tables say hold matches (as of
    this generation): the scan reads the generation after it, and a moved one means read again
    with every range."""


Stream = _Walk
"""One cluster's rows read a chunk at a time (`Reader.stream`, `Reader.more`)."""


@dataclass
class Chunk:
    """What `Reader.more` read of one stream: members in order, whether the stream ended, and
    how many members Redis examined."""

    members: list[bytes]
    done: bool
    scanned: int


@dataclass(frozen=True)
class Visibility:
    """A member test for walks: the kinds listable in each namespace (bytes, as members hold
    them; the cluster-wide ones included), those of every other namespace, and the kind and
    status-code filters."""

    cluster_wide: frozenset[bytes]
    namespaces: dict[bytes, frozenset[bytes]]
    """Per namespace with grants of its own: its kinds with the cluster-wide ones."""
    kinds: frozenset[bytes] | None
    codes: bytes
    everything: bool = False
    """Every member of the sources is visible (`EVERYTHING`): read exactly the page, test none."""

    @classmethod
    def of(cls, access: AccessLike, filters: Filters, codes: bytes) -> Visibility:
        enc = {k: k.encode() for k in {*access.cluster_wide, *filters.kinds}}
        for kinds in access.namespaces.values():
            enc.update((k, k.encode()) for k in kinds if k not in enc)
        cluster_wide = frozenset(enc[k] for k in access.cluster_wide)
        merged: dict[frozenset[str], frozenset[bytes]] = {}  # one set per distinct grant
        for ks in access.namespaces.values():
            if ks not in merged:
                merged[ks] = cluster_wide | frozenset(enc[k] for k in ks)
        return cls(
            cluster_wide,
            {ns.encode(): merged[ks] for ns, ks in access.namespaces.items()},
            frozenset(enc[k] for k in filters.kinds) if filters.kinds else None,
            codes,
        )

    def keep(self, members: list[bytes]) -> list[bytes]:
        """The visible ones of `members` (never asked of `EVERYTHING`: its walks test none)."""
        out = []
        cw, kinds, codes, of_ns = self.cluster_wide, self.kinds, self.codes, self.namespaces.get
        head, ns_kind = rows.member_head, rows.member_ns_kind
        for m in members:
            if codes:
                ns, kind, _name, code, _ = head(m)
                if code not in codes:
                    continue
            else:
                ns, kind, _ = ns_kind(m)
            if (kinds is None or kind in kinds) and kind in of_ns(ns, cw):
                out.append(m)
        return out


def _flapping(members: list[bytes], filters: Filters, now: float) -> list[bytes]:
    """The members with at least `filters.flapping` transitions in the 24 hours before `now`."""
    out = []
    for m in members:
        recent = rows.recent_of(m.decode())
        if not recent:
            continue
        if rows.transitions_24h(recent, now) >= filters.flapping:
            out.append(m)
    return out


def labelled(members: list[bytes], selector: Selector) -> list[bytes]:
    """The members whose labels match `selector` (members without labels tested once)."""
    bare = selector.matches({})
    labels_of, matches, unlabelled = rows.labels_of, selector.matches, rows.member_unlabelled
    needles = rows.label_needles(selector)
    out = []
    for m in members:
        if unlabelled(m):
            if bare:
                out.append(m)
        elif all(any(n in m for n in alts) for alts in needles) and matches(labels_of(m)):
            out.append(m)
    return out


_NOTHING = Range(b"", b"", None)  # a remembered pruned plan with no namespace left
EVERYTHING = Visibility(frozenset(), {}, None, b"", everything=True)


def _bounds(rng: Range) -> list[bytes]:
    lo = b"[" + rng.lo if rng.lo else b"-"
    hi = b"(" + rng.hi if rng.hi is not None else b"+"
    if rng.kinds is None:
        return [lo, hi, b""]
    return [lo, hi, reader_lua.kinds_arg(rng.kinds)]


class Reader:
    """RBAC-filtered pages and streams, and the entry to facets (one per process; thread-safe)."""

    def __init__(
        self,
        r: redis.Redis,
        all_kinds: Sequence[str],
        budget: int = 4096,
        window: int = 128,
        max_batch: int = 32,
        walk_min_ranges: int = WALK_MIN_RANGES,
        range_cost: float = RANGE_COST,
        pages_max: int = PAGES_MAX,
    ) -> None:
        self.r = r
        self.all_kinds = tuple(all_kinds)
        self.budget, self.window, self.max_batch = budget, window, max_batch
        self.walk_min_ranges, self.range_cost = walk_min_ranges, range_cost
        self.pages_max = pages_max  # 0: sparse pages are not remembered (`page`)
        self._sha: dict[str, str] = {}
        self._plans: Memo[tuple[int, Filters], list[Range]] = Memo(PLANS_MAX)
        self.tallies = tally.Tallies(r)
        self.extras = reader_facets.Extras(r, self.follow)
        """The facets' memos (common.index.read.facets)."""
        self._sizes: Memo[str, tuple[float, dict[str, int]]] = Memo(PLANS_MAX)
        self._visible: Memo[tuple[int, Filters, bytes], Visibility] = Memo(
            PLANS_MAX, "reader.visible"
        )
        self._source_plans: Memo[tuple[str, Filters], tuple[list[str], bytes]] = Memo(PLANS_MAX)
        self._pages: Memo[tuple[int, Filters, Cursor | None, int], Page] = Memo(
            pages_max, "reader.pages"
        )

    # -- scripts -------------------------------------------------------------------------------

    def _script(self, name: str) -> str:
        if name not in self._sha:
            self._sha[name] = str(self.r.script_load(getattr(reader_lua, name)))
        return self._sha[name]

    def run(
        self, calls: Sequence[_Call], get: str = "", gens: Sequence[str] = (), lead: Any = None
    ) -> list[Any]:
        """EVALSHA each (script, key, args) in one pipelined round trip, after a GET of `get`
        when given (its value comes first) and the packed command `lead` when given (its reply
        next), then one MGET of `gens` when given (its reply last); reload on NOSCRIPT."""
        for attempt in (0, 1):
            commands: list[Any] = [("GET", get)] if get else []
            if lead is not None:
                commands.append(lead)
            for script, key, args in calls:
                if script == "ZRANGE":  # a walk: members from `lo` on, up to a count
                    commands.append(("ZRANGEBYLEX", key, args[0], b"+", "LIMIT", 0, int(args[1])))
                    continue
                if script == "RANGE":  # one plain range (`_plain`): lo, hi, up to a count
                    commands.append(("ZRANGEBYLEX", key, args[0], args[1], "LIMIT", 0, args[2]))
                    continue
                ks = (key,) if isinstance(key, str) else key  # NAMED reads 2 keys
                commands.append(("EVALSHA", self._script(script), len(ks), *ks, *args))
            if gens:  # generations after the scans: see _Walk.expect_gen
                commands.append(("MGET", *gens))
            try:
                return redis_client.pipelined(self.r, commands)
            except redis.exceptions.NoScriptError:
                if attempt:
                    raise
                self._sha.clear()
        raise AssertionError("unreachable")

    def sources(self, cluster: str, filters: Filters) -> tuple[list[str], bytes]:
        """The zsets to scan and the status codes to keep ("" = all): the suspended index for
        `suspended=true` (small), the status indexes for statuses without `healthy`, else the
        rows themselves. Remembered per (cluster, filters); never mutated."""
        hit = self._source_plans.get((cluster, filters))
        if hit is None:
            hit = self._plan_sources(cluster, filters)
            self._source_plans.put((cluster, filters), hit)
        return hit

    @staticmethod
    def _plan_sources(cluster: str, filters: Filters) -> tuple[list[str], bytes]:
        statuses = tuple(sorted(set(filters.statuses) & set(STATUSES)))
        codes = rows.codes_for(statuses, filters.suspended)
        every = len(codes) == len(rows.CODE_STATUS)
        if filters.flapping:  # small; what stopped flapping since is dropped when read
            return [keys.flapping(cluster)], b"" if every else codes.encode()
        if filters.suspended is True:
            return [keys.suspended(cluster)], b"" if not statuses else codes.encode()
        if statuses and "healthy" not in statuses:
            only = b"" if filters.suspended is None else codes.encode()
            return [keys.by_status(cluster, s) for s in statuses], only
        return [keys.rows(cluster)], b"" if every else codes.encode()

    def candidates(
        self, access: Mapping[str, AccessLike], filters: Filters, cursor: Cursor | None
    ) -> list[str]:
        """The caller's clusters a scan may visit, in order (from the cursor's cluster on)."""
        wanted = set(filters.clusters)
        start = cursor.cluster if cursor is not None else ""
        return [c for c in sorted(access) if (not wanted or c in wanted) and c >= start]

    def _walk(
        self,
        cluster: str,
        access: AccessLike,
        filters: Filters,
        cursor: Cursor | None,
        choose: bool = False,
    ) -> _Walk | None:
        """One cluster's scan plan (None when the caller can see nothing there); `choose`:
        a page's, which may walk instead (`_choose`)."""
        w = _Walk(cluster, self._plan(access, filters))
        if cursor is not None and cluster == cursor.cluster:
            w.start = after(cursor.identity)
            w.ranges = clip_all(w.ranges, w.start)
        if not w.ranges:
            return None
        if choose and self._whole(w, filters):
            # The caller sees every row of the sources from here on (a cluster admin with no
            # kind filter): read exactly the page with one ZRANGEBYLEX, no script to run.
            w.visible = EVERYTHING
        elif choose and len(w.ranges) >= self.walk_min_ranges and not filters.namespaces:
            self._choose(w, access, filters)
        return w

    def _whole(self, w: _Walk, filters: Filters) -> bool:
        """Whether `w`'s one range is the rest of the key space with no kind or status code
        to test (a status filter without `healthy` reads the status indexes: codes "")."""
        if len(w.ranges) != 1 or filters.name:
            return False
        rng = w.ranges[0]
        return rng.hi is None and rng.kinds is None and not self.sources(w.cluster, filters)[1]

    def _choose(self, w: _Walk, access: AccessLike, filters: Filters) -> None:
        """Walk the cluster's source zsets instead of visiting the caller's ranges when that
        reads less: the sources hold ~`size` members and the ranges cost `RANGE_COST` members
        each; both are walked until the page fills, at the same rate (the caller's share of the
        source), so the cheaper in total is the cheaper for any page. Sizes are estimates (the
        counts hash, re-read every `SIZES_TTL_S`): a wrong guess costs time, never rows."""
        if filters.name:
            # The name index already narrows to the few matching rows: read them over the
            # whole key space and test them, rather than one window of ranges per round trip.
            w.visible = self._visibility(access, filters, b"")
            w.ranges, w.scripted = [Range(w.start, None, None)], True
            return
        size = self._source_size(w.cluster, filters)
        if size < len(w.ranges) * self.range_cost:
            w.visible = self._visibility(access, filters, self.sources(w.cluster, filters)[1])

    def visibility(self, access: AccessLike, filters: Filters, codes: bytes) -> Visibility:
        """The member test of `access` under `filters` keeping status `codes` (b"": any),
        remembered as plans are."""
        return self._visibility(access, filters, codes)

    def codes(
        self,
        asked: Sequence[tuple[str, Sequence[bytes]]],
        lead: Any = None,
        since: Sequence[tuple[str, int, Sequence[bytes], Sequence[bytes]]] = (),
    ) -> list[Any]:
        """Per (cluster, identities), the status code of each identity's row there (b"": the
        cluster has none), in one pipelined round trip (common.index.read.lua.STATUS_REVISIONS);
        the packed command `lead`'s reply first when given; then per (cluster, generation,
        identities whose codes are held at it, identities not held) of `since`, a
        common.index.read.lua.CODES_SINCE reply."""
        calls: list[_Call] = [("STATUS_REVISIONS", keys.rows(c), list(ids)) for c, ids in asked]
        calls += [
            (
                "CODES_SINCE",
                (keys.feed(c), keys.generation(c), keys.rows(c)),
                [str(pos).encode(), str(len(held)).encode(), *held, *rest],
            )
            for c, pos, held, rest in since
        ]
        return self.run(calls, lead=lead) if calls else []

    def idents(
        self, starts: Sequence[tuple[str, bytes]], count: int, lead: Any = None
    ) -> list[Any]:
        """Per (cluster, ZRANGEBYLEX bound), up to `count` rows' identities and status codes
        from there and the bound to go on from (b"" at the end), in one pipelined round trip
        (common.index.read.lua.IDENTS); the packed command `lead`'s reply first when given."""
        n = str(count).encode()
        calls: list[_Call] = [("IDENTS", keys.rows(c), [start, n]) for c, start in starts]
        return self.run(calls, lead=lead) if calls or lead is not None else []

    def follow(
        self, held: Sequence[tuple[str, int]], every: bool = False, labelled: bool = False
    ) -> list[list[Any]]:
        """Per (cluster, generation its rows are held at), what its change feed says moved
        since, in one pipelined round trip: [generation, whole, lines]
        (common.index.read.lua.FOLLOW; `every`: a line for every entry, not only those moving
        an identity or a status code; `labelled`: also those moving labels, each line with the
        old and the new labels field)."""
        flag = b"2" if labelled else b"1" if every else b"0"
        calls: list[_Call] = [
            ("FOLLOW", (keys.feed(c), keys.generation(c)), [str(g).encode(), flag]) for c, g in held
        ]
        return self.run(calls) if calls else []

    def _visibility(self, access: AccessLike, filters: Filters, codes: bytes) -> Visibility:
        """`Visibility.of`, remembered per (access object, filters) as plans are."""
        key = (id(access), filters, codes)
        v = self._visible.get(key, owner=access)
        if v is None:
            v = Visibility.of(access, filters, codes)
            self._visible.put(key, v, owner=access)
        return v

    def _source_size(self, cluster: str, filters: Filters) -> int:
        hit = self._sizes.get(cluster)
        now = time.monotonic()
        if hit is None or now - hit[0] > SIZES_TTL_S:
            counts = {text(k): int(v) for k, v in self.r.hgetall(keys.counts(cluster)).items()}
            hit = (now, counts)
            self._sizes.put(cluster, hit)
        if filters.flapping:
            return 0  # the flapping index is small: walk it
        statuses = tuple(sorted(set(filters.statuses) & set(STATUSES)))
        total = 0
        for f, n in hit[1].items():
            _kind, status, suspended = rows.parse_count_field(f)
            if filters.suspended is True:
                total += n if suspended else 0
            elif statuses and "healthy" not in statuses:
                total += n if status in statuses else 0
            else:
                total += n
        return total

    def _plan(self, access: AccessLike, filters: Filters) -> list[Range]:
        """`plan`, remembered per (access object, filters): the resolver shares one immutable
        Access per (cluster, grants hash, subjects), so a caller's next pages reuse the ranges
        (planning a team member's namespaces is a visible share of their request). Never mutated."""
        key = (id(access), filters)
        ranges = self._plans.get(key, owner=access)
        if ranges is None:
            ranges = plan(access, filters, self.all_kinds)
            self._plans.put(key, ranges, owner=access)
        return ranges

    def script_calls(
        self,
        cluster: str,
        sources: Sequence[str],
        limit: int,
        codes: bytes,
        name: str,
        ranges: list[Range],
        count: bool = False,
    ) -> list[_Call]:
        """One script call per source zset over `ranges`, keeping the kinds they allow and the
        status `codes` (b"": any): SCAN (members, up to `limit`) or COUNT (counts by field);
        with a name substring, through the name index first (NAMED, NAMED_COUNT:
        common.index.write.name_index), unless more than NAME_DENSE rows match there."""
        args = [str(limit).encode(), str(self.budget).encode(), codes, name.encode()]
        for rng in ranges:
            args.extend(_bounds(rng))
        if not name:
            script = "COUNT" if count else "SCAN"
            return [(script, key, args) for key in sources]
        named = [str(NAME_DENSE).encode(), *args]
        script = "NAMED_COUNT" if count else "NAMED"
        return [(script, (key, keys.names(cluster)), named) for key in sources]

    # -- pages ---------------------------------------------------------------------------------

    def page(
        self, access: Mapping[str, AccessLike], request: PageRequest, confirm_version: bool = False
    ) -> Page:
        """Up to `request.limit` visible rows after its cursor; full unless it is the last page.
        `confirm_version`: the grants version is read before the scans, in the same round trip
        (`Page.version`), so cached grants can be confirmed at no extra cost.

        A sparse page (a status, kind or suspension filter, or a name) gathers its rows from
        dozens of clusters; it is remembered per (caller's access, filters, cursor, limit) with
        the generations of the clusters it depends on (from the cursor's to the one holding the
        row after it: a later cluster cannot change it), taken before its scans: while none of
        them was written, the same request is answered from it after one round trip (`MGET` of
        those generations), like the facets. A write to any of them reads the page again."""
        filters, limit, cursor = request.filters, request.limit, request.cursor
        if not self.pages_max or not self._memoable(filters):
            return self._page(access, request, confirm_version)
        clusters = self.candidates(access, filters, cursor)
        key = (id(access), filters, cursor, limit)
        held = self._pages.peek(key, access)
        if held is not None and clusters:
            depends = clusters[: len(held[0])]  # the generations it was read at
            gens, version = tally.generations(self.r, depends, confirm_version)
            hit = self._pages.get(key, gens, access)
            if hit is not None:
                return dataclasses.replace(hit, version=version, scanned=0, round_trips=1)
            # read again, with every candidate's generation
        lead = tally.generations_command(clusters) if clusters else None
        out = self._page(access, request, confirm_version, lead)
        read_at, out.lead = out.lead, None
        if read_at is not None:  # read before the scans: a write after them moves one
            upto = len(clusters) if out.through is None else clusters.index(out.through) + 1
            self._pages.put(key, out, read_at[:upto], access)
        return out

    @staticmethod
    def _memoable(filters: Filters) -> bool:
        if filters.flapping:  # slides with time: a page is not a function of the generations
            return False
        statuses = frozenset(filters.statuses)
        sparse = (
            filters.kinds or filters.suspended is True or (statuses and "healthy" not in statuses)
        )
        return bool(sparse or filters.name or filters.labels)

    def _page(
        self,
        access: Mapping[str, AccessLike],
        request: PageRequest,
        confirm_version: bool = False,
        lead: Any = None,
    ) -> Page:
        filters, limit, cursor = request.filters, request.limit, request.cursor
        held = tally.held_version(self.r) if confirm_version else None
        check_key = keys.VERSION if confirm_version and held is None else ""
        need = limit + 1  # one more than asked: tells whether a next page exists
        now = time.time()
        # Plans are made lazily, as the scan reaches each cluster: a first page usually needs
        # one or two of hundreds of clusters, and planning them all cost more than the scan.
        candidates = self.candidates(access, filters, cursor)
        pending = iter(candidates)
        walks: list[_Walk] = []
        got: list[tuple[str, bytes]] = []
        result = Page([], None)
        first: list[Any] = []
        entries = self._entries(candidates, access, filters)
        i, batch = 0, self._first_batch(candidates, entries, filters, need)
        while len(got) < need:
            self._plan_more(walks, i + batch, pending, access, filters, cursor, entries)
            if i >= len(walks):
                break
            group = walks[i : i + batch]
            calls, spans = self._page_calls(group, filters, need - len(got))
            checked = [w for w in group if w.expect_gen is not None]
            gen_keys = [keys.status_generation(w.cluster) for w in checked]  # the tables' own
            lead_now = None if result.round_trips else lead
            replies = self.run(calls, "" if result.round_trips else check_key, gen_keys, lead_now)
            if check_key and not result.round_trips:
                first, replies = replies[:1], replies[1:]
            if lead_now is not None:
                result.lead = replies.pop(0)
            moved = set()
            if gen_keys:
                stored = replies.pop()
                moved = {
                    id(w)
                    for w, g in zip(checked, stored, strict=True)
                    if int(g or 0) != w.expect_gen
                }
            result.round_trips += 1
            pos = 0
            for (script, _key, args), k in zip(calls, range(len(replies)), strict=True):
                if script == "ZRANGE":
                    replies[k] = self._walked(replies[k], int(args[1]))
                elif script == "RANGE":
                    replies[k] = self._walked(replies[k], int(args[2]))
            for w, (nkeys, window_end) in zip(group, spans, strict=True):
                if w.expect_gen is not None:
                    if id(w) in moved:
                        # written since the counts the ranges were pruned by: this cluster
                        # again, with every range (the rows before w.start were exact)
                        self.tallies.forget(w.cluster, access[w.cluster])
                        w.ranges = self._plan(access[w.cluster], filters)
                        w.ranges = clip_all(w.ranges, w.start) if w.start else w.ranges
                        w.expect_gen = None
                        break
                    if not w.ranges:  # nothing to read there, and nothing was written since
                        i += 1
                        continue
                if w.visible is not None and not w.visible.everything:
                    for k in range(pos, pos + nkeys):
                        replies[k] = [*replies[k][:3], *w.visible.keep(replies[k][3:])]
                if filters.flapping:  # still flapping now (the scan's bound stays as read)
                    for k in range(pos, pos + nkeys):
                        replies[k] = [*replies[k][:3], *_flapping(replies[k][3:], filters, now)]
                if filters.labels:  # the scan's bound stays as read
                    for k in range(pos, pos + nkeys):
                        replies[k] = [*replies[k][:3], *labelled(replies[k][3:], filters.labels)]
                members, bound, scanned = self._merge(replies[pos : pos + nkeys], window_end)
                pos += nkeys
                result.scanned += scanned
                got.extend((w.cluster, m) for m in members[: need - len(got)])
                if len(got) >= need:
                    break
                if bound is None:
                    i += 1
                    continue
                w.start, w.ranges = bound, clip_all(w.ranges, bound)
                break
            batch = min(batch * 2, self.max_batch)
        if check_key and not result.round_trips:
            first = [self.r.get(check_key)]  # nothing to scan: read it alone
        if check_key:
            result.version = keys.GrantsVersion(first[0])
        elif held is not None:  # read with the request's generations (tally.read_once)
            result.version = held[0]
        result.members = got[:limit]
        if len(got) > limit:
            c, m = got[limit - 1]
            result.cursor = Cursor(c, rows.identity_bytes(m))
            result.through = got[limit][0]
        return result

    def _entries(
        self, candidates: Sequence[str], access: Mapping[str, AccessLike], filters: Filters
    ) -> dict[str, tally.Entry | None]:
        """The count-table entries of the clusters a sparse page will likely read (the next
        `2 x max_batch`): remembered ones whatever their age, missing ones in one round trip.
        None for pages that are not sparse (their first cluster fills them)."""
        statuses = frozenset(filters.statuses)
        sparse = (
            filters.kinds or filters.suspended is True or (statuses and "healthy" not in statuses)
        )
        if not sparse or filters.name or filters.namespaces or len(candidates) <= 1:
            return {}
        ahead = candidates[: 2 * self.max_batch]
        return self.tallies.entries([(c, access[c]) for c in ahead])

    def _first_batch(
        self,
        candidates: Sequence[str],
        entries: Mapping[str, tally.Entry | None],
        filters: Filters,
        need: int,
    ) -> int:
        """How many clusters the first round trip reads. A name filter matches ~0.3% of rows:
        a few clusters at once. A sparse filter (a status, suspension or kind): as many as the
        count tables estimate hold the page, so a team member's failing rows spread over
        dozens of clusters come in one round trip, not one per doubling."""
        if filters.name:
            return NAME_FIRST_BATCH
        if not entries:
            return 1
        kinds, statuses, total = frozenset(filters.kinds), frozenset(filters.statuses), 0
        ahead = candidates[: self.max_batch]
        for k, c in enumerate(ahead):
            entry = entries.get(c)
            if entry is None:
                return max(k, 1)
            n = entry.plans.get(("matching", filters))
            if n is None:
                n = tally.matching(entry.table, kinds, statuses, filters.suspended)
                entry.plans[("matching", filters)] = n
            total += n
            if total >= need:
                return k + 1
        return len(ahead)

    def _plan_more(
        self,
        walks: list[_Walk],
        upto: int,
        pending: Iterator[str],
        access: Mapping[str, AccessLike],
        filters: Filters,
        cursor: Cursor | None,
        entries: Mapping[str, tally.Entry | None],
    ) -> None:
        """Plan clusters from `pending` until `walks` holds `upto` (or none are left)."""
        while len(walks) < upto:
            c = next(pending, None)
            if c is None:
                return
            w = self._walk(c, access[c], filters, cursor, choose=True)
            entry = entries.get(c)
            if w is not None and w.visible is None and entry and not access[c].cluster_wide:
                self._prune(w, access[c], filters, cursor, entry)  # (walks read few already)
            if w is not None:
                walks.append(w)

    def _prune(
        self,
        w: _Walk,
        access: AccessLike,
        filters: Filters,
        cursor: Cursor | None,
        entry: tally.Entry,
    ) -> None:
        """Visit only the namespaces whose counts hold rows passing a sparse filter (a team
        member's failing rows are in ~1 of their 20 namespaces), checking with the scan that
        the counts still hold (`_Walk.expect_gen`)."""
        ranges = entry.plans.get(filters)
        if ranges is None:
            live = tally.live_namespaces(
                entry,
                access.namespaces,
                frozenset(filters.kinds),
                frozenset(filters.statuses),
                filters.suspended,
            )
            if len(live) == len(access.namespaces):
                entry.plans[filters] = ranges = []
            else:
                ranges = plan(tally.View(frozenset(), live), filters, self.all_kinds)
                entry.plans[filters] = ranges = ranges or [_NOTHING]
        if not ranges:
            return  # nothing to prune
        if ranges == [_NOTHING]:
            ranges = []
        if cursor is not None and w.cluster == cursor.cluster:
            ranges = clip_all(ranges, w.start)
        w.ranges, w.expect_gen = ranges, entry.gen

    def _page_calls(
        self, group: list[_Walk], filters: Filters, want: int
    ) -> tuple[list[_Call], list[tuple[int, bytes | None]]]:
        calls: list[_Call] = []
        spans: list[tuple[int, bytes | None]] = []
        for w in group:
            if w.expect_gen is not None and not w.ranges:
                spans.append((0, None))
                continue
            ask = want
            if filters.labels:
                # Rows are tested against the selector here, after the scan: ask for more
                # each round trip (a selective selector keeps few of them), up to the budget.
                ask = min(self.budget, max(2 * want, 64) << (2 * w.step))
                w.step += 1 if w.visible is None or w.scripted else 0
            if w.visible is not None and not w.scripted:
                sources = self.sources(w.cluster, filters)[0]
                if w.visible.everything or filters.labels:
                    n = ask
                else:
                    n = min(self.budget, max(2 * want, 64) << (2 * w.step))
                lo = b"[" + w.start if w.start else b"-"
                calls.extend(("ZRANGE", key, [lo, str(n).encode()]) for key in sources)
                spans.append((len(sources), None))
                w.step += 1
                continue
            window = w.ranges[: self.window]
            window_end = window[-1].hi if len(w.ranges) > self.window else None
            sources, codes = self.sources(w.cluster, filters)
            if w.expect_gen is not None and self._plain(window, codes, filters):
                lim = str(ask).encode()
                for key in sources:
                    calls.extend(("RANGE", key, [*_bounds(rng)[:2], lim]) for rng in window)
                spans.append((len(sources) * len(window), window_end))
                continue
            calls += self.script_calls(w.cluster, sources, ask, codes, filters.name, window)
            spans.append((len(sources), window_end))
        return calls, spans

    @staticmethod
    def _plain(window: list[Range], codes: bytes, filters: Filters) -> bool:
        """Whether a pruned window is read with one plain `ZRANGEBYLEX` per range instead of
        the script: every member of its ranges is the caller's (no kind, status code or name
        to test) and they are few (pruned to the namespaces the counts say hold matches), so
        reading up to the page from each costs less than running Lua once per cluster."""
        if codes or filters.name or filters.labels or len(window) > PLAIN_RANGES_MAX:
            return False
        return all(rng.kinds is None for rng in window)

    @staticmethod
    def _walked(members: list[bytes], asked: int) -> list[Any]:
        """A walk's reply in the scripts' shape: `full` when it may have stopped early."""
        state = b"full" if len(members) >= asked else b"done"
        return [state, len(members), members[-1] if members else b"", *members]

    @staticmethod
    def _merge(
        replies: list[list[bytes]], window_end: bytes | None
    ) -> tuple[list[bytes], bytes | None, int]:
        """Members of one cluster's sources in order, up to the first position any stopped at."""
        stops = [after(rows.identity_bytes(rep[2])) for rep in replies if rep[0] != b"done"]
        scanned = sum(int(rep[1]) for rep in replies)
        bound = min(stops) if stops else window_end
        members = [m for reply in replies for m in reply[3:]]
        if bound is not None:
            # A member sorts at or after its identity (a prefix of it): when the member is below
            # the bound, so is its identity, and most are, so the slicing is rarely needed.
            members = [m for m in members if m < bound or rows.identity_bytes(m) < bound]
        if len(replies) > 1:
            members.sort(key=rows.identity_bytes)
        return members, bound, scanned

    # -- streams (common.index.read.groups, common.index.read.facets) ------------------------

    def stream(
        self,
        cluster: str,
        access: AccessLike,
        filters: Filters,
        after_key: bytes = b"",
        ranged: bool = False,
    ) -> Stream | None:
        """One cluster's visible rows under `filters`, in identity order after `after_key` (an
        identity; b"": from the start), read a chunk at a time by `more`; None: nothing there.
        `ranged`: always the plan's ranges, as counting scripts visit them (never a walk)."""
        cursor = Cursor(cluster, after_key) if after_key else None
        return self._walk(cluster, access, filters, cursor, choose=not ranged)

    def more(self, streams: Sequence[Stream], filters: Filters, want: int) -> list[Chunk]:
        """The next rows of each stream, all in one pipelined round trip: the visible members
        read (`want` or more when there are), in order, and whether the stream has ended. A
        stream that stopped early (its scan budget) returns fewer, maybe none: ask again."""
        calls: list[_Call] = []
        spans: list[tuple[int, bytes | None]] = []
        live = [w for w in streams if w.ranges]
        for w in live:
            more_calls, span = self._page_calls([w], filters, want)
            calls += more_calls
            spans += span
        replies = self.run(calls) if calls else []
        for (script, _key, args), k in zip(calls, range(len(replies)), strict=True):
            if script == "ZRANGE":
                replies[k] = self._walked(replies[k], int(args[1]))
            elif script == "RANGE":
                replies[k] = self._walked(replies[k], int(args[2]))
        got: dict[int, Chunk] = {}
        pos = 0
        now = time.time()
        for w, (nkeys, window_end) in zip(live, spans, strict=True):
            if w.visible is not None and not w.visible.everything:
                for k in range(pos, pos + nkeys):
                    replies[k] = [*replies[k][:3], *w.visible.keep(replies[k][3:])]
            if filters.flapping:  # still flapping now (the scan's bound stays as read)
                for k in range(pos, pos + nkeys):
                    replies[k] = [*replies[k][:3], *_flapping(replies[k][3:], filters, now)]
            if filters.labels:
                for k in range(pos, pos + nkeys):
                    replies[k] = [*replies[k][:3], *labelled(replies[k][3:], filters.labels)]
            members, bound, scanned = self._merge(replies[pos : pos + nkeys], window_end)
            pos += nkeys
            if bound is not None:
                w.start, w.ranges = bound, clip_all(w.ranges, bound)
            else:
                w.ranges = []
            got[id(w)] = Chunk(members, not w.ranges, scanned)
        return [got.get(id(w), Chunk([], True, 0)) for w in streams]

    # -- flapping rows -------------------------------------------------------------------------

    def flapping_members(
        self, access: Mapping[str, AccessLike], filters: Filters, confirm_version: bool = False
    ) -> tuple[list[tuple[str, bytes]], keys.GrantsVersion | None, int]:
        """Every row the caller may list that passes `filters` and is flapping now, as
        (cluster, member), with the grants version (when `confirm_version`) and the members
        read: each candidate cluster's flapping index (small) in one round trip."""
        clusters = self.candidates(access, filters, None)
        now = time.time()
        commands: list[Any] = [("GET", keys.VERSION)] if confirm_version else []
        commands += [("ZRANGE", keys.flapping(c), 0, -1) for c in clusters]
        replies = redis_client.pipelined(self.r, commands) if commands else []
        version = keys.GrantsVersion(replies.pop(0)) if confirm_version else None
        out: list[tuple[str, bytes]] = []
        scanned = 0
        for c, members in zip(clusters, replies, strict=True):
            codes = self.sources(c, filters)[1]
            found = _flapping(
                self._visibility(access[c], filters, codes).keep(members), filters, now
            )
            if filters.labels:
                found = labelled(found, filters.labels)
            scanned += len(members)
            for m in found:
                ns, _kind, name, _code, _ = rows.member_head(m)
                if filters.namespaces and ns.decode() not in filters.namespaces:
                    continue
                if filters.name and filters.name.encode() not in name.lower():
                    continue
                out.append((c, m))
        return out, version, scanned

    # -- facets (common.index.read.facets) -----------------------------------------------------

    def facets(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        confirm_version: bool = False,
        label_keys: tuple[str, ...] = (),
    ) -> Facets:
        """The caller's facets under `filters` (`common.index.read.facets.count`)."""
        return reader_facets.count(self, access, filters, confirm_version, label_keys)
