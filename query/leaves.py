"""Leaf API clients of the query service, one per cluster, from the registry's kubeconfigs.

Configs are loaded with common.leaf.registry (the collector's loader) and reloaded when `fs:version`
moves (the collector bumps it on registry changes) or an unknown cluster is asked for. A client
is built (its kubeconfig loaded, an exec plugin run) outside the pool's lock: a slow or hung
plugin holds up only the detail reads of its own cluster.

A client holds its cluster's open TLS connections, about 50-150 KiB each with its TLS context.
One no detail read used since the sweep before the last (common.index.read.memo.sweep_idle,
every `FLEETSCOPE_QUERY_MEMO_IDLE_S / 2`) is closed and dropped, so a worker holds the clients
of the clusters it was asked about lately, not of every cluster it was ever asked about: at L
(200 clusters) the latter filled a worker's heap by about 30 MiB over the soak's first fifteen
minutes, and it grows with the fleet.
"""

from __future__ import annotations

import threading
import time
import weakref

import redis

from common.errors import UpstreamError
from common.index.read import memo
from common.index.registry_record import read_records
from common.leaf import registry
from common.leaf.client import ClusterConfig, LeafClient
from common.settings import Settings
from query import metrics

RELOAD_MIN_INTERVAL_S = 5.0
_pools: weakref.WeakSet[LeafPool] = weakref.WeakSet()
"""Every pool of the process (one per app): `fleetscope_query_leaf_clients` counts them all."""


def clients_held() -> int:
    """The leaf clients every pool of the process holds."""
    return sum(len(p) for p in list(_pools))


class LeafPool:
    """Leaf clients per cluster from the registry's kubeconfigs; reloaded on registry change."""

    def __init__(self, settings: Settings, r: redis.Redis | None = None) -> None:
        self.settings = settings
        self.r = r  # the registry's records: a name two sources claim stays with the registered
        self._configs: dict[str, ClusterConfig] = {}
        self._clients: dict[str, LeafClient] = {}
        self._used: dict[str, int] = {}  # cluster -> the sweep round of its client's last use
        self._version: object = object()
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()
        self.dropped = 0  # idle clients closed (`drop_idle`)
        memo.track(self)
        _pools.add(self)

    def client(self, cluster: str, version: object) -> LeafClient:
        with self._lock:
            stale = version != self._version
            missing = cluster not in self._configs
            if stale or (missing and time.monotonic() - self._loaded_at > RELOAD_MIN_INTERVAL_S):
                self._reload(version)
            config = self._configs.get(cluster)
            if config is None:
                raise UpstreamError(f"this query service has no credentials for cluster {cluster}")
            current = self._clients.get(cluster)
            if current is not None and _same(current.config, config):
                self._used[cluster] = memo.sweep_round()
                return current
        # Outside the lock: loading may run an exec plugin (its config's own lock serialises
        # the loads of one cluster; a second client built meanwhile is simply dropped).
        built = LeafClient(config, timeout_s=self.settings.leaf_timeout_s)
        with self._lock:
            current = self._clients.get(cluster)
            if current is not None and _same(current.config, config):
                built.close()
                return current
            if _same(self._configs.get(cluster), config):
                self._clients[cluster] = built
                self._used[cluster] = memo.sweep_round()
                metrics.LEAF_CLIENTS.set(clients_held())
            return built

    def drop_idle(self, before: int) -> int:
        """Close and drop the clients last used before sweep round `before` (memo.sweep_idle);
        how many went. A request still holding one finishes on it (a closed client opens a
        new connection if it is asked again)."""
        with self._lock:
            idle = [c for c, used in self._used.items() if used < before]
            gone = [self._clients.pop(c) for c in idle if c in self._clients]
            for c in idle:
                del self._used[c]
            metrics.LEAF_CLIENTS.set(clients_held())
        for client in gone:
            client.close()
        self.dropped += len(gone)
        return len(gone)

    def __len__(self) -> int:
        """The clients held."""
        return len(self._clients)

    def _reload(self, version: object) -> None:
        registered = {} if self.r is None else read_records(self.r)
        self._configs = registry.load_cluster_configs(self.settings, registered=registered)
        self._clients = {c: v for c, v in self._clients.items() if c in self._configs}
        self._used = {c: u for c, u in self._used.items() if c in self._clients}
        metrics.LEAF_CLIENTS.set(clients_held())
        self._version, self._loaded_at = version, time.monotonic()


def _same(a: ClusterConfig | None, b: ClusterConfig) -> bool:
    """The same cluster with the same kubeconfig (equality of configs ignores the kubeconfig
    itself, so a rotated token would otherwise keep the old client)."""
    return a is not None and a == b and a.kubeconfig == b.kubeconfig
