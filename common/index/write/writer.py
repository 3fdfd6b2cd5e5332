"""The one writer of a cluster's rows: applies a delta (rows removed and added) to the rows and
everything derived from them (status indexes, counts, name index, the `dependents` of their edges
and every row's `blockedBy`: common.index.graph), the transitions they make (each object's
history and the rows' `recent` field: common.index.history), every row change (the cluster's
change feed: common.index.feed), the generation and the sync status, in one MULTI/EXEC under WATCH on the generation (and the writer's fence), with one retry
policy. The full sync (common.index.write.store) and the watcher (common.index.write.store_events) only say
what to read and how to turn it into a delta (a `Plan`).

Every effective write INCRs the generation, so a writer that read before it retries instead of
undoing it; readers see the state before a write or after it, never a mix. A write that changes
more than rows' text also INCRs the status generation (`status_moved`: what groups and counts
key their memos on, common.index.keys.status_generation).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis

from common import redis_client
from common.errors import LockBusy, RedisUnavailable
from common.index import feed, graph, history, keys, nscounts, rows, syncstatus, timeline
from common.index.buckets import Groups
from common.index.lease import Fence
from common.index.write import name_index
from common.redis_client import WATCH_RETRIES, text

log = logging.getLogger(__name__)

CHUNK = 1000  # members per ZADD/ZREM/HSET inside the transaction


@dataclass(frozen=True)
class Delta:
    """Rows to remove and to add (encoded members). `snapshot`, when set, is the whole new row
    set, its `blockedBy` computed (graph.with_blockers): derived structures are then rebuilt from
    it and compared with what is stored (a full sync repairs any drift), instead of adjusted.
    Otherwise the added rows' `blockedBy` is filled in by the writer (graph.settle)."""

    removed: Collection[str]
    added: Collection[str]
    snapshot: Collection[str] | None = None
    dependents: dict[str, str] | None = None
    """The snapshot's `dependents` hash when already computed (else computed from it)."""


class Plan(Protocol):
    """What one writer reads (after the WATCH, in the writer's one read round trip) and how the
    replies become a delta."""

    @property
    def names(self) -> Sequence[str] | None:
        """The object names the delta can touch; None: all (a snapshot: the whole name index
        and `dependents` are read and compared). A delta's name entries are read once it is
        known, those it moves only (`_new_names`)."""

    def queue_reads(self, cluster: str, reads: Any) -> None: ...

    def delta(self, replies: list[Any]) -> Delta: ...


def plan_source(plan: Plan) -> str:
    """Where a plan's changes were seen (a transition's `source`): `watch` or `sync` (default)."""
    return str(getattr(plan, "source", "sync"))


def plan_namespaces(plan: Plan) -> Sequence[str]:
    """The namespaces a plan says its delta can touch (read with the first round trip); a plan
    without `namespaces` gets them read after its delta, in one more round trip."""
    return getattr(plan, "namespaces", ())


@dataclass(frozen=True)
class Written:
    """What one write did."""

    removed: int = 0
    added: int = 0
    total: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    superseded: bool = False
    """True when newer writes landed since `since_generation`: rows left alone."""
    graph_reads: int = 0
    """Read round trips made to settle `blockedBy` (graph.settle)."""


SNAPSHOT, SNAPSHOT_GENERATION = "snapshot", "snapshot_generation"
_ROWS_FIELDS = frozenset({"objects", "kinds", SNAPSHOT, SNAPSHOT_GENERATION, "snapshot_at"})
"""Sync status fields that describe the rows written (dropped when they were not)."""

RESUME_POINT_MAX = 128
"""The longest resourceVersion kept as a resume point (etcd's are int64 revisions): a leaf's
longer one is not stored, and the kind's older point is dropped: it is listed on a take-over."""


def write(
    r: redis.Redis,
    cluster: str,
    plan: Plan,
    fence: Fence | None = None,
    status: dict[str, Any] | None = None,
    since_generation: int | None = None,
    retention: history.Retention = history.DEFAULT,
    resume: Mapping[str, str] | None = None,
) -> Written:
    """Apply `plan`'s delta and HSET `status` (sync status fields; `objects` and `kinds` are
    filled in from the counts), recording the transitions it makes (common.index.history,
    kept per `retention`). `since_generation`: leave rows alone (`superseded`) when the
    generation moved since then. `resume`: the watcher's resume points (kind key ->
    resourceVersion its rows are at), HSET in the same transaction as the rows. Raises
    LockBusy when the fence is no longer ours."""
    fields = syncstatus.encode(**(status or {}))
    try:
        for _ in range(WATCH_RETRIES):
            try:
                return _write(
                    r, cluster, plan, fence, fields, since_generation, retention, resume or {}
                )
            except redis.WatchError:
                continue  # another writer (or the fence) moved under us: read again
    except redis.ConnectionError as e:
        raise RedisUnavailable(f"Redis unavailable while writing cluster {cluster}") from e
    raise RedisUnavailable(f"cluster {cluster}: rows kept changing under the writer; retry")


