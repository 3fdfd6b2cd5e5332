"""The full sync's side of the row store: make a listed snapshot the cluster's rows, atomically,
through the one writer (common.index.write.writer), plus the sync status and cluster deletion.

`replace_rows` computes every row's `blockedBy` from the snapshot (common.index.graph), reads the
stored members (one ZRANGE, in the writer's read round trip), and hands the writer the difference
with the snapshot: a re-sync with nothing changed writes no rows, and
the derived structures are rebuilt from the snapshot (repairing any drift).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from common.errors import LockBusy
from common.index import feed, graph, history, keys, nscounts, rows, syncstatus, timeline
from common.index.lease import Fence
from common.index.write import writer
from common.redis_client import text

SYNC_ERROR_MAX = 300
generation = writer.generation


@dataclass(frozen=True)
class WriteStats:
    """What one `replace_rows` did: rows added and removed, and the snapshot's totals."""

    added: int
    removed: int
    total: int
    kinds: dict[str, int] = field(default_factory=dict)
    superseded: bool = False
    """True when newer writes (watch events) landed while the snapshot was listed: not applied."""
    unchanged: bool = False
    """True when the listed objects were the stored snapshot's: no rows were built
    (`confirm_unchanged`)."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


class _Snapshot:
    """The writer plan of a full snapshot: read every stored member, diff against the new set."""

    names = None  # the whole name index is compared with the snapshot's
    source = "sync"  # transitions first seen here (a missed watch event) say so

    def __init__(self, members: set[str], dependents: dict[str, str]) -> None:
        self.members = members
        self.dependents = dependents

    def queue_reads(self, cluster: str, reads: Any) -> None:
        reads.zrange(keys.rows(cluster), 0, -1)

    def delta(self, replies: list[Any]) -> writer.Delta:
        return snapshot_delta([text(m) for m in replies[0]], self.members, self.dependents)


def snapshot_delta(
    stored: list[str], members: set[str], dependents: dict[str, str]
) -> writer.Delta:
    """The writer's delta that makes `members` (their `blockedBy` computed, `dependents` their
    graph) the cluster's rows, `stored` being the rows there now."""
    # Stored rows carry what the writer adds from their history (`recent`): compared
    # without it, so only what the leaf changed is a difference (the writer carries it on).
    # Most rows never transitioned: their member is kept as it is (no copy).
    current = {rows.without_recent(m): m for m in stored}
    removed = [m for bare, m in current.items() if bare not in members]
    added = members - current.keys()
    return writer.Delta(removed, added, members, dependents)


def replace_rows(
    r: redis.Redis,
    cluster: str,
    members: Iterable[str],
    sync_fields: dict[str, Any] | None = None,
    fence: Fence | None = None,
    since_generation: int | None = None,
    retention: history.Retention = history.DEFAULT,
) -> WriteStats:
    """Make `members` (encoded rows) the cluster's snapshot; also HSET `sync_fields` (sync status,
    `objects` and `kinds` filled in) in the same transaction.

    `since_generation` is the cluster's generation read before the snapshot was listed: if
    other writers (the watcher) changed rows meanwhile, the snapshot may be older than their
    events, so rows are left alone (`superseded`) and only `sync_fields` are written."""
    parsed = graph.Snapshot(members)
    snapshot = parsed.members()
    plan = _Snapshot(snapshot, parsed.dependents())
    done = writer.write(r, cluster, plan, fence, sync_fields, since_generation, retention)
    if done.superseded:
        return WriteStats(0, 0, len(snapshot), superseded=True)
    return WriteStats(done.added, done.removed, done.total, done.kinds)


