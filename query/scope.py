"""A caller's scope: the clusters they can see, their access there, and the freshness block.

A cluster is in scope when the caller has any grant there (by its stored RBAC data). Its rows
are served only while that data is fresh (fail closed otherwise, and said so). Clusters out of
scope are never named; fleet-wide totals are fine to show.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis

from common.index import keys, syncstatus
from common.index.read import memo
from common.index.syncstatus import ClusterSync, FleetState
from common.rbac.authorizer import UserInfo
from common.rbac.grants import Access, AccessResolver
from common.settings import Settings
from query import metrics


@functools.lru_cache(maxsize=16384)
def iso(epoch: float | None) -> str | None:
    """An epoch as RFC 3339 (UTC, seconds); remembered: a degraded fleet's freshness block
    formats the same few hundred sync times on every list request."""
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


memo.on_sweep(iso.cache_clear)


class FleetView:
    """Registered clusters and their sync status, re-read at most every `cache_s` seconds."""

    def __init__(self, r: redis.Redis, cache_s: float = 1.0) -> None:
        self.r = r
        self.cache_s = cache_s
        self._at = float("-inf")
        self._syncs: dict[str, ClusterSync] = {}
        self._parsed: dict[str, Any] = {}  # syncstatus.read_all's memo
        self._lock = threading.Lock()
        self._snapshot: FleetSnapshot | None = None
        # Per caller: (snapshot, resolver answer, in-scope clusters, visible clusters, the
        # memo sweep round of its last use). Each entry pins a snapshot (200 clusters' sync
        # status at L) and the caller's access maps: a caller idle for a whole sweep round is
        # dropped with the memos' idle entries (`drop_idle`), or every caller that ever asked
        # would keep ~1 MiB at fleet L until 4,096 of them filled the map.
        self.scopes: dict[tuple[str, tuple[str, ...]], tuple[Any, ...]] = {}
        memo.track(self)

    def syncs(self) -> dict[str, ClusterSync]:
        """The view, re-read when older than `cache_s` by one thread; the others go on with the
        current view meanwhile (at fleet L the re-read is ~200 hashes: making every request
        wait for it was the p99 of every profile). Before the first read, all wait for it."""
        if time.monotonic() - self._at < self.cache_s:
            return self._syncs
        if not self._lock.acquire(blocking=self._snapshot is None or self.cache_s <= 0):
            return self._syncs  # another thread is re-reading it
        try:
            if time.monotonic() - self._at < self.cache_s:
                return self._syncs  # another thread refreshed while this one waited
            clusters = syncstatus.registered_clusters(self.r)
            self._syncs = syncstatus.read_all(self.r, clusters, self._parsed) if clusters else {}
            self._at = time.monotonic()
            return self._syncs
        finally:
            self._lock.release()

    def drop_idle(self, before: int) -> int:
        """Forget the scopes of callers not seen since sweep round `before` (memo.sweep_idle)."""
        idle = [k for k, v in list(self.scopes.items()) if v[4] < before]
        for k in idle:
            self.scopes.pop(k, None)
        return len(idle)

    def known(self) -> list[str]:
        """The registered clusters as last read, read now only if never read (a watch
        position taken before a list: a cluster missing from it is watched from its start)."""
        syncs = self._syncs if self._at > float("-inf") else self.syncs()
        return sorted(syncs)

    def snapshot(self, settings: Settings) -> FleetSnapshot:
        """The current sync status with its derived lists (rebuilt only when it changed)."""
        syncs = self.syncs()
        limits = (settings.stale_after_s, settings.rbac_max_age_s)
        snap = self._snapshot
        if snap is None or snap.syncs is not syncs or snap.limits != limits or self.cache_s <= 0:
            snap = self._snapshot = FleetSnapshot.build(syncs, *limits)
        return snap


@dataclass(frozen=True)
class FleetSnapshot:
    """One refresh of the fleet view with what every request derives from it, computed once per
    refresh instead of per request (O(clusters) each): freshness is judged at the refresh, so
    it lags by at most the view's `cache_s`."""

    syncs: dict[str, ClusterSync]
    limits: tuple[float, float]  # (stale_after_s, rbac_max_age_s) it was judged with
    clusters: list[str]
    state: FleetState
    pending: list[str]
    stale: list[str]
    rbac_stale: list[str]

    @classmethod
    def build(cls, syncs: dict[str, ClusterSync], stale_s: float, rbac_s: float) -> FleetSnapshot:
        now = time.time()
        clusters = sorted(syncs)
        return cls(
            syncs,
            (stale_s, rbac_s),
            clusters,
            syncstatus.fleet_state(list(syncs.values()), stale_s, rbac_s, now),
            [c for c in clusters if not syncs[c].collected],
            [c for c in clusters if syncs[c].stale(stale_s, now)],
            [c for c in clusters if not syncs[c].rbac_fresh(rbac_s, now)],
        )


