"""A caller's scope: the clusters they can see, their access there, and the freshness block.

A cluster is in scope when the caller has any grant there (by its stored RBAC data). Its rows
are served only while that data is fresh (fail closed otherwise, and said so). Clusters out of
scope are never named; fleet-wide totals are fine to show.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import redis

from common import syncstatus
from common.grants import Access, AccessResolver
from common.rbac import UserInfo
from common.settings import Settings
from common.syncstatus import ClusterSync, FleetState
from query import metrics


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class FleetView:
    """Registered clusters and their sync status, re-read at most every `cache_s` seconds."""

    def __init__(self, r: redis.Redis, cache_s: float = 1.0) -> None:
        self.r = r
        self.cache_s = cache_s
        self._at = float("-inf")
        self._syncs: dict[str, ClusterSync] = {}
        self._lock = threading.Lock()

    def syncs(self) -> dict[str, ClusterSync]:
        if time.monotonic() - self._at < self.cache_s:
            return self._syncs
        with self._lock:
            if time.monotonic() - self._at < self.cache_s:
                return self._syncs  # another thread refreshed while this one waited
            clusters = syncstatus.registered_clusters(self.r)
            self._syncs = syncstatus.read_all(self.r, clusters) if clusters else {}
            self._at = time.monotonic()
            return self._syncs


@dataclass
class Scope:
    user: UserInfo
    syncs: dict[str, ClusterSync]
    access: dict[str, Access]
    """In-scope clusters (any grant), fresh or not, sorted by name."""
    visible: dict[str, Access]
    """In-scope clusters whose RBAC data is fresh: the ones whose rows are served."""
    fleet: FleetState
    now: float

    def freshness(self, settings: Settings) -> dict[str, Any]:
        stale, pending, hidden = [], [], []
        for c in self.access:
            s = self.syncs[c]
            if not s.collected:
                pending.append({"cluster": c, "state": s.state})
            elif s.stale(settings.stale_after_s, self.now):
                stale.append({"cluster": c, "lastSuccess": iso(s.last_success)})
            if c not in self.visible:
                hidden.append({"cluster": c, "rbacSyncedAt": iso(s.rbac_synced_at)})
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


def resolve_scope(
    user: UserInfo, fleet: FleetView, resolver: AccessResolver, settings: Settings
) -> Scope:
    syncs = fleet.syncs()
    now = time.time()
    loaded = resolver.subjects_loaded
    resolved = resolver.resolve(user, sorted(syncs))
    metrics.RBAC_CACHE.labels("miss" if resolver.subjects_loaded > loaded else "hit").inc()
    access = {c: a for c, a in sorted(resolved.items()) if not a.is_empty}
    visible = {c: a for c, a in access.items() if syncs[c].rbac_fresh(settings.rbac_max_age_s, now)}
    state = syncstatus.fleet_state(
        list(syncs.values()), settings.stale_after_s, settings.rbac_max_age_s, now
    )
    return Scope(user, syncs, access, visible, state, now)