def confirm_unchanged(
    r: redis.Redis,
    cluster: str,
    snapshot: str,
    objects: int,
    sync_fields: dict[str, Any],
    fence: Fence | None = None,
    max_age_s: float = 3600.0,
    now: float | None = None,
) -> WriteStats | None:
    """A re-sync that listed exactly what the stored snapshot was built from: when the stored
    `snapshot` digest is `snapshot`, nothing has written rows since (the generation is the one
    recorded with it), the cluster holds `objects` rows, its derived tables are complete and
    the snapshot was built less than `max_age_s` ago, only `sync_fields` are written (in a
    transaction under WATCH, like the writer's) and the stored totals are returned. None:
    build the rows (`replace_rows`), which also repairs any drift."""
    now = time.time() if now is None else now
    generation_key = keys.generation(cluster)
    tx: Any
    with r.pipeline(transaction=True) as tx:
        try:
            tx.watch(generation_key, *([fence.owner] if fence else []))
            reads: Any = r.pipeline(transaction=False)
            if fence is not None:
                reads.execute_command("MGET", fence.key, fence.owner)  # one slot (lease)
            reads.get(generation_key)
            reads.hmget(keys.sync(cluster), [*_SNAPSHOT_FIELDS, "kinds", *_READY])
            reads.zcard(keys.rows(cluster))
            replies = reads.execute()
            if fence is not None and any(text(v) != fence.token for v in replies.pop(0)):
                raise LockBusy(f"cluster {cluster}: {fence.key} is no longer ours; nothing written")
            gen = int(replies[0] or 0)
            digest, at_gen, at, kinds, ns_ready, tt_ready = (
                text(v) if v else "" for v in replies[1]
            )
            fresh = _young(at, now, max_age_s)
            if not (
                digest == snapshot
                and at_gen == str(gen)
                and fresh
                and bool(ns_ready)
                and timeline.ready(tt_ready)
                and int(replies[2]) == objects
            ):
                return None
            tx.multi()
            tx.hset(keys.sync(cluster), mapping=syncstatus.encode(**sync_fields))
            tx.execute()
        except redis.WatchError:
            return None  # a write landed meanwhile: build the rows
    counted = {str(k): int(v) for k, v in json.loads(kinds or "{}").items()}
    return WriteStats(0, 0, objects, counted, unchanged=True)


def rebuild_due(r: redis.Redis, cluster: str, max_age_s: float, now: float | None = None) -> bool:
    """Whether the next sync of `cluster` builds its rows whatever it lists: no snapshot
    digest is stored (never synced, or built from objects without versions), or the stored
    one is `max_age_s` old (`confirm_unchanged` would refuse it). One HMGET; False means
    only that the listing's digest decides."""
    now = time.time() if now is None else now
    digest, at = (
        text(v) if v else "" for v in r.hmget(keys.sync(cluster), [writer.SNAPSHOT, "snapshot_at"])
    )
    return not digest or not _young(at, now, max_age_s)


def _young(snapshot_at: str, now: float, max_age_s: float) -> bool:
    """A snapshot built at `snapshot_at` ("" when unknown) is trusted for `max_age_s`."""
    return bool(snapshot_at) and now - float(snapshot_at) < max_age_s


_SNAPSHOT_FIELDS = (writer.SNAPSHOT, writer.SNAPSHOT_GENERATION, "snapshot_at")
_READY = (nscounts.READY, timeline.READY)


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


def delete_cluster(r: redis.Redis, cluster: str, feed_max: int = feed.DEFAULT_MAX) -> int:
    """Delete every key of a cluster (rows, indexes, counts, grants, status, locks and their
    owner keys, histories; the watch lease is its holder's to release). Its rows leave through
    the change feed as DELETED entries, in the same transaction; the feed and the generations
    stay (common.index.feed: positions in it stay comparable if the cluster comes back)."""
    locks = [keys.lock(cluster, work) for work in keys.LOCK_WORK]
    owners = [keys.owner(k) for k in locks]
    windows: Any = r.hkeys(keys.timeline(cluster))
    tt = [keys.timeline_window(cluster, text(w)) for w in windows]
    tx: Any
    with r.pipeline(transaction=True) as tx:
        while True:
            try:
                tx.watch(keys.generation(cluster))
                gen = int(tx.get(keys.generation(cluster)) or 0)
                members = [text(m) for m in tx.zrange(keys.rows(cluster), 0, -1)]
                tx.multi()
                if members:
                    entries = feed.changes(members, [])
                    feed.queue_write(tx, cluster, entries, gen + 1, feed_max)
                    tx.incr(keys.generation(cluster))
                    tx.incr(keys.status_generation(cluster))
                tx.delete(*keys.cluster_keys(cluster), *locks, *owners, *tt)
                done = int(tx.execute()[-1])
                break
            except redis.WatchError:
                continue
    if members:
        writer.fleet_moved(r)
    found: list[Any] = []
    for key in r.scan_iter(match=keys.history_pattern(cluster), count=1000):
        found.append(key)
        if len(found) >= 1000:
            done += int(r.delete(*found))
            found = []
    return done + (int(r.delete(*found)) if found else 0)
