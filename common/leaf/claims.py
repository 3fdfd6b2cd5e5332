"""What every registry source yields and the helpers they share: a `Claim` (a name, where it comes
from, a kubeconfig, whether it is ready), cluster names (the `fleetscope.io/cluster-name` label
rule), the namespaces a source reads, refused credentials, and reading Secrets, kubeconfigs and
conditions off management objects.

Both the registry (common.leaf.registry) and its management sources (common.leaf.sources) import
this module; the sources never import the registry.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from common.errors import ClusterError
from common.index import keys
from common.index.registry_record import Problem, Record
from common.leaf.client import ClusterConfig
from common.leaf.management import Obj
from common.settings import namespace_list

log = logging.getLogger(__name__)
NAME_LABEL = "fleetscope.io/cluster-name"


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


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: ~14x less CPU a kubeconfig than the pure-Python
one, and every kubeconfig is read again each `registry_interval_s` (collector, watcher)."""


def parse_kubeconfig(content: bytes, origin: str) -> dict[str, Any]:
    try:
        data = yaml.load(content, Loader=_LOADER)  # a safe loader (libyaml or not)
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
