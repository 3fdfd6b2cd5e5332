"""Incremental writes of the watcher: apply a batch of row changes (watch events) to a cluster's
rows, status indexes, name index, counts and sync status in one MULTI/EXEC, WATCH-fenced like
the full sync.

A row's old member is found by ZRANGEBYLEX on its sort-key prefix (namespace, kind, name), so the
watcher keeps no copy of what it stored. Every effective batch INCRs the cluster's generation:
a full sync (common.index.store) that read the rows before it retries its diff instead of undoing it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from common.errors import LockBusy, RedisUnavailable
from common.index import keys, name_index, rows, syncstatus
from common.index.store import Fence

WATCH_RETRIES = 10
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

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.updated)


def apply_changes(
    r: redis.Redis,
    cluster: str,
    changes: Sequence[Change],
    fence: Fence | None = None,
    sync_fields: dict[str, Any] | None = None,
) -> EventStats:
    """Apply `changes` in order (the last change of an identity wins); also HSET `sync_fields`
    (sync status). Raises LockBusy when the fence (the watcher's lease) is no longer ours."""
    latest = {c.identity: c.member for c in changes}
    extra = syncstatus.encode(**(sync_fields or {}))
    try:
        for _ in range(WATCH_RETRIES):
            try:
                return _apply(r, cluster, latest, fence, extra)
            except redis.WatchError:
                continue  # a full sync (or the fence) moved under us: read again
    except redis.ConnectionError as e:
        raise RedisUnavailable(f"Redis unavailable while applying events of {cluster}") from e
    raise RedisUnavailable(f"cluster {cluster}: rows kept changing under the watcher; retry")


def _apply(
    r: redis.Redis,
    cluster: str,
    latest: dict[str, str | None],
    fence: Fence | None,
    extra: dict[str, str],
) -> EventStats:
    pipe: Any  # redis-py's pipeline typing is loose
    with r.pipeline(transaction=True) as pipe:
        pipe.watch(keys.generation(cluster), *([fence.key] if fence else []))
        # Reads on a second connection after the WATCH: any write since then aborts the EXEC.
        reads: Any = r.pipeline(transaction=False)
        for identity in latest:
            prefix = identity.encode()
            reads.zrangebylex(keys.rows(cluster), b"[" + prefix, b"[" + prefix + _TOP)
        names = sorted({identity.split(rows.SEP, 3)[2] for identity in latest})
        names += [name_index.DICT] if names else []
        if names:
            reads.hmget(keys.names(cluster), names)
        reads.hgetall(keys.counts(cluster))
        if fence is not None:
            reads.get(fence.key)
        found = reads.execute()
        if fence is not None and _s(found.pop()) != fence.token:
            raise LockBusy(f"cluster {cluster}: watch lease lost; events not written")
        counts = Counter({_s(k): int(v) for k, v in found.pop().items()})
        values = found.pop() if names else []
        stored = {n: _s(v) for n, v in zip(names, values, strict=True) if v is not None}
        old_counts = dict(counts)
        removed, added, stats = _diff(latest, found, counts)
        pipe.multi()
        if removed or added:
            _write_members(pipe, cluster, removed, added)
            _write_names(pipe, cluster, name_index.update(stored, removed, added))
            _write_counts(pipe, cluster, old_counts, counts)
            pipe.incr(keys.generation(cluster))
        status = dict(extra)
        if removed or added or extra:
            status.update(_totals(counts))
            pipe.hset(keys.sync(cluster), mapping=status)
        pipe.execute()
    return EventStats(stats["added"], stats["removed"], stats["updated"], sum(counts.values()))


def _diff(
    latest: dict[str, str | None], found: list[list[Any]], counts: Counter[str]
) -> tuple[list[str], list[str], Counter[str]]:
    """Members to remove and add, with `counts` adjusted in place."""
    removed: list[str] = []
    added: list[str] = []
    stats: Counter[str] = Counter()
    for (_identity, new), old_raw in zip(latest.items(), found, strict=True):
        old = [_s(m) for m in old_raw]
        if old == ([new] if new is not None else []):
            continue  # nothing visible changed (e.g. a resync event)
        for m in old:
            removed.append(m)
            counts[_count_field(m)] -= 1
        if new is not None:
            added.append(new)
            counts[_count_field(new)] += 1
        if old and new is not None:
            stats["updated"] += 1
        else:
            stats["added" if new is not None else "removed"] += 1
    return removed, added, stats


def _write_members(pipe: Any, cluster: str, removed: list[str], added: list[str]) -> None:
    rows_key = keys.rows(cluster)
    if removed:
        pipe.zrem(rows_key, *removed)
    if added:
        pipe.zadd(rows_key, dict.fromkeys(added, 0))
    for members, op in ((removed, "zrem"), (added, "zadd")):
        by_status: dict[str, list[str]] = {}
        for m in members:
            st = rows.status_of(m)
            if st != "healthy":
                by_status.setdefault(st, []).append(m)
        for st, ms in by_status.items():
            index = keys.by_status(cluster, st)
            if op == "zrem":
                pipe.zrem(index, *ms)
            else:
                pipe.zadd(index, dict.fromkeys(ms, 0))


def _write_names(pipe: Any, cluster: str, change: tuple[dict[str, str], list[str]]) -> None:
    changed, gone = change
    if changed:
        pipe.hset(keys.names(cluster), mapping=changed)
    if gone:
        pipe.hdel(keys.names(cluster), *gone)


def _write_counts(pipe: Any, cluster: str, old: dict[str, int], new: Counter[str]) -> None:
    changed = {k: v for k, v in new.items() if v > 0 and old.get(k) != v}
    gone = [k for k, v in new.items() if v <= 0 and k in old]
    if changed:
        pipe.hset(keys.counts(cluster), mapping=changed)
    if gone:
        pipe.hdel(keys.counts(cluster), *gone)


def _totals(counts: Counter[str]) -> dict[str, str]:
    """`objects` and `kinds` of the sync status, from the counts (as the full sync writes them)."""
    kinds: Counter[str] = Counter()
    for field_name, n in counts.items():
        if n > 0:
            kinds[field_name.split("\x00", 1)[0]] += n
    return syncstatus.encode(objects=sum(kinds.values()), kinds=dict(sorted(kinds.items())))


def _count_field(member: str) -> str:
    _ns, kind, _rest = member.split(rows.SEP, 2)
    return keys.counts_field(kind, rows.status_of(member))


def kind_changes(
    r: redis.Redis, cluster: str, kind_key: str, members: Iterable[str]
) -> list[Change]:
    """The changes that make one kind's stored rows equal `members` (after a list or relist)."""
    new = {rows.identity(m): m for m in members}
    changes: list[Change] = []
    stored: list[str | bytes] = r.zrange(keys.rows(cluster), 0, -1)  # type: ignore[assignment]
    for raw in stored:
        m = _s(raw)
        if m.split(rows.SEP, 2)[1] != kind_key:
            continue
        identity = rows.identity(m)
        want = new.pop(identity, None)
        if want != m:
            changes.append(Change(identity, want))
    changes.extend(Change(i, m) for i, m in new.items())
    return changes


def heartbeat(
    r: redis.Redis,
    cluster: str,
    fence: Fence | None,
    objects: bool,
    rbac: bool,
    now: float | None = None,
) -> None:
    """The watch is healthy: keep `last_success` (objects) and `rbac_synced_at` (RBAC) fresh,
    so the cluster is not reported stale nor its rows hidden. Fenced like `apply_changes`."""
    now = round(time.time() if now is None else now, 3)
    fields: dict[str, Any] = {}
    if objects:
        fields.update(state="ok", last_success=now, last_error="")
    if rbac:
        fields.update(rbac_synced_at=now, rbac_error="")
    if not fields:
        return
    pipe: Any
    with r.pipeline(transaction=True) as pipe:
        if fence is not None:
            pipe.watch(fence.key)
            if _s(pipe.get(fence.key)) != fence.token:
                raise LockBusy(f"cluster {cluster}: watch lease lost; heartbeat not written")
        pipe.multi()
        pipe.hset(keys.sync(cluster), mapping=syncstatus.encode(**fields))
        try:
            pipe.execute()
        except redis.WatchError as e:
            raise LockBusy(f"cluster {cluster}: watch lease moved during a heartbeat") from e


def _s(v: str | bytes | None) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v