def _write(
    r: redis.Redis,
    cluster: str,
    plan: Plan,
    fence: Fence | None,
    fields: dict[str, str],
    since_generation: int | None,
    retention: history.Retention,
    resume: Mapping[str, str],
) -> Written:
    tx: Any  # redis-py's pipeline typing is loose
    with r.pipeline(transaction=True) as tx:
        tx.watch(keys.generation(cluster), *([fence.owner] if fence else []))
        # Reads on a second connection after the WATCH, in one round trip: any write since
        # the WATCH aborts the EXEC below.
        reads: Any = r.pipeline(transaction=False)
        if fence is not None:
            reads.execute_command("MGET", fence.key, fence.owner)  # one slot; not mget(): see lease
        reads.get(keys.generation(cluster))
        # The counts and the history's kinds are read here for a snapshot; a delta reads them
        # after it is known, and only when it moves a count (`_Totals`): most watch events
        # rewrite rows in place (a message, a revision), which keeps every count.
        snapshot_plan = plan.names is None
        if snapshot_plan:
            reads.hkeys(keys.history_kinds(cluster))
            reads.hgetall(keys.counts(cluster))
        reads.hmget(keys.sync(cluster), [nscounts.READY, timeline.READY, *_TOTALS])
        # A delta's name entries are read once it is known, and only when it moves one
        # (`_new_names`): a row rewritten in place keeps its name and entry, and at fleet L a
        # name's entries can be tens of KB (a name in every namespace).
        ns_groups: Groups = []
        if snapshot_plan:
            reads.hgetall(keys.names(cluster))
            graph.DEPENDENTS.queue_hgetall(reads, cluster)
            reads.exists(keys.dependents_unbucketed(cluster))
            nscounts.queue_read_all(reads, cluster)
            reads.hkeys(keys.timeline(cluster))
        else:
            ns_groups = nscounts.queue_read(reads, cluster, plan_namespaces(plan))
        plan.queue_reads(cluster, reads)
        replies = reads.execute()
        if fence is not None and any(text(v) != fence.token for v in replies.pop(0)):
            raise LockBusy(f"cluster {cluster}: {fence.key} is no longer ours; nothing written")
        gen = int(replies.pop(0) or 0)
        stored = _Totals.of(replies.pop(0), replies.pop(0)) if snapshot_plan else None
        if since_generation is not None and gen != since_generation:
            tx.multi()
            tx.hset(keys.sync(cluster), mapping=_without_totals(fields))
            tx.execute()
            return Written(superseded=True)
        ns_flag, tt_flag, *stored_totals = replies.pop(0)
        ns_ready, tt_ready = ns_flag is not None, timeline.ready(tt_flag)
        tt_windows: set[str] = set()
        stored_deps: dict[str, str] = {}
        stored_ns: dict[str, str] = {}
        unbucketed = False
        if snapshot_plan:
            stored_names = {text(k): text(v) for k, v in replies.pop(0).items()}
            stored_deps = graph.DEPENDENTS.collect_all(replies[: graph.DEPENDENTS.reads_all])
            del replies[: graph.DEPENDENTS.reads_all]
            unbucketed = bool(replies.pop(0))
            stored_ns = nscounts.collect_all(replies[: nscounts.BUCKETS])
            del replies[: nscounts.BUCKETS]
            tt_windows = {text(w) for w in replies.pop(0)}
        else:
            stored_names = {}  # read by `_new_names`, when the delta moves an entry
            stored_ns = nscounts.collect(ns_groups, replies[: len(ns_groups)])
            del replies[: len(ns_groups)]
        rest = replies
        delta = plan.delta(rest)
        graph_reads = 0
        if delta.snapshot is not None:
            wanted = delta.dependents
            if wanted is None:
                wanted = graph.dependents(delta.snapshot)
            deps_set, deps_gone = graph.diff(stored_deps, wanted)
        elif delta.removed or delta.added:
            settled = graph.settle(r, cluster, delta.removed, delta.added)
            delta = Delta(settled.removed, settled.added)
            deps_set, deps_gone = settled.dependents_set, settled.dependents_gone
            graph_reads = settled.reads
        else:
            deps_set, deps_gone = {}, []
        if stored is None:
            stored = _Totals.after(r, cluster, delta, stored_totals)
        old_counts = stored.counts
        # Kinds with rows stored before this write were seen: their new rows were created.
        seen = stored.baseline | set(_kinds(old_counts))
        found = history.transitions(delta.removed, delta.added, plan_source(plan), seen)
        if delta.added and (delta.removed or found):  # rows keep (and move) their transitions
            added = history.with_recent(delta.removed, delta.added, found, retention.max_entries)
            delta = Delta(delta.removed, added, delta.snapshot, delta.dependents)
        names_set, names_gone = _new_names(r, cluster, stored_names, delta)
        ns_set, ns_gone = _new_ns_counts(r, cluster, ns_ready, stored_ns, ns_groups, delta)
        if stored.in_place:  # every count as it was: the stored totals stand
            counts_set, counts_gone = {}, []
            kinds, totals = stored.kinds, {}
        else:
            counts = _new_counts(old_counts, delta)
            counts_set = {k: v for k, v in counts.items() if old_counts.get(k) != v}
            counts_gone = [k for k in old_counts if k not in counts]
            kinds = _kinds(counts)
            totals = syncstatus.encode(objects=sum(kinds.values()), kinds=kinds)
        stored_history = _read_history(r, cluster, found)
        kinds_new = (
            set() if stored.in_place else history.new_kinds(stored.baseline, seen, delta.added)
        )
        tx.multi()
        derived = (counts_set, counts_gone, names_set, names_gone, deps_set, deps_gone)
        if delta.snapshot is not None and not ns_ready:
            totals[nscounts.READY] = nscounts.READY_VALUE  # complete from now on
        # The time index: built whole by the first full sync (or the first rows), then moved
        # with the rows; a full sync drops the windows no row is in any more.
        tt_build = not tt_ready and (delta.snapshot is not None or not stored.rows_before)
        tt_stale: set[str] = set()
        if delta.snapshot is not None:
            tt_stale = tt_windows - timeline.windows_of(delta.snapshot)
        if tt_build:
            totals[timeline.READY] = timeline.READY_VALUE
        changed = delta.removed or delta.added or any(derived) or ns_set or ns_gone
        moves = bool(changed or unbucketed or tt_build or tt_stale)
        if SNAPSHOT in fields:  # what the stored rows were built from, at this generation
            fields = {**fields, SNAPSHOT_GENERATION: str(gen + 1 if moves else gen)}
        if moves:
            _write_members(tx, cluster, delta.removed, delta.added, retention.flapping)
            tt_added = delta.snapshot if tt_build and delta.snapshot is not None else delta.added
            now_ms = int(time.time() * 1000)
            timeline.queue_write(
                tx, cluster, delta.removed, tt_added, now_ms, tt_build, legacy=not tt_ready
            )
            if tt_stale:
                tx.hdel(keys.timeline(cluster), *tt_stale)
                tx.delete(*(keys.timeline_window(cluster, w) for w in tt_stale))
            _write_hash(tx, keys.counts(cluster), counts_set, counts_gone)
            _write_hash(tx, keys.names(cluster), names_set, names_gone)
            graph.DEPENDENTS.queue_write(tx, cluster, deps_set, deps_gone)
            if unbucketed:
                tx.delete(keys.dependents_unbucketed(cluster))  # its former single hash
            nscounts.queue_write(tx, cluster, ns_set, ns_gone)
            history.queue_write(tx, cluster, found, stored_history, gen + 1, retention)
            entries = feed.changes(delta.removed, delta.added)
            feed.queue_write(tx, cluster, entries, gen + 1, retention.feed_max)
            if kinds_new:
                tx.hset(keys.history_kinds(cluster), mapping=dict.fromkeys(sorted(kinds_new), 1))
            tx.incr(keys.generation(cluster))
            counted = counts_set or counts_gone or ns_set or ns_gone or tt_build
            if counted or delta.snapshot is not None or status_moved(delta):
                tx.incr(keys.status_generation(cluster))
            if fields or totals:
                tx.hset(keys.sync(cluster), mapping={**fields, **totals})
        elif fields or delta.snapshot is not None:
            tx.hset(keys.sync(cluster), mapping={**fields, **totals})
        points = {k: v for k, v in resume.items() if len(v) <= RESUME_POINT_MAX}
        if points:
            tx.hset(keys.resume(cluster), mapping=points)
        if len(points) < len(resume):  # an older point would replay what this write stored
            tx.hdel(keys.resume(cluster), *(k for k in resume if k not in points))
        tx.execute()
    if moves:
        fleet_moved(r)
    return Written(
        len(delta.removed), len(delta.added), sum(kinds.values()), kinds, graph_reads=graph_reads
    )


