"""A watcher replica: shares the registered clusters with other replicas through Redis leases.

Each cluster's lease (`keys.lease`, a common.lease.Lease under the replica's token) is renewed
every tick, all in one round trip, and released on hand-over. A replica that dies stops
renewing, so another takes its clusters over within the lease TTL plus one tick. Every tick
also follows the registry (`fs:clusters`) and kubeconfig changes, and, while a cluster's watches
are healthy, refreshes its sync status so it is not reported stale.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from collector import watch_metrics
from collector.clusters import ClusterSource
from collector.watch_cluster import ClusterWatch
from collector.watch_rbac import RESOURCES
from common import lease
from common.errors import FleetscopeError, LockBusy
from common.index import keys, store, store_events, syncstatus
from common.kinds.registry import KindRegistry
from common.leaf import registry
from common.leaf.client import LeafClient
from common.settings import Settings

log = logging.getLogger(__name__)
TICKS_PER_TTL = 4
LIST_CONCURRENCY = 4


class WatchReplica:
    """`run(stop)` until `stop` is set; `tick()` is one round of leases (tests call it)."""

    def __init__(
        self,
        settings: Settings,
        r: redis.Redis,
        kinds: KindRegistry,
        source: ClusterSource,
        name: str = "",
        reconcile: bool = False,
    ) -> None:
        self.settings, self.r, self.kinds, self.source = settings, r, kinds, source
        self.token = lease.new_token(name or "watcher")
        self.ttl_ms = lease.ttl_ms(settings.watch_lease_ttl_s)
        self.watches: dict[str, ClusterWatch] = {}
        self.make_client: Callable[[str], LeafClient] = self._client
        # Called after every round, failed ones too: a liveness signal that the loop turns
        # (`fleetscope watch --heartbeat-file`), not that Redis or the leaves are well.
        self.after_tick: Callable[[], None] = lambda: None
        self.reconcile = reconcile
        # Lists are the heavy part (a cluster start or relist): a few at a time per replica.
        self.list_slots = threading.BoundedSemaphore(LIST_CONCURRENCY)
        self._reconciled_at = float("-inf")

    @property
    def tick_s(self) -> float:
        return self.settings.watch_lease_ttl_s / TICKS_PER_TTL

    def run(self, stop: threading.Event) -> None:
        first = True
        try:
            while not stop.is_set():
                try:
                    self.tick()
                    if first:
                        log.info("first round done: watching %d clusters", len(self.watches))
                        first = False
                except (FleetscopeError, redis.RedisError) as e:
                    log.warning("watcher tick failed: %s", e)
                self.after_tick()
                stop.wait(self.tick_s)
        finally:
            self.close()

    def tick(self) -> None:
        lost = self._renew_all()  # first, and in one round trip: the leases matter most
        if (
            self.reconcile
            and time.monotonic() - self._reconciled_at > self.settings.registry_interval_s
        ):
            registry.reconcile(self.r, self.source.claims(refresh=True))
            self._reconciled_at = time.monotonic()
        registered = set(syncstatus.registered_clusters(self.r))
        configs = self.source.configs()
        for name, watch in list(self.watches.items()):
            if name not in registered:
                self.drop(name, release=False)
                if not self.r.hexists(keys.CLUSTERS, name):
                    store.delete_cluster(self.r, name)  # what the last writes put back
                self._lease(name).release()
            elif configs.get(name) is not watch.client.config:
                self.drop(name, release=True)
            elif watch.lost or name in lost:
                log.warning("lost the watch lease", extra={"cluster": name})
                self.drop(name, release=False)
            else:
                self._heartbeat(name, watch)
        for name in sorted(registered - set(self.watches)):
            if name in configs and self._lease(name).acquire():
                self._take(name)
        watch_metrics.LEASES.set(len(self.watches))

    def _renew_all(self) -> set[str]:
        """Renew every owned lease (one pipelined round trip); the names whose lease is gone."""
        held = {name: self._lease(name) for name in self.watches}
        renewed = lease.renew_all(self.r, list(held.values()))
        failed = [name for name, ok in zip(held, renewed, strict=True) if not ok]
        # Expired but not taken (this process was paused past the TTL): nobody else wrote, so
        # taking it again keeps the watch instead of relisting the whole cluster.
        return {name for name in failed if not held[name].acquire()}

    def _take(self, name: str) -> None:
        try:
            client = self.make_client(name)
        except FleetscopeError as e:
            log.warning("cannot watch: %s", e, extra={"cluster": name})
            self._lease(name).release()
            return
        watch = ClusterWatch(
            self.r, client, self.kinds, self.settings, self.fence(name), self.list_slots
        )
        self.watches[name] = watch
        watch.start()
        log.info("watching", extra={"cluster": name})

    def _client(self, name: str) -> LeafClient:
        config = self.source.configs()[name]
        pool = len(self.kinds) + len(RESOURCES) + 2  # one streaming connection per resource
        s = self.settings
        return LeafClient(config, s.leaf_timeout_s, s.leaf_page_size, pool_size=pool)

    def _lease(self, name: str) -> lease.Lease:
        return lease.Lease(self.r, keys.lease(name), self.token, self.ttl_ms)

    def fence(self, name: str) -> lease.Fence:
        return self._lease(name).fence

    def _heartbeat(self, name: str, watch: ClusterWatch) -> None:
        objects, rbac = watch.healthy(), watch.rbac_healthy()
        try:
            store_events.heartbeat(self.r, name, self.fence(name), objects, rbac)
        except LockBusy:
            watch.lost = True

    def drop(self, name: str, release: bool) -> None:
        watch = self.watches.pop(name)
        watch.stop()
        watch.client.close()
        if release:
            self._lease(name).release()
        log.info("stopped watching", extra={"cluster": name})

    def close(self) -> None:
        """Stop every watch and release the leases (a clean hand-over, no TTL wait)."""
        watch_metrics.LEASES.set(0)
        for watch in self.watches.values():
            watch.stop_event.set()  # all at once; the joins below then take one wait at most
        for name in list(self.watches):
            try:
                self.drop(name, release=True)
            except redis.RedisError:
                log.warning("could not release a lease; it expires", extra={"cluster": name})
