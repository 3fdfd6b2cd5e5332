"""The cluster registry: which leaf clusters exist, from every configured source, settled into
one name each and mirrored into `fs:clusters` (no credentials) by `reconcile`.

Sources, in this order: the kubeconfig directory, fleetscope's labelled Secrets, and on the
management cluster Weave GitOps `GitopsCluster`s (common.leaf.sources.gitops), Cluster API
`Cluster`s (common.leaf.sources.capi) and Argo CD cluster Secrets (common.leaf.sources.argocd), each
switched on by a setting; nothing is read from the management cluster for a source that is off.
Each source yields `Claim`s: a name, where it comes from, a kubeconfig, and whether it is ready.

Names (docs/operations.md): a file's stem; a Secret's name; `<namespace>.<name>` for
GitopsCluster and Cluster API objects; Argo CD's cluster `name`. The label
`fleetscope.io/cluster-name` overrides the rule only on objects in the namespaces of
`FLEETSCOPE_CLUSTER_NAME_LABEL_NAMESPACES`. A name claimed by two sources is a conflict, refused
for both until an operator resolves it: a registered cluster stays registered (its data kept)
but not ready, a new one is not registered; claims that read the very same kubeconfig Secret
are one cluster. Each source reads the namespaces its setting names (`*`: all of them).

Kubeconfigs from the management cluster are data (common.leaf.credentials): one holding anything
but inline credentials registers its cluster as not ready with the refused field as its
`error`, checked here once for every management source, and again when it would be loaded.

A cluster leaves the registry when its file or object goes away; `reconcile` then deletes its
rows, grants and status. A source that cannot be read keeps its clusters as they were. An
unreadable kubeconfig keeps its cluster registered (its syncs fail, its last rows stay) rather
than deleting its data on a typo; a not-ready cluster is registered but never synced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import redis

from common.errors import ClusterError, ClusterUnreachable, ConfigError
from common.index import keys
from common.index.registry_record import Problem, Record, encode_problems
from common.index.write import store
from common.leaf.claims import (
    Claim,
    Claims,
    claim_name,
    parse_kubeconfig,
    refuse_credentials,
    refused_problem,
    revision,
    secret_value,
    source_namespaces,
)
from common.leaf.client import ClusterConfig
from common.leaf.management import Management
from common.leaf.sources import argocd, capi, gitops
from common.redis_client import text
from common.settings import Settings

log = logging.getLogger(__name__)
SECRET_LABEL = "fleetscope.io/cluster=true"
SECRET_KEY = "kubeconfig"
MANAGEMENT_SOURCES = ("secret", "gitopscluster", "capi", "argocd")


Loader = Callable[[Management, Settings], tuple[list[Claim], list[Problem]]]


def _loaders() -> dict[str, Loader]:
    return {
        "secret": load_secrets,
        "gitopscluster": gitops.load,
        "capi": capi.load,
        "argocd": argocd.load,
    }


def enabled_sources(settings: Settings) -> list[str]:
    """The management-cluster sources switched on (none: the management cluster is not read)."""
    switches = {
        "secret": settings.cluster_secrets,
        "gitopscluster": settings.gitopsclusters,
        "capi": settings.capi_clusters,
        "argocd": settings.argocd_clusters,
    }
    return [s for s in MANAGEMENT_SOURCES if switches[s]]


def load_claims(settings: Settings, management: Management | None = None) -> Claims:
    """Every source's claims. A management-cluster source that fails (unreachable, refused)
    is reported and listed in `failed`; the others are read all the same."""
    out = Claims()
    if settings.clusters_dir:
        out.claims += Claims.of(load_dir(settings.clusters_dir, settings.exec_timeout_s)).claims
    sources = enabled_sources(settings)
    if not sources:
        return out
    mgmt = management or Management.connect(settings)
    mgmt.forget()
    loaders = _loaders()
    try:
        for source in sources:
            try:
                claims, problems = loaders[source](mgmt, settings)
            except (ClusterUnreachable, ClusterError) as e:
                out.failed.add(source)
                out.problems.append(Problem("source-error", f"{source}: {e}", source=source))
                continue
            checked = [refuse_credentials(c) for c in claims]
            out.claims += checked
            out.problems += problems + [refused_problem(c) for c in checked if c.error]
    finally:
        if management is None:
            mgmt.close()
    return out


def load_cluster_configs(
    settings: Settings,
    management: Management | None = None,
    registered: Mapping[str, Record] | None = None,
) -> dict[str, ClusterConfig]:
    """The clusters to talk to: settled, ready, by name. Without `registered` (the records in
    Redis) a conflicting name has no config here."""
    settled, _ = settle(load_claims(settings, management).claims, registered or {})
    return {n: c.config for n, c in settled.items() if c.ready and c.config is not None}


def settle(
    claims: Iterable[Claim], registered: Mapping[str, Record]
) -> tuple[dict[str, Claim], list[Problem]]:
    """One claim per name. Claims reading the same kubeconfig Secret are one cluster (the first
    source's). Otherwise a name with several claims is a conflict, refused for all of them: the
    registered cluster stays registered (its data kept) but not ready, a new one is not
    registered, until the claims are renamed or removed."""
    by_name: dict[str, list[Claim]] = {}
    for claim in claims:
        group = by_name.setdefault(claim.name, [])
        if not any(claim.credentials and claim.credentials == c.credentials for c in group):
            group.append(claim)
    settled: dict[str, Claim] = {}
    problems: list[Problem] = []
    for name, group in by_name.items():
        if len(group) == 1:
            settled[name] = group[0]
            continue
        current = registered.get(name)
        keep = next(
            (
                c
                for c in group
                if current and (c.source, c.origin) == (current.source, current.origin)
            ),
            None,
        )
        origins = tuple(c.origin for c in group)
        message = (
            f"cluster name {name} is claimed by {' and '.join(origins)}; refused for all of "
            "them until one claim is renamed or removed"
        )
        if keep is not None:
            message += f" ({keep.origin} stays registered, not ready, its data kept)"
            settled[name] = replace(
                keep, config=None, not_ready=message, conflict=message, server=keep.record().server
            )
        else:
            message += "; none is registered"
        problems.append(Problem("conflict", message, cluster=name, origins=origins))
    return settled, problems


# -- the kubeconfig directory and fleetscope's Secrets ------------------------------------


def load_dir(directory: str, exec_timeout_s: float = 30.0) -> dict[str, ClusterConfig]:
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
        kubeconfig = parse_kubeconfig(path.read_bytes(), str(path))
        configs[name] = ClusterConfig(
            name, "dir", str(path), kubeconfig, str(root.resolve()), exec_timeout_s=exec_timeout_s
        )
    return configs


def load_secrets(mgmt: Management, settings: Settings) -> tuple[list[Claim], list[Problem]]:
    """Clusters from Secrets labelled `fleetscope.io/cluster=true` (key `kubeconfig`) in the
    namespaces of `FLEETSCOPE_CLUSTER_SECRETS_NAMESPACE`."""
    claims: list[Claim] = []
    problems: list[Problem] = []
    setting = "FLEETSCOPE_CLUSTER_SECRETS_NAMESPACE"
    for namespace in source_namespaces(settings.cluster_secrets_namespace, setting, "secret"):
        for secret in mgmt.list_objects("v1", "secrets", namespace, SECRET_LABEL):
            meta = secret.get("metadata") or {}
            origin = f"secret {meta.get('namespace', namespace)}/{meta.get('name')}"
            name = claim_name(
                meta,
                str(meta.get("name", "")),
                "secret",
                origin,
                settings.cluster_name_label_namespaces,
            )
            if isinstance(name, Problem):
                log.warning("skipping %s", name.message)
                continue
            kubeconfig = parse_kubeconfig(secret_value(secret, SECRET_KEY) or b"", origin)
            config = ClusterConfig(name, "secret", origin, kubeconfig)
            claims.append(Claim(name, "secret", origin, config, revision=revision(secret)))
    return claims, problems


# -- reconcile ------------------------------------------------------------------------------


def entry(config: ClusterConfig) -> str:
    """The `fs:clusters` value of a ready cluster: where it comes from, never its credentials."""
    return Claim(config.name, config.source, config.origin, config).record().encode()


@dataclass(frozen=True)
class Reconciled:
    added: list[str]
    removed: list[str]
    updated: list[str]
    not_ready: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.updated)

    @property
    def to_sync(self) -> list[str]:
        """Added or changed (a rotated token, a cluster that became ready) and ready now."""
        return [n for n in self.added + self.updated if n not in self.not_ready]


def reconcile(r: redis.Redis, claims: Claims | Mapping[str, ClusterConfig]) -> Reconciled:
    """Make `fs:clusters` mirror the settled claims, delete the data of clusters that left,
    and store the registry's problems (logged once, when they change)."""
    if not isinstance(claims, Claims):
        claims = Claims.of(claims)
    raw = {text(k): text(v) for k, v in r.hgetall(keys.CLUSTERS).items()}
    current = {name: Record.decode(value) for name, value in raw.items()}
    settled, conflicts = settle(claims.claims, current)
    desired = {name: claim.record().encode() for name, claim in settled.items()}
    for name, rec in current.items():  # a source that could not be read keeps its clusters
        if rec.source in claims.failed:
            desired[name] = raw[name]
    added = sorted(set(desired) - set(raw))
    removed = sorted(set(raw) - set(desired))
    updated = sorted(n for n in set(desired) & set(raw) if desired[n] != raw[n])
    for name in added + updated:
        r.hset(keys.CLUSTERS, name, desired[name])
        store.mark_pending(r, name)
    for name in removed:
        r.hdel(keys.CLUSTERS, name)
        store.delete_cluster(r, name)
        log.info("cluster left the registry; its data is deleted", extra={"cluster": name})
    _store_problems(r, claims.problems + conflicts)
    not_ready = sorted(n for n, c in settled.items() if not c.ready)
    result = Reconciled(added, removed, updated, not_ready)
    if result.changed:
        r.incr(keys.VERSION)
    return result


def _store_problems(r: redis.Redis, problems: list[Problem]) -> None:
    encoded = encode_problems(problems)
    if text(r.get(keys.REGISTRY_PROBLEMS) or "") == encoded:
        return
    r.set(keys.REGISTRY_PROBLEMS, encoded)
    for problem in problems:
        log.warning("cluster registry: %s", problem.message, extra={"cluster": problem.cluster})