def fleet_moved(r: Any) -> None:
    """On Redis Cluster, after a write that INCRed a cluster's generation: INCR the fleet's
    (keys.FLEET_GENERATION), which readers of many clusters' generations check first. After
    the transaction, not in it (another slot); a writer that dies in between leaves readers a
    generation list at most `keys.FLEET_GENERATION_MAX_AGE_S` old. Best effort: the write
    itself is done."""
    if not redis_client.is_cluster(r):
        return
    try:
        r.incr(keys.FLEET_GENERATION)
    except redis.RedisError:
        log.debug(
            "fleet generation not raised; readers re-read theirs within %s s",
            keys.FLEET_GENERATION_MAX_AGE_S,
        )


def status_moved(delta: Delta) -> bool:
    """Whether a delta changes what status readers depend on: rows appearing or leaving, or a
    row's `rows.status_part` (a watch event that changes only a message does not)."""
    if len(delta.removed) != len(delta.added):
        return True
    old = {rows.identity(m): rows.status_part(m) for m in delta.removed}
    return old != {rows.identity(m): rows.status_part(m) for m in delta.added}


_TOTALS = ("objects", "kinds")
"""Sync status fields read with a write's first round trip: an in-place write keeps them."""


@dataclass(frozen=True)
class _Totals:
    """What a write knows of the stored counts: the counts and the history's kinds
    (`baseline`), read; or, for a delta that rewrites rows in place (`in_place`: the same
    identities, each under the same count field, so no count, kind nor total moves), the
    stored totals' `kinds`, and nothing read."""

    baseline: set[str]
    counts: dict[str, int]
    in_place: bool = False
    kinds: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, baseline: Any, counts: Any) -> _Totals:
        """From the replies of HKEYS on the history's kinds and HGETALL on the counts."""
        return cls({text(k) for k in baseline}, {text(k): int(v) for k, v in counts.items()})

    @classmethod
    def after(cls, r: Any, cluster: str, delta: Delta, totals: Sequence[Any]) -> _Totals:
        """For a delta once known: in place when the stored totals (`_TOTALS`, as read) are
        there to stand; else the counts and kinds read now (one more round trip, under the
        WATCH, so still consistent)."""
        objects, kinds = totals
        if objects and kinds and _in_place(delta):
            return cls(set(), {}, True, json.loads(kinds))
        reads: Any = r.pipeline(transaction=False)
        reads.hkeys(keys.history_kinds(cluster))
        reads.hgetall(keys.counts(cluster))
        return cls.of(*reads.execute())

    @property
    def rows_before(self) -> bool:
        """The cluster had rows before this write."""
        return self.in_place or bool(self.counts)


