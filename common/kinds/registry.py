"""The kind registry: which Kubernetes kinds fleetscope collects, and how each reports status.

Kinds are data. The built-in Flux and Istio kinds are entries below; an operator adds more from
`FLEETSCOPE_KINDS_FILE`, a YAML list of entries with the same fields:

    - group: gateway.networking.k8s.io
      versions: [v1, v1beta1]        # preference order; discovery decides what is served
      kind: HTTPRoute
      plural: httproutes
      status_rule: route             # flux | static | istio | conditions | gateway | route | policy
      namespaced: true               # optional (default true); false for cluster-scoped kinds
      key: HTTPRoute                 # optional: the name used in rows, filters and URLs
      ui_url_template: "https://argo.example/{cluster}/{namespace}/{name}"   # optional

`key` must be unique (it defaults to `kind`); collector, query and kubesim all read this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from common.errors import ConfigError

STATUS_RULES = ("flux", "static", "istio", "conditions", "gateway", "route", "policy")
_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Kind:
    """One collectable kind. Cluster-scoped kinds (`namespaced=False`) become rows with an empty
    namespace, visible only to callers with a cluster-wide grant (as RBAC has it)."""

    group: str
    versions: tuple[str, ...]
    kind: str
    plural: str
    status_rule: str
    key: str = ""
    ui_url_template: str = ""
    namespaced: bool = True

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.kind)

    @property
    def resource(self) -> str:
        """`plural.group`, as RBAC rules and kubectl name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str | None = None) -> str:
        v = version or self.versions[0]
        return f"{self.group}/{v}" if self.group else v


def _flux(group: str, versions: str, kind: str, rule: str = "flux") -> Kind:
    # English plural as the CRDs spell it: GitRepository -> gitrepositories.
    plural = kind.lower()[:-1] + "ies" if kind.endswith("y") else kind.lower() + "s"
    return Kind(group, tuple(versions.split()), kind, plural, rule)


def _istio(group: str, kind: str, plural: str | None = None) -> Kind:
    return Kind(group, ("v1", "v1beta1", "v1alpha3"), kind, plural or kind.lower() + "s", "istio")


_KUSTOMIZE, _HELM = "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"
_SOURCE, _IMAGE = "source.toolkit.fluxcd.io", "image.toolkit.fluxcd.io"
_NOTIFY = "notification.toolkit.fluxcd.io"
_NET, _SEC, _TEL = "networking.istio.io", "security.istio.io", "telemetry.istio.io"
_GW, _KUADRANT = "gateway.networking.k8s.io", "kuadrant.io"


def _gateway_api(
    kind: str, versions: str, rule: str, key: str = "", namespaced: bool = True
) -> Kind:
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    return Kind(_GW, tuple(versions.split()), kind, plural, rule, key, namespaced=namespaced)


def _kuadrant(kind: str, versions: str) -> Kind:
    return Kind(_KUADRANT, tuple(versions.split()), kind, kind.lower()[:-1] + "ies", "policy")


BUILTIN_KINDS: tuple[Kind, ...] = (
    _flux(_KUSTOMIZE, "v1 v1beta2", "Kustomization"),
    _flux(_HELM, "v2 v2beta2 v2beta1", "HelmRelease"),
    _flux(_SOURCE, "v1 v1beta2", "GitRepository"),
    _flux(_SOURCE, "v1 v1beta2", "HelmRepository"),
    _flux(_SOURCE, "v1 v1beta2", "OCIRepository"),
    _flux(_SOURCE, "v1 v1beta2", "Bucket"),
    _flux(_SOURCE, "v1 v1beta2", "HelmChart"),
    _flux(_IMAGE, "v1 v1beta2", "ImageRepository"),
    Kind(_IMAGE, ("v1", "v1beta2"), "ImagePolicy", "imagepolicies", "flux"),
    _flux(_IMAGE, "v1 v1beta2", "ImageUpdateAutomation"),
    _flux(_NOTIFY, "v1beta3 v1beta2", "Alert", "static"),
    _flux(_NOTIFY, "v1beta3 v1beta2", "Provider", "static"),
    _flux(_NOTIFY, "v1 v1beta3", "Receiver"),
    _istio(_NET, "VirtualService"),
    _istio(_NET, "DestinationRule"),
    _istio(_NET, "Gateway"),
    _istio(_NET, "ServiceEntry", "serviceentries"),
    _istio(_NET, "Sidecar"),
    _istio(_NET, "WorkloadEntry", "workloadentries"),
    _istio(_SEC, "AuthorizationPolicy", "authorizationpolicies"),
    _istio(_SEC, "PeerAuthentication", "peerauthentications"),
    _istio(_SEC, "RequestAuthentication", "requestauthentications"),
    _istio(_TEL, "Telemetry", "telemetries"),
    # Gateway API. Its Gateway is keyed `K8sGateway` (as Kiali names it): `Gateway` is Istio's.
    _gateway_api("GatewayClass", "v1 v1beta1", "gateway", namespaced=False),
    _gateway_api("Gateway", "v1 v1beta1", "gateway", key="K8sGateway"),
    _gateway_api("HTTPRoute", "v1 v1beta1", "route"),
    _gateway_api("GRPCRoute", "v1 v1alpha2", "route"),
    _gateway_api("TLSRoute", "v1 v1alpha3 v1alpha2", "route"),
    _gateway_api("TCPRoute", "v1alpha2", "route"),
    _gateway_api("ReferenceGrant", "v1 v1beta1 v1alpha2", "static"),
    # Kuadrant policies (kuadrant.io/v1; TLSPolicy and DNSPolicy were v1alpha1 before 1.0).
    _kuadrant("AuthPolicy", "v1 v1beta3 v1beta2"),
    _kuadrant("RateLimitPolicy", "v1 v1beta3 v1beta2"),
    _kuadrant("DNSPolicy", "v1 v1alpha1"),
    _kuadrant("TLSPolicy", "v1 v1alpha1"),
)


