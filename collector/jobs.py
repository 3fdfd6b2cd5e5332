"""The units of work that tasks and `fleetscope collect` run: a locked object or RBAC sync of one
cluster, the registry reconcile, and one full synchronous collection of the fleet."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import redis

from collector.clusters import ClusterSource
from collector.lock import ClusterLock
from collector.sync import SyncResult, error_text, record_failure, sync_objects, sync_rbac
from common.errors import FleetscopeError
from common.index import keys, store
from common.kinds.registry import KindRegistry
from common.leaf import registry
from common.leaf.client import LeafClient
from common.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Collector:
    """What every job needs: settings, Redis, the kind registry and the cluster source."""

    settings: Settings
    r: redis.Redis
    kinds: KindRegistry
    source: ClusterSource

    def _client(self, cluster: str, what: str) -> LeafClient:
        try:
            return self.source.client(cluster)
        except FleetscopeError as e:
            record_failure(self.r, SyncResult(cluster, what, error=error_text(e)))
            raise

    def sync_objects(self, cluster: str) -> SyncResult:
        """One object sync under the cluster's lock (LockBusy when another worker has it)."""

        def run(lock: ClusterLock) -> SyncResult:
            client = self._client(cluster, "objects")
            return sync_objects(self.r, client, self.kinds, lock.fence)

        return self._guarded(cluster, "objects", run)

    def sync_rbac(self, cluster: str) -> SyncResult:
        return self._guarded(
            cluster, "rbac", lambda _: sync_rbac(self.r, self._client(cluster, "rbac"), self.kinds)
        )

    def _guarded(
        self, cluster: str, what: str, run: Callable[[ClusterLock], SyncResult]
    ) -> SyncResult:
        """Run a sync of a registered cluster under its lock. A cluster removed from the
        registry while it synced has the keys this sync wrote deleted again."""
        if not self.r.hexists(keys.CLUSTERS, cluster):
            return SyncResult(cluster, what, error="cluster is not registered")
        try:
            with ClusterLock(self.r, cluster, self.settings.lock_ttl_s, what) as lock:
                return run(lock)
        finally:
            if not self.r.hexists(keys.CLUSTERS, cluster):
                store.delete_cluster(self.r, cluster)

    def reconcile(self) -> registry.Reconciled:
        """Re-read the configured clusters and mirror them into Redis."""
        result = registry.reconcile(self.r, self.source.configs(refresh=True))
        if result.changed:
            log.info(
                "registry: %d added, %d removed, %d updated",
                len(result.added),
                len(result.removed),
                len(result.updated),
            )
        return result

    def registered(self) -> list[str]:
        from common.index.syncstatus import registered_clusters

        return registered_clusters(self.r)


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
            missing = [SyncResult(name, w, error="cluster is not configured") for w in _WHAT]
            outcomes.append(ClusterOutcome(name, *missing))
        clusters = [n for n in clusters if n in only]
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        outcomes.extend(pool.map(lambda name: _both(c, name), clusters))
    return outcomes


_WHAT = ("objects", "rbac")


def _both(c: Collector, cluster: str) -> ClusterOutcome:
    return ClusterOutcome(
        cluster, _run(c.sync_objects, cluster, "objects"), _run(c.sync_rbac, cluster, "rbac")
    )


def _run(job: Callable[[str], SyncResult], cluster: str, what: str) -> SyncResult:
    try:
        return job(cluster)
    except Exception as e:  # recorded in Redis by the sync; reported in the summary
        return SyncResult(cluster, what, error=error_text(e))