def _in_place(delta: Delta) -> bool:
    """Whether a delta rewrites rows in place: the same identities removed as added, counted
    under the same fields (a status, kind or suspension that moved changes a count)."""
    if len(delta.removed) != len(delta.added):
        return False
    old = sorted((rows.identity(m), rows.count_field(m)) for m in delta.removed)
    return old == sorted((rows.identity(m), rows.count_field(m)) for m in delta.added)


def _read_history(r: Any, cluster: str, found: list[history.Transition]) -> dict[str, str]:
    """The stored histories of the objects that changed (one more round trip, only when some
    did; under the WATCH, so still consistent: only writers INCRing the generation write them)."""
    if not found:
        return {}
    reads: Any = r.pipeline(transaction=False)
    identities = history.queue_read(reads, cluster, found)
    return {i: text(v) for i, v in zip(identities, reads.execute(), strict=True) if v}


def _new_counts(old: dict[str, int], delta: Delta) -> dict[str, int]:
    if delta.snapshot is not None:
        return dict(Counter(rows.count_field(m) for m in delta.snapshot))
    counts = Counter(old)
    counts.subtract(rows.count_field(m) for m in delta.removed)
    counts.update(rows.count_field(m) for m in delta.added)
    return {k: n for k, n in counts.items() if n > 0}