@dataclass
class Scope:
    user: UserInfo
    syncs: dict[str, ClusterSync]
    access: dict[str, Access]
    """In-scope clusters (any grant), fresh or not, sorted by name. This and `visible` are
    shared between requests of the same caller: read them, never change them."""
    visible: dict[str, Access]
    """In-scope clusters whose RBAC data is fresh: the ones whose rows are served."""
    fleet: FleetState
    now: float
    snapshot: FleetSnapshot
    checked: bool = True
    """False when the grants were taken from the resolver's cache without reading `fs:version`:
    the caller must read it with its data and redo the request with a checked scope unless it
    still equals `version` (see `resolve_scope`)."""
    version: keys.GrantsVersion | None = None

    def freshness(self, settings: Settings) -> dict[str, Any]:
        snap, syncs, mine = self.snapshot, self.syncs, self.access
        pending = [{"cluster": c, "state": syncs[c].state} for c in snap.pending if c in mine]
        stale = [
            {"cluster": c, "lastSuccess": iso(syncs[c].last_success)}
            for c in snap.stale
            if c in mine
        ]
        hidden = [
            {"cluster": c, "rbacSyncedAt": iso(syncs[c].rbac_synced_at)}
            for c in snap.rbac_stale
            if c in mine
        ]
        return {
            "degraded": self.fleet.state != "ready",
            "state": self.fleet.state,
            "message": self.fleet.message,
            "collected": self.fleet.collected,
            "total": self.fleet.total,
            "stale": stale,
            "notCollected": pending,
            "hiddenStaleRbac": hidden,
        }


_SCOPES_MAX = 4096


def resolve_scope(
    user: UserInfo,
    fleet: FleetView,
    resolver: AccessResolver,
    settings: Settings,
    optimistic: bool = False,
) -> Scope:
    """The caller's scope. Optimistic: from the resolver's last answer with no Redis call when
    it has one (`Scope.checked` is then False); checked otherwise."""
    snap = fleet.snapshot(settings)
    hit = resolver.cached(user, snap.clusters) if optimistic else None
    if hit is not None:
        metrics.RBAC_CACHE.labels("hit").inc()
        access, visible = _split(fleet, user, snap, hit[0])
        return Scope(
            user, snap.syncs, access, visible, snap.state, time.time(), snap, False, hit[1]
        )
    loaded = resolver.subjects_loaded
    resolved = resolver.resolve(user, snap.clusters)
    metrics.RBAC_CACHE.labels("miss" if resolver.subjects_loaded > loaded else "hit").inc()
    access, visible = _split(fleet, user, snap, resolved)
    return Scope(user, snap.syncs, access, visible, snap.state, time.time(), snap)


def _split(
    fleet: FleetView, user: UserInfo, snap: FleetSnapshot, resolved: dict[str, Access]
) -> tuple[dict[str, Access], dict[str, Access]]:
    """In-scope and visible clusters; reused while the snapshot and the resolver's answer are
    the same (the dict comparison is one C loop over identical objects, the rebuild is not)."""
    key = (user.name, user.groups)
    cached = fleet.scopes.get(key)
    now = memo.sweep_round()
    if (
        cached is not None
        and cached[0] is snap
        and (cached[1] is resolved or cached[1] == resolved)
    ):
        if cached[4] != now:
            fleet.scopes[key] = (*cached[:4], now)
        return cached[2], cached[3]
    access = {c: resolved[c] for c in snap.clusters if not resolved[c].is_empty}
    hidden = set(snap.rbac_stale)
    visible = {c: a for c, a in access.items() if c not in hidden} if hidden else dict(access)
    if cached is not None and cached[2] == access and cached[3] == visible:
        # a new snapshot with the same outcome: keep the dicts, so what the reader remembers
        # per access map (plans, facets, encoded counts) outlives the view's refreshes
        access, visible = cached[2], cached[3]
    if len(fleet.scopes) >= _SCOPES_MAX:
        fleet.scopes.clear()
    fleet.scopes[key] = (snap, resolved, access, visible, now)
    return access, visible
