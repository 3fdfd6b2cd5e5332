"""The units of work that tasks and `fleetscope collect` run: a locked object or RBAC sync of one
cluster, the registry reconcile, and one full synchronous collection of the fleet."""

from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import redis

from collector.clusters import ClusterSource
from collector.lock import ClusterLock
from collector.sync import SyncResult, Work, error_text, record_failure, run
from common.errors import FleetscopeError, LockBusy, TemporaryError
from common.index import history, syncstatus
from common.index.registry_record import read_record
from common.index.write import store
from common.kinds.registry import KindRegistry
from common.leaf import registry
from common.settings import Settings

log = logging.getLogger(__name__)
CLIENT_IDLE_MIN_S = 30.0
"""A leaf client not used for `FLEETSCOPE_SYNC_INTERVAL_S` (at least this) is closed after the
next sync of another cluster (`ClusterSource.close_idle`)."""
MAX_RETRIES = 3
RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S = 5.0, 60.0


def retry_delay(error: BaseException, retries: int) -> float | None:
    """Seconds until a failed sync is tried again, or None when it is not: another worker holds
    the lock (it is being synced), the error is permanent, or the retries are used up. Backoff
    is exponential with full jitter, but never sooner than the error asks (a 429 Retry-After)."""
    if isinstance(error, LockBusy) or not isinstance(error, TemporaryError):
        return None
    if retries >= MAX_RETRIES:
        return None
    backoff = random.uniform(0, min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S * 2**retries))
    return max(backoff, error.delay_s)


@dataclass
class Collector:
    """What every job needs: settings, Redis, the kind registry and the cluster source."""

    settings: Settings
    r: redis.Redis
    kinds: KindRegistry
    source: ClusterSource

    def run(self, work: Work, cluster: str) -> SyncResult:
        """One sync of a registered, ready cluster under its lock for `work` (LockBusy when
        another worker has it); raises after recording a failure. A not-ready cluster is
        skipped (its record says why); a cluster removed from the registry while it synced
        has the keys this sync wrote deleted again."""
        record = read_record(self.r, cluster)
        if record is None:
            return SyncResult(cluster, work, error="cluster is not registered")
        if not record.ready:
            return SyncResult(cluster, work, skipped=f"not ready: {record.reason}")
        try:
            with ClusterLock(self.r, cluster, self.settings.lock_ttl_s, work) as lock:
                try:
                    client = self.source.client(cluster)
                except FleetscopeError as e:
                    record_failure(self.r, SyncResult(cluster, work, error=error_text(e)))
                    raise
                fence = lock.fence if work is Work.OBJECTS else None
                retention = history.Retention(
                    self.settings.history_max,
                    self.settings.history_days,
                    self.settings.flapping_threshold,
                    self.settings.watch_feed_max,
                )
                rebuild_after_s = self.settings.sync_rebuild_after_s
                return run(self.r, work, client, self.kinds, fence, retention, rebuild_after_s)
        finally:
            if read_record(self.r, cluster) is None:
                store.delete_cluster(self.r, cluster)
            # clients of clusters this process has not synced for a round: closed until needed
            self.source.close_idle(max(self.settings.sync_interval_s, CLIENT_IDLE_MIN_S))

    def sync_objects(self, cluster: str) -> SyncResult:
        return self.run(Work.OBJECTS, cluster)

    def sync_rbac(self, cluster: str) -> SyncResult:
        return self.run(Work.RBAC, cluster)

    def reconcile(self) -> registry.Reconciled:
        """Re-read the configured clusters and mirror them into Redis."""
        result = registry.reconcile(self.r, self.source.claims(refresh=True))
        if result.changed:
            log.info(
                "registry: %d added, %d removed, %d updated",
                len(result.added),
                len(result.removed),
                len(result.updated),
            )
        return result

    def registered(self) -> list[str]:
        return syncstatus.registered_clusters(self.r)

    def syncable(self) -> list[str]:
        """Registered clusters that are ready (the others are not synced at all)."""
        return syncstatus.ready_clusters(self.r)

    def due(self, work: Work, clusters: list[str], interval_s: float) -> list[str]:
        """Of `clusters`, those whose scheduled `work` sync is due this round of `interval_s`:
        all but the ones a watcher vouched for within the round and the collector listed within
        the current period of `sync_watched_interval_s`, as each cluster's phase cuts it
        (syncstatus.watched). The watcher keeps those current; the
        collector's sync stays their safety net, at its own interval, and a cluster whose
        watches stop being healthy is synced again from the next round."""
        watched = syncstatus.watched(
            self.r, clusters, work.value, interval_s, self.settings.sync_watched_interval_s
        )
        if watched:
            log.info(
                "%s syncs: %d of %d clusters are watched and were listed this %.0fs period: not now",
                work,
                len(watched),
                len(clusters),
                self.settings.sync_watched_interval_s,
            )
        return [c for c in clusters if c not in watched]


@dataclass
class ClusterOutcome:
    """Both syncs of one cluster in a full collection."""

    cluster: str
    objects: SyncResult
    rbac: SyncResult

    @property
    def ok(self) -> bool:
        return self.objects.ok and self.rbac.ok


def collect_once(
    c: Collector, only: list[str] | None = None, parallel: int = 4
) -> list[ClusterOutcome]:
    """Reconcile the registry, then sync objects and RBAC of every (or the named) cluster."""
    c.reconcile()
    clusters = c.registered()
    outcomes: list[ClusterOutcome] = []
    if only:
        for name in sorted(set(only) - set(clusters)):
            missing = [SyncResult(name, w, error="cluster is not configured") for w in Work]
            outcomes.append(ClusterOutcome(name, *missing))
        clusters = [n for n in clusters if n in only]
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        outcomes.extend(pool.map(lambda name: _both(c, name), clusters))
    return outcomes


def _both(c: Collector, cluster: str) -> ClusterOutcome:
    return ClusterOutcome(
        cluster, _outcome(c, Work.OBJECTS, cluster), _outcome(c, Work.RBAC, cluster)
    )


def _outcome(c: Collector, work: Work, cluster: str) -> SyncResult:
    try:
        return c.run(work, cluster)
    except Exception as e:  # recorded in Redis by the sync; reported in the summary
        return SyncResult(cluster, work, error=error_text(e))
