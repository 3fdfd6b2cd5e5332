"""Per-cluster sync status in Redis (`fs:{c:<cluster>}:sync`), and the fleet summary built from it.

Written by the collector (and watcher), read by the query service for `/api/v1/status` and the
freshness block of every list answer. Fields of the hash (all strings):

| field          | meaning                                                        |
|----------------|----------------------------------------------------------------|
| state          | pending, syncing, ok, error                                    |
| last_success   | epoch seconds of the last successful object sync ("" = never)  |
| last_attempt   | epoch seconds of the last object sync attempt                  |
| last_error     | short error text of the last failed sync ("" after a success)  |
| duration_s     | duration of the last object sync                               |
| objects        | rows stored for the cluster                                    |
| kinds          | JSON {kind: count}                                             |
| requests       | HTTP requests made by the last object sync                     |
| rbac_synced_at | epoch seconds of the last successful RBAC sync ("" = never)    |
| rbac_hash      | content hash of the compiled grants (cache key for the query)  |
| rbac_error     | short error text of the last failed RBAC sync                  |
| snapshot       | digest of what the stored snapshot was built from (collector.sync: every listed object's uid and resourceVersion, the served versions, the kinds and the row code) |
| snapshot_generation | the cluster's generation right after that snapshot was written |
| snapshot_at    | epoch seconds when that snapshot's rows were built              |
| listed_at      | epoch seconds of the last object sync that listed the whole cluster (the collector's; a watcher's heartbeat does not set it) |
| rbac_listed_at | epoch seconds of the last RBAC sync that listed all four RBAC resources and stored its grants (the collector's) |
| watched_at     | epoch seconds of a watcher's last heartbeat for the cluster's objects (every watch open and heard from) |
| rbac_watched_at | the same for its four RBAC watches (grants stored once)        |

`read_all` adds each cluster's registry record (`fs:clusters`): a cluster that is registered
but not ready (common.index.registry_record) is never synced, so it neither keeps the fleet
`rebuilding` nor counts as stale; it makes the fleet `degraded` ("N not ready").
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import redis

from common import redis_client
from common.index import keys
from common.index.registry_record import Record
from common.redis_client import text

STATES = ("pending", "syncing", "ok", "error")


@dataclass(frozen=True)
class ClusterSync:
    """One cluster's sync status as read from Redis."""

    cluster: str
    state: str = "pending"
    last_success: float | None = None
    last_attempt: float | None = None
    last_error: str = ""
    duration_s: float | None = None
    objects: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    rbac_synced_at: float | None = None
    rbac_hash: str = ""
    rbac_error: str = ""
    snapshot: str = ""
    """Digest of the inputs of the stored snapshot ("" = none recorded): collector.sync."""
    snapshot_generation: int | None = None
    snapshot_at: float | None = None
    listed_at: float | None = None
    rbac_listed_at: float | None = None
    watched_at: float | None = None
    rbac_watched_at: float | None = None
    record: Record = field(default_factory=Record)
    """The cluster's registry record (source, readiness); the default when not read."""

    @property
    def ready(self) -> bool:
        """Ready to be synced (a not-ready cluster is registered but left alone)."""
        return self.record.ready

    @property
    def collected(self) -> bool:
        """True once one object sync succeeded (its rows are being served)."""
        return self.last_success is not None

    def stale(self, stale_after_s: float, now: float | None = None) -> bool:
        """Collected, but the last good data is older than `stale_after_s` or the last try failed."""
        if self.last_success is None:
            return False
        now = time.time() if now is None else now
        return self.state == "error" or now - self.last_success > stale_after_s

    def rbac_age_s(self, now: float | None = None) -> float | None:
        if self.rbac_synced_at is None:
            return None
        return (time.time() if now is None else now) - self.rbac_synced_at

    def rbac_fresh(self, max_age_s: float, now: float | None = None) -> bool:
        """False when access data is missing or too old: the cluster's rows are hidden."""
        age = self.rbac_age_s(now)
        return age is not None and age <= max_age_s


def _float(raw: str | None) -> float | None:
    return float(raw) if raw else None


def _int(raw: str | None) -> int | None:
    return int(raw) if raw else None


def parse(cluster: str, h: dict[str, str]) -> ClusterSync:
    """A ClusterSync from the hash's fields (missing fields take their defaults)."""
    return ClusterSync(
        cluster=cluster,
        state=h.get("state") or "pending",
        last_success=_float(h.get("last_success")),
        last_attempt=_float(h.get("last_attempt")),
        last_error=h.get("last_error", ""),
        duration_s=_float(h.get("duration_s")),
        objects=int(h.get("objects") or 0),
        kinds=json.loads(h["kinds"]) if h.get("kinds") else {},
        requests=int(h.get("requests") or 0),
        rbac_synced_at=_float(h.get("rbac_synced_at")),
        rbac_hash=h.get("rbac_hash", ""),
        rbac_error=h.get("rbac_error", ""),
        snapshot=h.get("snapshot", ""),
        snapshot_generation=_int(h.get("snapshot_generation")),
        snapshot_at=_float(h.get("snapshot_at")),
        listed_at=_float(h.get("listed_at")),
        rbac_listed_at=_float(h.get("rbac_listed_at")),
        watched_at=_float(h.get("watched_at")),
        rbac_watched_at=_float(h.get("rbac_watched_at")),
    )


def encode(**fields: Any) -> dict[str, str]:
    """Hash fields for HSET: floats/ints as text, dicts as JSON, None as ""."""
    out: dict[str, str] = {}
    for name, value in fields.items():
        if name not in ClusterSync.__dataclass_fields__ or name == "cluster":
            raise ValueError(f"unknown sync status field {name!r}")
        if value is None:
            out[name] = ""
        elif isinstance(value, dict):
            out[name] = json.dumps(value, separators=(",", ":"), sort_keys=True)
        else:
            out[name] = str(value)
    return out


