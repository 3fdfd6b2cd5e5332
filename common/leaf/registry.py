"""The cluster registry: which leaf clusters exist, from a kubeconfig directory and from Secrets
on the management cluster, mirrored into `fs:clusters` (no credentials) by `reconcile`.

A cluster leaves the registry when its file or Secret goes away; `reconcile` then deletes its
rows, grants and status. An unreadable kubeconfig keeps its cluster registered (the sync fails
and the last good rows stay, marked stale) rather than deleting its data on a typo.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import yaml

from common.errors import ClusterUnreachable, ConfigError
from common.index import keys, store
from common.leaf.client import ClusterConfig
from common.redis_client import text
from common.settings import Settings

log = logging.getLogger(__name__)
SECRET_LABEL = "fleetscope.io/cluster=true"
NAME_LABEL = "fleetscope.io/cluster-name"
SECRET_KEY = "kubeconfig"


def load_cluster_configs(settings: Settings, core_api: Any = None) -> dict[str, ClusterConfig]:
    """Every configured cluster: the directory's first, then Secrets (if enabled)."""
    configs = load_dir(settings.clusters_dir) if settings.clusters_dir else {}
    if settings.cluster_secrets:
        api = core_api if core_api is not None else management_api(settings)
        for name, cfg in load_secrets(api, settings.cluster_secrets_namespace).items():
            if name in configs:
                log.warning("cluster %s is both a file and a Secret; using the file", name)
                continue
            configs[name] = cfg
    return configs


def load_dir(directory: str) -> dict[str, ClusterConfig]:
    """One cluster per kubeconfig file (name = file name without extension; dotfiles skipped)."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"FLEETSCOPE_CLUSTERS_DIR {directory!r} is not a directory")
    configs: dict[str, ClusterConfig] = {}
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        name = path.stem
        if not keys.valid_cluster_name(name):
            log.warning("skipping %s: %r is not a valid cluster name", path.name, name)
            continue
        kubeconfig = _parse_yaml(path.read_bytes(), str(path))
        configs[name] = ClusterConfig(name, "dir", str(path), kubeconfig, str(root.resolve()))
    return configs


def load_secrets(core_api: Any, namespace: str) -> dict[str, ClusterConfig]:
    """Clusters from Secrets labelled `fleetscope.io/cluster=true` (key `kubeconfig`)."""
    try:
        secrets = core_api.list_namespaced_secret(namespace, label_selector=SECRET_LABEL)
    except Exception as e:  # the kubernetes client raises ApiException, urllib3 errors, ...
        raise ClusterUnreachable(
            f"cannot list cluster Secrets in namespace {namespace}: {type(e).__name__}"
        ) from None
    configs: dict[str, ClusterConfig] = {}
    for secret in secrets.items:
        meta = secret.metadata
        name = (meta.labels or {}).get(NAME_LABEL) or meta.name
        origin = f"secret {namespace}/{meta.name}"
        if not keys.valid_cluster_name(name):
            log.warning("skipping %s: %r is not a valid cluster name", origin, name)
            continue
        raw = (secret.data or {}).get(SECRET_KEY, "")
        try:
            content = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            content = b""
        configs[name] = ClusterConfig(name, "secret", origin, _parse_yaml(content, origin))
    return configs


def management_api(settings: Settings) -> Any:
    """A CoreV1Api for the management cluster (kubeconfig file, else in-cluster account)."""
    from kubernetes import client, config

    try:
        if settings.management_kubeconfig:
            api_client = config.new_client_from_config(settings.management_kubeconfig)  # type: ignore[no-untyped-call]
        else:
            configuration = client.Configuration()
            config.load_incluster_config(configuration)  # type: ignore[no-untyped-call]
            api_client = client.ApiClient(configuration)
    except (config.ConfigException, OSError) as e:
        raise ConfigError(
            f"cannot load the management cluster config: {type(e).__name__}; set "
            "FLEETSCOPE_MANAGEMENT_KUBECONFIG or run in-cluster"
        ) from None
    return client.CoreV1Api(api_client)


def _parse_yaml(content: bytes, origin: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError:
        data = None
    if not isinstance(data, dict):
        log.warning(
            "kubeconfig from %s is not a YAML mapping; its cluster will fail to sync", origin
        )
        return {}
    return data


def entry(config: ClusterConfig) -> str:
    """The `fs:clusters` value of a cluster: where it comes from, never its credentials."""
    parts = urlsplit(config.server)
    netloc = parts.netloc.rpartition("@")[2]  # drop any user:password@ in the URL
    server = urlunsplit(parts._replace(netloc=netloc))
    return json.dumps({"source": config.source, "origin": config.origin, "server": server})


@dataclass(frozen=True)
class Reconciled:
    added: list[str]
    removed: list[str]
    updated: list[str]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.updated)


def reconcile(r: redis.Redis, configs: dict[str, ClusterConfig]) -> Reconciled:
    """Make `fs:clusters` mirror `configs`; delete the data of clusters that left."""
    current = {text(k): text(v) for k, v in r.hgetall(keys.CLUSTERS).items()}
    desired = {name: entry(cfg) for name, cfg in configs.items()}
    added = sorted(set(desired) - set(current))
    removed = sorted(set(current) - set(desired))
    updated = sorted(n for n in set(desired) & set(current) if desired[n] != current[n])
    for name in added + updated:
        r.hset(keys.CLUSTERS, name, desired[name])
        store.mark_pending(r, name)
    for name in removed:
        r.hdel(keys.CLUSTERS, name)
        store.delete_cluster(r, name)
        log.info("cluster left the registry; its data is deleted", extra={"cluster": name})
    result = Reconciled(added, removed, updated)
    if result.changed:
        r.incr(keys.VERSION)
    return result
