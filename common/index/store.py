"""The per-cluster row store: replace a cluster's rows with a new snapshot, atomically.

`replace_rows` diffs the new members against the stored ones (one ZRANGE) and applies only the
difference (rows, status indexes, name index, counts, generation, sync status) in one MULTI/EXEC
guarded by WATCH on the cluster's generation key (and its lock, when given): readers see the old
snapshot or the new one, never a mix, and a re-sync with nothing changed writes no rows at all.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from common.errors import LockBusy, RedisUnavailable
from common.index import keys, name_index, rows, syncstatus

CHUNK = 1000  # members per ZADD/ZREM inside the transaction
WATCH_RETRIES = 5
SYNC_ERROR_MAX = 300


@dataclass(frozen=True)
class WriteStats:
    """What one `replace_rows` did: rows added and removed, and the snapshot's totals."""

    added: int
    removed: int
    total: int
    kinds: dict[str, int] = field(default_factory=dict)
    superseded: bool = False
    """True when newer writes (watch events) landed while the snapshot was listed: not applied."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


@dataclass(frozen=True)
class Fence:
    """Only write while this lock token is still the cluster's lock."""

    key: str
    token: str


def replace_rows(
    r: redis.Redis,
    cluster: str,
    members: Iterable[str],
    sync_fields: dict[str, Any] | None = None,
    fence: Fence | None = None,
    since_generation: int | None = None,
) -> WriteStats:
    """Make `members` (encoded rows) the cluster's snapshot; also HSET `sync_fields` (sync status,
    `objects` and `kinds` filled in) in the same transaction.

    `since_generation` is the cluster's generation read before the snapshot was listed: if
    other writers (the watcher) changed rows meanwhile, the snapshot may be older than their
    events, so rows are left alone (`superseded`) and only `sync_fields` are written."""
    new = set(members)
    new_counts = _counts(new)
    new_names = name_index.build(new)
    kinds: Counter[str] = Counter()
    for field_name, n in new_counts.items():
        kinds[field_name.split("\x00", 1)[0]] += n
    status = syncstatus.encode(
        **(sync_fields or {}), objects=len(new), kinds=dict(sorted(kinds.items()))
    )
    try:
        for _ in range(WATCH_RETRIES):
            try:
                return _apply(
                    r,
                    cluster,
                    new,
                    (new_counts, new_names),
                    status,
                    fence,
                    dict(kinds),
                    since_generation,
                )
            except redis.WatchError:
                continue  # the fence or a concurrent writer moved: diff again
    except redis.ConnectionError as e:
        raise RedisUnavailable(f"Redis unavailable while storing cluster {cluster}") from e
    raise RedisUnavailable(f"cluster {cluster}: rows kept changing under the sync; retry")


def _apply(
    r: redis.Redis,
    cluster: str,
    new: set[str],
    derived: tuple[dict[str, int], dict[str, str]],
    status: dict[str, str],
    fence: Fence | None,
    kinds: dict[str, int],
    since_generation: int | None = None,
) -> WriteStats:
    new_counts, new_names = derived  # the snapshot's counts hash and name index
    pipe: Any  # redis-py's pipeline typing is loose
    with r.pipeline(transaction=True) as pipe:
        watched = [keys.generation(cluster)] + ([fence.key] if fence else [])
        pipe.watch(*watched)
        if fence is not None and _s(pipe.get(fence.key)) != fence.token:
            raise LockBusy(f"cluster {cluster}: sync lock lost before writing; nothing written")
        if since_generation is not None and generation(pipe, cluster) != since_generation:
            pipe.multi()
            pipe.hset(keys.sync(cluster), mapping=_without_totals(status))
            pipe.execute()
            return WriteStats(0, 0, len(new), kinds, superseded=True)
        current = {_s(m) for m in pipe.zrange(keys.rows(cluster), 0, -1)}
        old_counts = {_s(k): int(v) for k, v in pipe.hgetall(keys.counts(cluster)).items()}
        old_names = {_s(k): _s(v) for k, v in pipe.hgetall(keys.names(cluster)).items()}
        added, removed = new - current, current - new
        pipe.multi()
        if added or removed or old_counts != new_counts or old_names != new_names:
            _write_diff(pipe, cluster, added, removed)
            _write_counts(pipe, cluster, old_counts, new_counts)
            _write_names(pipe, cluster, old_names, new_names)
            pipe.incr(keys.generation(cluster))
        pipe.hset(keys.sync(cluster), mapping=status)
        pipe.execute()
    return WriteStats(len(added), len(removed), len(new), kinds)


