"""A per-process cache of cluster configs and leaf clients for the collector.

Claims are re-read at most every `registry_interval_s`; a cluster whose kubeconfig did not
change keeps its ClusterConfig and LeafClient (loaded token, exec plugin result, open
connections), so a sync does not re-run exec plugins or reconnect, while a rotated token is
used from the next re-read on. A management-cluster source that cannot be read keeps the claims
it had. Only ready clusters have a config; a name two sources claim goes to the one registered
in Redis (`fs:clusters`), as `common.leaf.registry.reconcile` decides.

A leaf client not asked for within `idle_s` of a `close_idle` call has its connections closed
and is dropped (its config, with the loaded credentials, stays): a Celery child that syncs a
cluster every ten minutes (a watched one, `FLEETSCOPE_SYNC_WATCHED_INTERVAL_S`) does not hold
a TLS connection to it meanwhile, nor the ~55 KiB each client's pool and connection take (11 MiB
for 200 clusters, which a child reached one cluster at a time over a whole run).
"""

from __future__ import annotations

import threading
import time

import redis

from common.errors import ClusterError
from common.index.registry_record import Record, read_records
from common.leaf import claims, registry
from common.leaf.client import ClusterConfig, LeafClient
from common.leaf.management import Management
from common.settings import Settings


class ClusterSource:
    def __init__(
        self,
        settings: Settings,
        management: Management | None = None,
        r: redis.Redis | None = None,
    ) -> None:
        self.settings = settings
        self.r = r
        self._management = management
        self._own_management = management is None
        self._claims = claims.Claims()
        self._configs: dict[str, ClusterConfig] = {}
        self._clients: dict[str, LeafClient] = {}
        self._used: dict[str, float] = {}  # name -> monotonic time `client` last gave it out
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()

    def configs(self, refresh: bool = False) -> dict[str, ClusterConfig]:
        """The clusters to sync (re-read when older than `registry_interval_s`)."""
        with self._lock:
            self._maybe_reload(refresh)
            return dict(self._configs)

    def claims(self, refresh: bool = False) -> claims.Claims:
        """What the sources say (for `registry.reconcile`), re-read like `configs`."""
        with self._lock:
            self._maybe_reload(refresh)
            return self._claims

    def _maybe_reload(self, refresh: bool) -> None:
        if refresh or time.monotonic() - self._loaded_at > self.settings.registry_interval_s:
            self._reload()

    def _reload(self) -> None:
        claims = registry.load_claims(self.settings, self._mgmt())
        kept = [c for c in self._claims.claims if c.source in claims.failed]
        claims.claims += kept  # an unreadable source keeps what it had
        settled, _ = registry.settle(claims.claims, self._registered())
        kept_configs: dict[str, ClusterConfig] = {}
        for name, claim in settled.items():
            cfg = claim.config
            if not claim.ready or cfg is None:
                continue
            old = self._configs.get(name)
            same = old is not None and old.kubeconfig == cfg.kubeconfig and old == cfg
            kept_configs[name] = old if same and old is not None else cfg
        for name, client in list(self._clients.items()):
            if kept_configs.get(name) is not client.config:
                client.close()
                del self._clients[name]
        self._claims, self._configs = claims, kept_configs
        self._loaded_at = time.monotonic()

    def _mgmt(self) -> Management | None:
        """The management cluster client, made on first need (none while no source is on)."""
        if self._management is None and registry.enabled_sources(self.settings):
            self._management = Management.connect(self.settings)
        return self._management

    def _registered(self) -> dict[str, Record]:
        return {} if self.r is None else read_records(self.r)

    def client(self, name: str) -> LeafClient:
        """The leaf client of a configured cluster (ClusterError when it is not configured)."""
        configs = self.configs()
        if name not in configs:
            configs = self.configs(refresh=True)
        if name not in configs:
            raise ClusterError(f"cluster {name} is not configured (any more)")
        with self._lock:
            self._used[name] = time.monotonic()
            client = self._clients.get(name)
            if client is not None:
                return client
        # Built outside the lock: loading may run an exec plugin, which must hold up no other
        # cluster (the config's own lock serialises the loads of this one).
        built = LeafClient(
            configs[name], self.settings.leaf_timeout_s, self.settings.leaf_page_size
        )
        with self._lock:
            client = self._clients.get(name)
            if client is not None:
                built.close()
                return client
            if self._configs.get(name) is configs[name]:
                self._clients[name] = built
            return built

    def close_idle(self, idle_s: float, now: float | None = None) -> list[str]:
        """Close and drop the leaf clients not asked for within `idle_s` (monotonic `now`);
        returns their names. One still in use by a long sync keeps working: its pool opens a
        connection again on its next request."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [n for n in self._clients if now - self._used.get(n, now) >= idle_s]
            dropped = [self._clients.pop(n) for n in idle]
            for n in idle:
                self._used.pop(n, None)
        for client in dropped:
            client.close()
        return idle

    def held(self) -> list[str]:
        """The clusters whose leaf client is kept now, sorted."""
        with self._lock:
            return sorted(self._clients)

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
            self._used.clear()
            if self._management is not None and self._own_management:
                self._management.close()
                self._management = None