def _new_ns_counts(
    r: Any,
    cluster: str,
    ready: bool,
    stored: dict[str, str],
    groups: Groups,
    delta: Delta,
) -> tuple[dict[str, str], list[str]]:
    """What to write to the per-namespace counts: rebuilt from a snapshot (repairing any
    drift), or moved by a delta once they are complete (`ready`); a delta touching namespaces
    its plan did not name reads them now (under the WATCH, so still consistent)."""
    if delta.snapshot is not None:
        wanted = {ns: nscounts.encode(c) for ns, c in nscounts.of_members(delta.snapshot).items()}
        return nscounts.diff(stored, wanted)
    if not ready or not (delta.removed or delta.added):
        return {}, []
    change = nscounts.net_change(delta.removed, delta.added)
    known = {ns for _key, names in groups for ns in names}
    missing = [ns for ns in change if ns not in known]
    if missing:
        pipe = r.pipeline(transaction=False)
        more = nscounts.queue_read(pipe, cluster, missing)
        stored = {**stored, **nscounts.collect(more, pipe.execute())}
    return nscounts.apply(stored, change), []


def _new_names(
    r: Any, cluster: str, stored: dict[str, str], delta: Delta
) -> tuple[dict[str, str], list[str]]:
    """What to write to the name index; `stored` is the whole index for a snapshot. A delta
    that moves an entry reads its names' entries now, and the name dictionary when a name
    appears or goes (a round trip each, under the WATCH, so still consistent)."""
    if delta.snapshot is not None:
        return name_index.diff(stored, name_index.build(delta.snapshot))
    if name_index.unchanged(delta.removed, delta.added):
        return {}, []
    touched = sorted({name_index.split(m)[0] for m in (*delta.removed, *delta.added)})
    got = r.hmget(keys.names(cluster), touched)
    stored = {n: text(v) for n, v in zip(touched, got, strict=True) if v is not None}

    def dictionary() -> str:
        got = r.hget(keys.names(cluster), name_index.DICT)
        return text(got) if got is not None else ""

    return name_index.update(stored, delta.removed, delta.added, dictionary)


def _kinds(counts: dict[str, int]) -> dict[str, int]:
    """Rows per kind (the sync status' `kinds`), from the counts."""
    kinds: Counter[str] = Counter()
    for count_field, n in counts.items():
        kinds[rows.count_field_kind(count_field)] += n
    return dict(sorted(kinds.items()))


def _without_totals(fields: dict[str, str]) -> dict[str, str]:
    """The status of a write whose rows were not applied: no totals, no snapshot digest."""
    return {k: v for k, v in fields.items() if k not in _ROWS_FIELDS}


def _write_members(
    tx: Any, cluster: str, removed: Iterable[str], added: Iterable[str], flapping: int
) -> None:
    gone, new = sorted(removed), sorted(added)
    for chunk in _chunks(gone):
        tx.zrem(keys.rows(cluster), *chunk)
    for chunk in _chunks(new):
        tx.zadd(keys.rows(cluster), dict.fromkeys(chunk, 0))
    now = time.time()
    gone_by, new_by = _by_index(cluster, gone), _by_index(cluster, new)
    # A removed member may have been flapping when written, whatever its count now: removed
    # from the index whenever it has recent transitions (a no-op when it is not there).
    gone_by[keys.flapping(cluster)] = [m for m in gone if rows.has_recent(m)]
    new_by[keys.flapping(cluster)] = [m for m in new if history.flapping_now(m, flapping, now)]
    for index in [
        *(keys.by_status(cluster, s) for s in keys.INDEXED_STATUSES),
        keys.suspended(cluster),
        keys.flapping(cluster),
    ]:
        for chunk in _chunks(gone_by.get(index, [])):
            tx.zrem(index, *chunk)
        for chunk in _chunks(new_by.get(index, [])):
            tx.zadd(index, dict.fromkeys(chunk, 0))


def _by_index(cluster: str, members: list[str]) -> dict[str, list[str]]:
    """Members by the index keys that hold them: the status index of every health but healthy,
    and the suspended index."""
    out: dict[str, list[str]] = {}
    for m in members:
        status = rows.status_of(m)
        if status != "healthy":
            out.setdefault(keys.by_status(cluster, status), []).append(m)
        if rows.suspended_of(m):
            out.setdefault(keys.suspended(cluster), []).append(m)
    return out


def _write_hash(tx: Any, key: str, changed: dict[str, Any], gone: list[str]) -> None:
    for chunk in _chunks(gone):
        tx.hdel(key, *chunk)
    items = list(changed.items())
    for i in range(0, len(items), CHUNK):
        tx.hset(key, mapping=dict(items[i : i + CHUNK]))


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), CHUNK):
        yield items[i : i + CHUNK]


def generation(r: Any, cluster: str) -> int:
    """The cluster's write generation (bumped by every write that changes rows)."""
    return int(r.get(keys.generation(cluster)) or 0)