@dataclass(frozen=True)
class KindRegistry:
    """An ordered, immutable set of kinds, looked up by key, by kind or by (group, plural)."""

    kinds: tuple[Kind, ...]
    _by_key: dict[str, Kind] = field(init=False, repr=False, compare=False)
    _by_resource: dict[tuple[str, str], Kind] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key: dict[str, Kind] = {}
        for k in self.kinds:
            if k.key in by_key:
                raise ConfigError(
                    f"kind key {k.key!r} is used twice ({by_key[k.key].resource} and "
                    f"{k.resource}); give one of them a distinct `key:`"
                )
            by_key[k.key] = k
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_by_resource", {(k.group, k.plural): k for k in self.kinds})

    def __iter__(self) -> Iterator[Kind]:
        return iter(self.kinds)

    def __len__(self) -> int:
        return len(self.kinds)

    def keys(self) -> list[str]:
        return [k.key for k in self.kinds]

    def get(self, key: str) -> Kind | None:
        """The kind with this key (`Kustomization`), or None."""
        return self._by_key.get(key)

    def by_resource(self, group: str, plural: str) -> Kind | None:
        return self._by_resource.get((group, plural))

    def with_extra(self, extra: Iterable[Kind]) -> KindRegistry:
        return KindRegistry(self.kinds + tuple(extra))


def builtin_registry() -> KindRegistry:
    return KindRegistry(BUILTIN_KINDS)


def load_registry(kinds_file: str = "") -> KindRegistry:
    """Built-in kinds plus those in `kinds_file` (if set); a bad file raises ConfigError."""
    registry = builtin_registry()
    if not kinds_file:
        return registry
    try:
        data = yaml.safe_load(Path(kinds_file).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"FLEETSCOPE_KINDS_FILE {kinds_file!r} cannot be read: {e}") from e
    if data is None:
        return registry
    if not isinstance(data, list):
        raise ConfigError(f"FLEETSCOPE_KINDS_FILE {kinds_file!r} must hold a YAML list of kinds")
    return registry.with_extra(parse_kind(entry, i) for i, entry in enumerate(data))


def parse_kind(entry: Any, index: int = 0) -> Kind:
    """One entry of the kinds file, validated; errors name the entry and the field."""
    where = f"FLEETSCOPE_KINDS_FILE entry {index}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a mapping with group, versions, kind, plural")
    unknown = set(entry) - {
        "group",
        "versions",
        "kind",
        "plural",
        "status_rule",
        "key",
        "ui_url_template",
    }
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        group, kind, plural = str(entry["group"]), str(entry["kind"]), str(entry["plural"])
        versions = entry["versions"]
    except KeyError as e:
        raise ConfigError(f"{where}: missing field {e.args[0]!r}") from e
    if isinstance(versions, str):
        versions = [versions]
    if not versions or not all(isinstance(v, str) and v for v in versions):
        raise ConfigError(f"{where}: versions must be a non-empty list like [v1, v1beta1]")
    if group and not _DNS_SUBDOMAIN.match(group):
        raise ConfigError(f"{where}: group {group!r} is not a DNS subdomain")
    if not _DNS_SUBDOMAIN.match(plural) or "." in plural:
        raise ConfigError(f"{where}: plural {plural!r} must be lower-case like `httproutes`")
    rule = str(entry.get("status_rule", "conditions"))
    if rule not in STATUS_RULES:
        raise ConfigError(f"{where}: status_rule must be one of {', '.join(STATUS_RULES)}")
    key = str(entry.get("key") or kind)
    if not _KEY_RE.match(key) or not _KEY_RE.match(kind):
        raise ConfigError(f"{where}: kind/key {key!r} must be alphanumeric, starting with a letter")
    template = str(entry.get("ui_url_template") or "")
    if template and not template.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: ui_url_template must be an http(s) URL template")
    return Kind(group, tuple(versions), kind, plural, rule, key, template)
