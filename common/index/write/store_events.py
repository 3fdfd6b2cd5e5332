"""The watcher's side of the row store: a batch of row changes (watch events) becomes one delta
for the one writer (common.index.write.writer), which applies it with everything derived from rows.

A row's old member is found by ZRANGEBYLEX on its sort-key prefix (namespace, kind, name), so the
watcher keeps no copy of what it stored. Every effective batch INCRs the cluster's generation:
a full sync (common.index.write.store) that read the rows before it retries its diff instead of undoing it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from common.index import graph, history, keys, rows, syncstatus
from common.index.lease import Fence
from common.index.write import store, writer
from common.redis_client import text

_TOP = b"\xff"  # sorts after every UTF-8 byte that follows a row's sort-key prefix


@dataclass(frozen=True)
class Change:
    """One row's new state: `member` is the encoded row, None when the object was deleted."""

    identity: str  # rows.sort_key(namespace, kind, name)
    member: str | None

    @classmethod
    def of(cls, member: str) -> Change:
        return cls(rows.identity(member), member)


@dataclass(frozen=True)
class EventStats:
    """What one batch did: rows added, removed and replaced, and the cluster's new total."""

    added: int = 0
    removed: int = 0
    updated: int = 0
    total: int = 0
    graph_reads: int = 0
    """Read round trips made to settle `blockedBy` (common.index.graph.settle)."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.updated)


class _Events:
    """The writer plan of a batch of changes: read each identity's stored member (ZRANGEBYLEX on
    its prefix), keep only the changes that alter something."""

    source = "watch"

    def __init__(self, latest: dict[str, str | None]) -> None:
        self.latest = latest
        self.names = sorted({rows.split_identity(i)[2] for i in latest})
        self.namespaces = sorted({rows.split_identity(i)[0] for i in latest})
        self.stats: Counter[str] = Counter()

    def queue_reads(self, cluster: str, reads: Any) -> None:
        for identity in self.latest:
            prefix = identity.encode()
            reads.zrangebylex(keys.rows(cluster), b"[" + prefix, b"[" + prefix + _TOP)

    def delta(self, replies: list[Any]) -> writer.Delta:
        removed: list[str] = []
        added: list[str] = []
        self.stats = Counter()
        for new, old_raw in zip(self.latest.values(), replies, strict=True):
            old = [text(m) for m in old_raw]
            # New members carry no blockedBy nor recent yet (the writer fills them in): compare
            # without them.
            if [rows.bare(m) for m in old] == ([rows.bare(new)] if new is not None else []):
                continue  # nothing visible changed (e.g. a resync event)
            removed.extend(old)
            if new is not None:
                added.append(new)
            if old and new is not None:
                self.stats["updated"] += 1
            else:
                self.stats["added" if new is not None else "removed"] += 1
        return writer.Delta(removed, added)


def apply_changes(
    r: redis.Redis,
    cluster: str,
    changes: Sequence[Change],
    fence: Fence | None = None,
    sync_fields: dict[str, Any] | None = None,
    retention: history.Retention = history.DEFAULT,
    resume: Mapping[str, str] | None = None,
) -> EventStats:
    """Apply `changes` in order (the last change of an identity wins); also HSET `sync_fields`
    (sync status) and `resume` (the kinds' resourceVersions the rows are at, `keys.resume`).
    Raises LockBusy when the fence (the watcher's lease) is no longer ours."""
    plan = _Events({c.identity: c.member for c in changes})
    done = writer.write(r, cluster, plan, fence, sync_fields, retention=retention, resume=resume)
    st = plan.stats
    return EventStats(st["added"], st["removed"], st["updated"], done.total, done.graph_reads)


class _Build:
    """The writer plan of a watched cluster's first build: the listed kinds' rows as a
    snapshot (the other kinds' rows as stored), `blockedBy` settled in memory once, as the full
    sync settles it (common.index.write.store)."""

    names = None  # the whole name index is compared with the snapshot's
    source = "watch"

    def __init__(self, kinds: Mapping[str, Mapping[str, str]]) -> None:
        self.kinds = kinds

    def queue_reads(self, cluster: str, reads: Any) -> None:
        reads.zrange(keys.rows(cluster), 0, -1)

    def delta(self, replies: list[Any]) -> writer.Delta:
        stored = [text(m) for m in replies[0]]
        kept = (rows.without_recent(m) for m in stored if rows.kind_of(m) not in self.kinds)
        listed = (m for members in self.kinds.values() for m in members.values())
        parsed = graph.Snapshot([*listed, *kept])
        return store.snapshot_delta(stored, parsed.members(), parsed.dependents())


def first_build(
    r: redis.Redis,
    cluster: str,
    kinds: Mapping[str, Mapping[str, str]],
    fence: Fence | None = None,
    retention: history.Retention = history.DEFAULT,
    resume: Mapping[str, str] | None = None,
) -> EventStats:
    """Write a watched cluster's first build in one write: each kind of `kinds` (kind key ->
    identity -> member) gets exactly those rows, other kinds' rows stay; every `blockedBy` is
    computed in memory from the whole cluster and the derived structures rebuilt from it, as a
    full sync writes (no `dependents` read back per batch: `graph_reads` is 0); `resume` as in
    `apply_changes`. Raises LockBusy when the fence is no longer ours."""
    plan = _Build(kinds)
    done = writer.write(r, cluster, plan, fence, None, retention=retention, resume=resume)
    return EventStats(done.added, done.removed, 0, done.total, done.graph_reads)


def kinds_changes(r: redis.Redis, cluster: str, kinds: Mapping[str, Iterable[str]]) -> list[Change]:
    """The changes that make each kind's stored rows equal its members (kind key -> members,
    after a list or relist), from one read of the cluster's rows however many kinds."""
    new = {rows.identity(m): m for members in kinds.values() for m in members}
    changes: list[Change] = []
    stored: list[str | bytes] = r.zrange(keys.rows(cluster), 0, -1)  # type: ignore[assignment]
    for raw in stored:
        m = text(raw)
        if rows.kind_of(m) not in kinds:
            continue
        identity = rows.identity(m)
        want = new.pop(identity, None)
        if want is None or rows.bare(want) != rows.bare(m):
            changes.append(Change(identity, want))
    changes.extend(Change(i, m) for i, m in new.items())
    return changes


def resume_points(r: redis.Redis, cluster: str) -> dict[str, str]:
    """The resourceVersion each watched kind's stored rows are at (kind key -> rv), as the
    last watcher holding the cluster wrote them with its rows (`keys.resume`)."""
    got: Any = r.hgetall(keys.resume(cluster))
    return {text(k): text(v) for k, v in got.items() if text(v)}


_HEARTBEAT = """
if redis.call('get', KEYS[1]) ~= ARGV[1] or redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('hset', KEYS[3], unpack(ARGV, 2))
return 1
"""


@dataclass(frozen=True)
class Beat:
    """One cluster's heartbeat (`heartbeats`): which of its halves are healthy."""

    cluster: str
    fence: Fence
    objects: bool
    rbac: bool


def heartbeats(r: redis.Redis, beats: Sequence[Beat], now: float | None = None) -> list[bool]:
    """The watches are healthy: keep `last_success` (objects) and `rbac_synced_at` (RBAC) of
    each cluster fresh, so it is not reported stale nor its rows hidden, and say so
    (`watched_at`, `rbac_watched_at`: the collector's scheduled syncs of a watched cluster then
    run every `FLEETSCOPE_SYNC_WATCHED_INTERVAL_S`, syncstatus.watched). One pipelined round trip
    for all (a script per cluster checks its fence and writes, atomically: both keys are the
    cluster's); False where the fence is no longer ours (nothing written there)."""
    now = round(time.time() if now is None else now, 3)
    pipe: Any = r.pipeline(transaction=False)
    sent: list[int] = []
    for i, b in enumerate(beats):
        fields: dict[str, Any] = {}
        if b.objects:
            fields.update(state="ok", last_success=now, last_error="", watched_at=now)
        if b.rbac:
            fields.update(rbac_synced_at=now, rbac_error="", rbac_watched_at=now)
        if not fields:
            continue
        flat = [x for kv in syncstatus.encode(**fields).items() for x in kv]
        fence = b.fence
        pipe.execute_command(
            "EVAL", _HEARTBEAT, 3, fence.key, fence.owner, keys.sync(b.cluster), fence.token, *flat
        )
        sent.append(i)
    ok = [True] * len(beats)
    if sent:
        for i, done in zip(sent, pipe.execute(), strict=True):
            ok[i] = bool(done)
    return ok
