"""A per-process cache of cluster configs and leaf clients for the collector.

Configs are re-read at most every `registry_interval_s`; a cluster whose kubeconfig did not
change keeps its ClusterConfig and LeafClient (loaded token, exec plugin result, open
connections), so a sync does not re-run exec plugins or reconnect.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from common.errors import ClusterError
from common.leaf import registry
from common.leaf.client import ClusterConfig, LeafClient
from common.settings import Settings


class ClusterSource:
    def __init__(self, settings: Settings, core_api: Any = None) -> None:
        self.settings = settings
        self.core_api = core_api
        self._configs: dict[str, ClusterConfig] = {}
        self._clients: dict[str, LeafClient] = {}
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()

    def configs(self, refresh: bool = False) -> dict[str, ClusterConfig]:
        """The configured clusters (re-read when older than `registry_interval_s`)."""
        with self._lock:
            age = time.monotonic() - self._loaded_at
            if refresh or age > self.settings.registry_interval_s:
                self._reload()
            return dict(self._configs)

    def _reload(self) -> None:
        fresh = registry.load_cluster_configs(self.settings, self.core_api)
        kept: dict[str, ClusterConfig] = {}
        for name, cfg in fresh.items():
            old = self._configs.get(name)
            same = old is not None and old.kubeconfig == cfg.kubeconfig
            kept[name] = old if same and old is not None else cfg
        for name, client in list(self._clients.items()):
            if kept.get(name) is not client.config:
                client.close()
                del self._clients[name]
        self._configs = kept
        self._loaded_at = time.monotonic()

    def client(self, name: str) -> LeafClient:
        """The leaf client of a configured cluster (ClusterError when it is not configured)."""
        configs = self.configs()
        if name not in configs:
            configs = self.configs(refresh=True)
        if name not in configs:
            raise ClusterError(f"cluster {name} is not configured (any more)")
        with self._lock:
            client = self._clients.get(name)
            if client is None:
                client = LeafClient(
                    configs[name], self.settings.leaf_timeout_s, self.settings.leaf_page_size
                )
                self._clients[name] = client
            return client

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