def read_all(
    r: redis.Redis, clusters: list[str], memo: dict[str, tuple[Any, Any, ClusterSync]] | None = None
) -> dict[str, ClusterSync]:
    """Sync status and registry records of many clusters in one pipelined round trip.

    With `memo` (kept by the caller between reads), a cluster whose hash and record come back as
    they did last time keeps its parsed status: a re-read of an unchanged fleet then costs the
    round trip and a comparison of the replies, not 200 parses."""
    if not clusters:
        return {}
    commands = [("HGETALL", keys.sync(c)) for c in clusters]
    *hashes, records = redis_client.pipelined(r, [*commands, ("HMGET", keys.CLUSTERS, *clusters)])
    out: dict[str, ClusterSync] = {}
    for c, raw, record in zip(clusters, hashes, records, strict=True):
        seen = memo.get(c) if memo is not None else None
        if seen is not None and seen[0] == raw and seen[1] == record:
            out[c] = seen[2]
            continue
        # raw replies: a flat [field, value, ...] list (RESP2), or a map (RESP3)
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
        h = {text(k): text(v) for k, v in pairs}
        out[c] = dataclasses.replace(parse(c, h), record=Record.decode(record))
        if memo is not None:
            memo[c] = (raw, record, out[c])
    if memo is not None and len(memo) > len(out):
        for gone in memo.keys() - out.keys():
            del memo[gone]
    return out


WATCHED_FIELDS = {
    "objects": ("watched_at", "listed_at"),
    "rbac": ("rbac_watched_at", "rbac_listed_at"),
}
"""Per kind of sync (collector.sync.Work's values): the field a watcher's heartbeat sets and the
one a full sync by the collector sets."""


def watched(
    r: redis.Redis,
    clusters: list[str],
    work: str,
    fresh_s: float,
    listed_within_s: float,
    now: float | None = None,
) -> set[str]:
    """The clusters whose `work` (objects or rbac) needs no scheduled sync now: a watcher
    vouched for them within `fresh_s` (its heartbeat: every watch open and heard from) and the
    collector listed them whole within the current period of `listed_within_s` (the safety
    net's own interval for watched clusters) as the cluster's phase cuts it (`listing_period`):
    each watched cluster is listed once a period, at a moment fixed by its name, so that a fleet
    listed together (at a start, after a failover) does not come due together again every
    period. One pipelined round trip; an empty set when `listed_within_s` is 0."""
    if not clusters or listed_within_s <= 0:
        return set()
    now = time.time() if now is None else now
    beat, listed = WATCHED_FIELDS[work]
    replies = redis_client.pipelined(r, [("HMGET", keys.sync(c), beat, listed) for c in clusters])
    return {
        c
        for c, (beat_at, seen_at) in zip(clusters, replies, strict=True)
        if beat_at
        and seen_at
        and now - float(beat_at) < fresh_s
        and listing_period(c, float(seen_at), listed_within_s)
        >= listing_period(c, now, listed_within_s)
    }


def listing_period(cluster: str, at: float, period_s: float) -> int:
    """The number of the `period_s` period of `cluster` that holds the moment `at`: periods
    start at a phase fixed by the cluster's name (CRC-32, spread evenly over the period), so a
    cluster listed in the current one waits at most `period_s` for its next listing and
    clusters listed at one moment come due at their own moments of the next period."""
    phase = zlib.crc32(cluster.encode()) / 2**32 * period_s
    return math.floor((at - phase) / period_s)


def registered_clusters(r: redis.Redis) -> list[str]:
    """Names of the clusters in the registry (`fs:clusters`), sorted."""
    return sorted(text(c) for c in r.hkeys(keys.CLUSTERS))


def ready_clusters(r: redis.Redis) -> list[str]:
    """Registered clusters that are ready to be synced, sorted."""
    raw = r.hgetall(keys.CLUSTERS)
    return sorted(text(c) for c, v in raw.items() if Record.decode(v).ready)


@dataclass(frozen=True)
class FleetState:
    """The overall state: `rebuilding` while any ready registered cluster was never collected,
    `degraded` while any is stale, has stale access data or is not ready, else `ready`."""

    state: str
    collected: int
    total: int
    message: str


def fleet_state(
    syncs: list[ClusterSync], stale_after_s: float, rbac_max_age_s: float, now: float | None = None
) -> FleetState:
    now = time.time() if now is None else now
    total = len(syncs)
    collected = sum(1 for s in syncs if s.collected)
    ready = [s for s in syncs if s.ready]
    not_ready = total - len(ready)
    if total == 0 or any(not s.collected for s in ready):
        note = f" ({not_ready} not ready)" if not_ready else ""
        return FleetState(
            "rebuilding",
            collected,
            total,
            f"Rebuilding index: {collected} of {total} clusters collected{note}",
        )
    stale = [s.cluster for s in ready if s.stale(stale_after_s, now)]
    no_access = [s.cluster for s in ready if not s.rbac_fresh(rbac_max_age_s, now)]
    if stale or no_access or not_ready:
        parts = []
        if not_ready:
            parts.append(f"{not_ready} not ready")
        if stale:
            parts.append(f"{len(stale)} stale")
        if no_access:
            parts.append(f"{len(no_access)} without fresh access data (rows hidden)")
        return FleetState(
            "degraded",
            collected,
            total,
            f"{collected} of {total} clusters collected; " + ", ".join(parts),
        )
    return FleetState("ready", collected, total, f"{collected} of {total} clusters collected")