def generation(r: Any, cluster: str) -> int:
    """The cluster's write generation (bumped by every write that changes rows)."""
    return int(r.get(keys.generation(cluster)) or 0)


def _without_totals(status: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in status.items() if k not in ("objects", "kinds")}


def _write_diff(pipe: Any, cluster: str, added: set[str], removed: set[str]) -> None:
    rows_key = keys.rows(cluster)
    for chunk in _chunks(sorted(removed)):
        pipe.zrem(rows_key, *chunk)
    for chunk in _chunks(sorted(added)):
        pipe.zadd(rows_key, dict.fromkeys(chunk, 0))
    gone, new = _by_status(removed), _by_status(added)
    for status in keys.INDEXED_STATUSES:
        index = keys.by_status(cluster, status)
        for chunk in _chunks(gone.get(status, [])):
            pipe.zrem(index, *chunk)
        for chunk in _chunks(new.get(status, [])):
            pipe.zadd(index, dict.fromkeys(chunk, 0))


def _by_status(members: set[str]) -> dict[str, list[str]]:
    """Members of the indexed (non-healthy) statuses, by status."""
    out: dict[str, list[str]] = {}
    for m in members:
        status = rows.status_of(m)
        if status != "healthy":
            out.setdefault(status, []).append(m)
    return out


def _write_counts(pipe: Any, cluster: str, old: dict[str, int], new: dict[str, int]) -> None:
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    gone = [k for k in old if k not in new]
    if changed:
        pipe.hset(keys.counts(cluster), mapping=changed)
    if gone:
        pipe.hdel(keys.counts(cluster), *gone)


def _write_names(pipe: Any, cluster: str, old: dict[str, str], new: dict[str, str]) -> None:
    changed, gone = name_index.diff(old, new)
    for i in range(0, len(gone), CHUNK):
        pipe.hdel(keys.names(cluster), *gone[i : i + CHUNK])
    items = list(changed.items())
    for i in range(0, len(items), CHUNK):
        pipe.hset(keys.names(cluster), mapping=dict(items[i : i + CHUNK]))


def _counts(members: Iterable[str]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for m in members:
        _ns, kind, _name, code, _ = m.split(rows.SEP, 4)
        c[keys.counts_field(kind, rows.CODE_STATUS[code])] += 1
    return dict(c)


def _chunks(items: list[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), CHUNK):
        yield items[i : i + CHUNK]


def _s(v: str | bytes | None) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v


def mark_attempt(r: redis.Redis, cluster: str, now: float | None = None) -> None:
    """A sync started: state `syncing`, `last_attempt` now (rows stay as they were)."""
    now = time.time() if now is None else now
    _hset(r, keys.sync(cluster), syncstatus.encode(state="syncing", last_attempt=now))


def mark_error(r: redis.Redis, cluster: str, error: str, duration_s: float, requests: int) -> None:
    """A sync failed: the last good rows stay (reported stale); the short error is recorded."""
    text = " ".join(error.split())[:SYNC_ERROR_MAX]
    fields = syncstatus.encode(
        state="error", last_error=text, duration_s=round(duration_s, 3), requests=requests
    )
    _hset(r, keys.sync(cluster), fields)


def mark_rbac_error(r: redis.Redis, cluster: str, error: str) -> None:
    """An RBAC sync failed: the last grants stay until they pass `rbac_max_age_s`."""
    text = " ".join(error.split())[:SYNC_ERROR_MAX]
    _hset(r, keys.sync(cluster), syncstatus.encode(rbac_error=text))


def _hset(r: Any, key: str, fields: dict[str, str]) -> None:
    r.hset(key, mapping=fields)


def mark_pending(r: redis.Redis, cluster: str) -> None:
    """A newly registered cluster: `pending` until its first sync (HSETNX keeps a real state)."""
    r.hsetnx(keys.sync(cluster), "state", "pending")


def delete_cluster(r: redis.Redis, cluster: str) -> int:
    """Delete every key of a cluster (rows, indexes, counts, grants, status, lock)."""
    locks = [keys.lock(cluster, work) for work in keys.LOCK_WORK]
    return int(r.delete(*keys.cluster_keys(cluster), *locks))
