"""The cluster registry: which leaf clusters exist, from every configured source, settled into
one name each and mirrored into `fs:clusters` (no credentials) by `reconcile`.

Sources, in this order: the kubeconfig directory, fleetscope's labelled Secrets, and on the
management cluster Weave GitOps `GitopsCluster`s (common.registry_gitops), Cluster API
`Cluster`s (common.registry_capi) and Argo CD cluster Secrets (common.registry_argocd), each
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

import base64
import binascii
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import yaml

from common.errors import ClusterError, ClusterUnreachable, ConfigError
from common.index import keys, store
from common.index.registry_record import Problem, Record, encode_problems
from common.leaf.client import ClusterConfig
from common.leaf.management import Management, Obj
from common.redis_client import text
from common.settings import Settings, namespace_list

log = logging.getLogger(__name__)
SECRET_LABEL = "fleetscope.io/cluster=true"
NAME_LABEL = "fleetscope.io/cluster-name"
SECRET_KEY = "kubeconfig"
MANAGEMENT_SOURCES = ("secret", "gitopscluster", "capi", "argocd")


@dataclass(frozen=True)
class Claim:
    """One source saying "cluster `name` is reached with `config`"."""

    name: str
    source: str  # dir | secret | gitopscluster | capi | argocd
    origin: str  # the file or object, e.g. "gitopscluster fleet/prod-eu"
    config: ClusterConfig | None  # None: no usable kubeconfig yet (then not ready)
    not_ready: str = ""  # why fleetscope must not sync it ("" = ready)
    revision: str = ""  # resourceVersion(s) of what holds the credentials
    credentials: str = ""  # the Secret the kubeconfig was read from (same Secret = same cluster)
    server: str = ""  # the API server when there is no config
    conflict: str = ""  # set by `settle` on a registered claim refused for a conflict
    error: str = ""  # its credentials were refused (the field), set by `load_claims`

    @property
    def ready(self) -> bool:
        return not self.not_ready and self.config is not None

    def record(self) -> Record:
        url = urlsplit(self.config.server if self.config is not None else self.server)
        netloc = url.netloc.rpartition("@")[2]  # drop any user:password@ in the URL
        return Record(
            source=self.source,
            origin=self.origin,
            server=urlunsplit(url._replace(netloc=netloc)),
            ready=self.ready,
            reason=self.not_ready or ("" if self.config is not None else "no kubeconfig"),
            conflict=self.conflict,
            revision=self.revision,
            error=self.error,
        )


@dataclass
class Claims:
    """What the sources said in one round, and what went wrong."""

    claims: list[Claim] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)  # sources that could not be read

    @classmethod
    def of(cls, configs: Mapping[str, ClusterConfig]) -> Claims:
        return cls([Claim(n, c.source, c.origin, c) for n, c in configs.items()])


Loader = Callable[[Management, Settings], tuple[list[Claim], list[Problem]]]


def _loaders() -> dict[str, Loader]:
    from common.leaf import registry_argocd, registry_capi, registry_gitops

    return {
        "secret": load_secrets,
        "gitopscluster": registry_gitops.load,
        "capi": registry_capi.load,
        "argocd": registry_argocd.load,
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


# -- credentials ------------------------------------------------------------------------


def refuse_credentials(claim: Claim) -> Claim:
    """The claim, not ready with the refused field as its `error` when its kubeconfig holds
    more than inline material (nothing of it is run or read)."""
    if claim.config is None or claim.error:  # no kubeconfig, or refused by its source already
        return claim
    reason = claim.config.refused()
    if not reason:
        return claim
    return replace(claim, not_ready=reason, error=reason)


def refused_problem(claim: Claim) -> Problem:
    return Problem(
        "refused-credentials",
        f"{claim.origin}: {claim.error}",
        cluster=claim.name,
        source=claim.source,
        origins=(claim.origin,),
    )


def source_namespaces(value: str | tuple[str, ...], setting: str, source: str) -> list[str]:
    """The namespaces a source reads ("" = all, only for `*`); a ClusterError when none."""
    names = namespace_list(value)
    if names == ("*",):
        return [""]
    if not names:
        raise ClusterError(
            f"{setting} names no namespace: list the namespaces to read {source} registrations "
            "from (comma-separated), or `*` for all (anyone who can write there registers "
            "clusters)"
        )
    return list(names)


# -- names ------------------------------------------------------------------------------


def qualified(namespace: str, name: str) -> str:
    """The name of a cluster registered by a namespaced object: `<namespace>.<name>`
    (namespaces hold no dots, so the first dot splits it back)."""
    return f"{namespace}.{name}"


def claim_name(
    meta: Obj,
    default: str,
    source: str,
    origin: str,
    label_namespaces: str | tuple[str, ...] = (),
) -> str | Problem:
    """The label `fleetscope.io/cluster-name`, honoured only on objects in `label_namespaces`
    (`FLEETSCOPE_CLUSTER_NAME_LABEL_NAMESPACES`; `*` = all), else `default`; a Problem when
    the name is not valid."""
    label = str((meta.get("labels") or {}).get(NAME_LABEL) or "")
    allowed = namespace_list(label_namespaces)
    honoured = bool(label) and ("*" in allowed or str(meta.get("namespace", "")) in allowed)
    name = label if honoured else default
    if label and not honoured:
        log.debug("%s: label %s ignored outside its allowed namespaces", origin, NAME_LABEL)
    if keys.valid_cluster_name(name):
        return name
    return Problem(
        "invalid-name",
        f"{origin}: {name[:80]!r} is not a cluster name (lower-case letters, digits, '.', '-', "
        f"'_', at most 63); set the label {NAME_LABEL} on it",
        source=source,
        origins=(origin,),
    )


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


# -- helpers for the sources --------------------------------------------------------------


def secret_value(secret: Obj, key: str) -> bytes | None:
    """The decoded value of one key of a Secret; None when absent or not base64."""
    raw = (secret.get("data") or {}).get(key)
    if raw is None:
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return b""


def revision(*objects: Obj | None) -> str:
    """The resourceVersions of `objects`: a record changes when any of them does."""
    return ",".join(str((o.get("metadata") or {}).get("resourceVersion", "")) for o in objects if o)


def parse_kubeconfig(content: bytes, origin: str) -> dict[str, Any]:
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


def condition(obj: Obj, kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def condition_text(cond: dict[str, Any]) -> str:
    """`Ready=False (Reason): message`, the message cut short."""
    text = f"{cond.get('type')}={cond.get('status')}"
    if cond.get("reason"):
        text += f" ({cond['reason']})"
    message = " ".join(str(cond.get("message") or "").split())
    return f"{text}: {message[:200]}" if message else text


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
