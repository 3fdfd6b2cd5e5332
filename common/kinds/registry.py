"""The kind registry: which Kubernetes kinds fleetscope collects, and how each reports status.

Kinds are data. The built-in Flux, Istio, Gateway API and Kuadrant kinds are entries below; an
operator adds more from `FLEETSCOPE_KINDS_FILE`, a YAML list of entries with the same fields:

    - group: example.io
      versions: [v1, v1beta1]        # preference order; discovery decides what is served
      kind: Widget
      plural: widgets
      status_rule: conditions        # flux | static | istio | conditions | gateway | route | policy
      namespaced: true               # optional (default true); false for cluster-scoped kinds
      key: Widget                    # optional: the name used in rows, filters and URLs
      ui_url_template: "https://argo.example/{cluster}/{namespace}/{name}"   # optional
      relations: [managedBy]         # optional (default [managedBy]): edge extractors, from
                                     # RELATION_EXTRACTORS (common/kinds/relations.py)

An entry that names a built-in kind (by `key`, or by `kind` when that is a built-in key) only
sets that kind's `ui_url_template`; any other field it gives must match the built-in:

    - {key: HelmRelease, ui_url_template: "https://weave.example/{cluster}/{namespace}/{name}"}

`key` must be unique (it defaults to `kind`); collector, query and kubesim all read this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from common.errors import ConfigError

STATUS_RULES = ("flux", "static", "istio", "conditions", "gateway", "route", "policy")
RELATION_EXTRACTORS = (
    "flux-source",
    "flux-git-source",
    "flux-chart-source",
    "flux-chart-ref",
    "flux-dependsOn",
    "flux-imageRepository",
    "flux-provider",
    "managedBy",
    "istio-gateways",
    "gateway-parents",
    "gateway-class",
    "gateway-backends",
    "policy-targets",
)
"""The names a kind's `relations` may list; common/kinds/relations.py implements each one."""
_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
UI_URL_FIELDS = ("cluster", "namespace", "kind", "name", "apiVersion")
"""The placeholders of `ui_url_template`: the row fields query/static/links.js fills in."""
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_URI_COMPONENT_SAFE = "!'()*"  # with quote's own `_.-~`: what encodeURIComponent leaves alone


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
    relations: tuple[str, ...] = ()
    """Names of its edge extractors (RELATION_EXTRACTORS), run in this order by
    `relations.extract`."""

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

    def ui_url(
        self, cluster: str, namespace: str, name: str, api_version: str | None = None
    ) -> str | None:
        """The object's link from `ui_url_template` (None without one), each value URL-quoted as
        the browser's encodeURIComponent does; `{kind}` is the row's kind (the key) and
        `{apiVersion}` the preferred version unless the served one is given."""
        if not self.ui_url_template:
            return None
        values = {
            "cluster": cluster,
            "namespace": namespace,
            "kind": self.key,
            "name": name,
            "apiVersion": api_version or self.api_version(),
        }
        return _PLACEHOLDER.sub(
            lambda m: quote(values[m[1]], safe=_URI_COMPONENT_SAFE) if m[1] in values else m[0],
            self.ui_url_template,
        )


_MANAGED = ("managedBy",)  # every built-in kind: Flux's kustomize/helm labels name the applier


def _flux(group: str, versions: str, kind: str, rule: str = "flux", edges: str = "") -> Kind:
    # English plural as the CRDs spell it: GitRepository -> gitrepositories.
    plural = kind.lower()[:-1] + "ies" if kind.endswith("y") else kind.lower() + "s"
    relations = (*edges.split(), *_MANAGED)
    return Kind(group, tuple(versions.split()), kind, plural, rule, relations=relations)


def _istio(group: str, kind: str, plural: str | None = None, edges: str = "") -> Kind:
    plural = plural or kind.lower() + "s"
    relations = (*edges.split(), *_MANAGED)
    return Kind(group, ("v1", "v1beta1", "v1alpha3"), kind, plural, "istio", relations=relations)


_KUSTOMIZE, _HELM = "kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"
_SOURCE, _IMAGE = "source.toolkit.fluxcd.io", "image.toolkit.fluxcd.io"
_NOTIFY = "notification.toolkit.fluxcd.io"
_NET, _SEC, _TEL = "networking.istio.io", "security.istio.io", "telemetry.istio.io"
_GW, _KUADRANT = "gateway.networking.k8s.io", "kuadrant.io"


def _gateway_api(
    kind: str, versions: str, rule: str, key: str = "", namespaced: bool = True, edges: str = ""
) -> Kind:
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    relations = (*edges.split(), *_MANAGED)
    return Kind(_GW, tuple(versions.split()), kind, plural, rule, key, "", namespaced, relations)


def _kuadrant(kind: str, versions: str) -> Kind:
    plural, relations = kind.lower()[:-1] + "ies", ("policy-targets", *_MANAGED)
    return Kind(_KUADRANT, tuple(versions.split()), kind, plural, "policy", relations=relations)


_ROUTE_EDGES = "gateway-parents gateway-backends"


BUILTIN_KINDS: tuple[Kind, ...] = (
    _flux(_KUSTOMIZE, "v1 v1beta2", "Kustomization", edges="flux-source flux-dependsOn"),
    _flux(
        _HELM,
        "v2 v2beta2 v2beta1",
        "HelmRelease",
        edges="flux-chart-source flux-chart-ref flux-dependsOn",
    ),
    _flux(_SOURCE, "v1 v1beta2", "GitRepository"),
    _flux(_SOURCE, "v1 v1beta2", "HelmRepository"),
    _flux(_SOURCE, "v1 v1beta2", "OCIRepository"),
    _flux(_SOURCE, "v1 v1beta2", "Bucket"),
    _flux(_SOURCE, "v1 v1beta2", "HelmChart", edges="flux-source"),
    _flux(_IMAGE, "v1 v1beta2", "ImageRepository"),
    Kind(
        _IMAGE,
        ("v1", "v1beta2"),
        "ImagePolicy",
        "imagepolicies",
        "flux",
        relations=("flux-imageRepository", *_MANAGED),
    ),
    _flux(_IMAGE, "v1 v1beta2", "ImageUpdateAutomation", edges="flux-git-source"),
    _flux(_NOTIFY, "v1beta3 v1beta2", "Alert", "static", edges="flux-provider"),
    _flux(_NOTIFY, "v1beta3 v1beta2", "Provider", "static"),
    _flux(_NOTIFY, "v1 v1beta3", "Receiver"),
    # VirtualService -> DestinationRule needs the cluster's DestinationRules: not an extractor
    # (relations.resolve_destination_rules).
    _istio(_NET, "VirtualService", edges="istio-gateways"),
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
    _gateway_api("Gateway", "v1 v1beta1", "gateway", key="K8sGateway", edges="gateway-class"),
    _gateway_api("HTTPRoute", "v1 v1beta1", "route", edges=_ROUTE_EDGES),
    _gateway_api("GRPCRoute", "v1 v1alpha2", "route", edges=_ROUTE_EDGES),
    _gateway_api("TLSRoute", "v1 v1alpha3 v1alpha2", "route", edges=_ROUTE_EDGES),
    _gateway_api("TCPRoute", "v1alpha2", "route", edges=_ROUTE_EDGES),
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
        by_resource: dict[tuple[str, str], Kind] = {}
        for k in self.kinds:
            other = by_resource.setdefault((k.group, k.plural), k)
            if other is not k:
                raise ConfigError(
                    f"{k.resource} is collected twice (keys {other.key!r} and {k.key!r})"
                )
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_by_resource", by_resource)

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
    return _merge(registry, [parse_kind(entry, i, registry) for i, entry in enumerate(data)])


def _merge(builtins: KindRegistry, parsed: list[Kind]) -> KindRegistry:
    """Built-ins (with the file's ui_url_template overrides), then the file's new kinds; a
    collision names the entry and the other entry or built-in it collides with."""
    first: dict[tuple[str, str], int] = {}  # ("key", key) or ("resource", r) -> its entry
    for i, k in enumerate(parsed):
        where = f"{_WHERE} {i}"
        if builtins.get(k.key) is not None:  # parse_kind checked it is that built-in
            if ("key", k.key) in first:
                raise ConfigError(
                    f"{where}: sets ui_url_template of built-in kind {k.key!r} again "
                    f"(entry {first['key', k.key]} already does)"
                )
            first["key", k.key] = i
            continue
        builtin = builtins.by_resource(k.group, k.plural)
        if builtin is not None:
            raise ConfigError(
                f"{where}: {k.resource} is the built-in kind {builtin.key!r}; an entry for it "
                f"may only set ui_url_template, under `key: {builtin.key}`"
            )
        for what in (("key", k.key), ("resource", k.resource)):
            if what in first:
                raise ConfigError(
                    f"{where}: {what[0]} {what[1]!r} is used by entry {first[what]} too; "
                    "give one of them a distinct `key:` or drop one"
                )
        first["key", k.key] = first["resource", k.resource] = i
    by_key = {k.key: k for k in parsed}
    kept = tuple(by_key.get(k.key, k) for k in builtins)
    return KindRegistry(kept + tuple(k for k in parsed if builtins.get(k.key) is None))


_WHERE = "FLEETSCOPE_KINDS_FILE entry"
_FIELDS = (
    "group",
    "versions",
    "kind",
    "plural",
    "status_rule",
    "namespaced",
    "key",
    "ui_url_template",
    "relations",
)


def parse_kind(entry: Any, index: int = 0, builtins: KindRegistry | None = None) -> Kind:
    """One entry of the kinds file, validated; errors name the entry and the field. An entry
    naming a kind of `builtins` (default: the built-in kinds) returns that kind with the
    entry's ui_url_template."""
    where = f"{_WHERE} {index}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a mapping with group, versions, kind, plural")
    unknown = set(entry) - set(_FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    template = _template(entry.get("ui_url_template"), where)
    named = entry.get("key") or entry.get("kind")
    builtin = (builtins or builtin_registry()).get(named) if isinstance(named, str) else None
    if builtin is not None:
        return _override(builtin, entry, template, where)
    try:
        group, kind, plural = str(entry["group"]), str(entry["kind"]), str(entry["plural"])
        versions = entry["versions"]
    except KeyError as e:
        raise ConfigError(f"{where}: missing field {e.args[0]!r}") from e
    versions = _versions(versions, where)
    if group and not _DNS_SUBDOMAIN.fullmatch(group):
        raise ConfigError(f"{where}: group {group!r} is not a DNS subdomain")
    if not _DNS_SUBDOMAIN.fullmatch(plural) or "." in plural:
        raise ConfigError(f"{where}: plural {plural!r} must be lower-case like `httproutes`")
    rule = str(entry.get("status_rule", "conditions"))
    if rule not in STATUS_RULES:
        raise ConfigError(f"{where}: status_rule must be one of {', '.join(STATUS_RULES)}")
    key = str(entry.get("key") or kind)
    if not _KEY_RE.fullmatch(key) or not _KEY_RE.fullmatch(kind):
        raise ConfigError(f"{where}: kind/key {key!r} must be alphanumeric, starting with a letter")
    namespaced = entry.get("namespaced", True)
    if not isinstance(namespaced, bool):
        raise ConfigError(f"{where}: namespaced must be true or false, not {namespaced!r}")
    relations = _relations(entry.get("relations", ["managedBy"]), where)
    return Kind(group, versions, kind, plural, rule, key, template, namespaced, relations)


def _relations(names: Any, where: str) -> tuple[str, ...]:
    """A `relations` list: extractor names from RELATION_EXTRACTORS, each once."""
    known = ", ".join(RELATION_EXTRACTORS)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: relations must be a list of extractor names ({known})")
    for i, name in enumerate(names):
        if name not in RELATION_EXTRACTORS:
            raise ConfigError(
                f"{where}: relations has an unknown extractor {name!r}; known are {known}"
            )
        if name in names[:i]:
            raise ConfigError(f"{where}: relations lists {name!r} twice")
    return tuple(names)


def _versions(versions: Any, where: str) -> tuple[str, ...]:
    if isinstance(versions, str):
        versions = [versions]
    valid = isinstance(versions, list) and all(isinstance(v, str) and v for v in versions)
    if not valid or not versions:
        raise ConfigError(f"{where}: versions must be a non-empty list like [v1, v1beta1]")
    return tuple(versions)


def _template(template: Any, where: str) -> str:
    """A valid ui_url_template ("" when not set): http(s), placeholders from UI_URL_FIELDS."""
    if template is None or template == "":
        return ""
    if not isinstance(template, str) or not template.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: ui_url_template must be an http(s) URL template")
    allowed = ", ".join(f"{{{f}}}" for f in UI_URL_FIELDS)
    for m in _PLACEHOLDER.finditer(template):
        if m[1] not in UI_URL_FIELDS:
            raise ConfigError(
                f"{where}: ui_url_template has an unknown placeholder {m[0]}; it may use {allowed}"
            )
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        raise ConfigError(
            f"{where}: ui_url_template has an unmatched brace; placeholders are {allowed}"
        )
    return template


def _override(builtin: Kind, entry: dict[str, Any], template: str, where: str) -> Kind:
    """The built-in kind an entry names, with the entry's ui_url_template."""
    named = f"{where}: names the built-in kind {builtin.key!r} ({builtin.resource})"
    rule = "an entry naming a built-in kind may only set ui_url_template"
    for name, value in entry.items():
        if not _matches(builtin, name, value):
            has = _has(builtin, name, value)
            raise ConfigError(f"{named}, whose {has}; {rule} (a new kind needs a distinct `key:`)")
    if not template:
        raise ConfigError(f"{named} but sets no ui_url_template; {rule}")
    return replace(builtin, ui_url_template=template)


def _has(builtin: Kind, name: str, value: Any) -> str:
    """What the built-in has where an override entry's field disagrees."""
    if name == "versions":
        return f"versions are {list(builtin.versions)!r}, without all of {value!r}"
    if name == "relations":
        return f"relations are {list(builtin.relations)!r}, not {value!r}"
    return f"{name} is {getattr(builtin, name)!r}, not {value!r}"


def _matches(builtin: Kind, name: str, value: Any) -> bool:
    """Whether an override entry's field agrees with the built-in (versions: each one served)."""
    if name == "ui_url_template":
        return True
    if name == "versions":
        listed = [value] if isinstance(value, str) else value
        return isinstance(listed, list) and bool(listed) and set(listed) <= set(builtin.versions)
    if name == "namespaced":
        return value is builtin.namespaced
    if name == "relations":
        return isinstance(value, list) and tuple(value) == builtin.relations
    return bool(value == getattr(builtin, name))
