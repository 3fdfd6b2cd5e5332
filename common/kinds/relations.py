"""Edges: what an object depends on, read from its own spec and labels, typed by relation.

`extract(kind, obj)` runs the extractors a kind lists in `Kind.relations` (names from
`registry.RELATION_EXTRACTORS`) and returns `Ref`s, the object's outgoing references, in spec
order and deduplicated. `Ref.kind` is the target's registry key (`K8sGateway` for the Gateway
API Gateway, `Gateway` for Istio's), or `Service` for route backends (an external node, not a
row); `Ref.namespace` is "" for cluster-scoped targets; `Ref.section` is the `sectionName` of a
parentRef or targetRef. Refs to a group/kind that is not a target of the extractor are skipped,
and missing or malformed fields never raise: a ref without a usable name is no ref.
`resolve_destination_rules(vs, destination_rules)` adds VirtualService -> DestinationRule, which
needs the cluster's other objects. Extractors and upstream shapes: docs/architecture.md#relations.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, NamedTuple, TypeGuard

from common.kinds.istio_mesh import Exported, dct, exported, fqdn, lst, strs, suffixes, visible
from common.kinds.istio_traffic import gateway_name, references
from common.kinds.registry import BUILTIN_KINDS, Kind

RELATIONS = (
    "source",
    "dependsOn",
    "chart",
    "imageRepository",
    "provider",
    "managedBy",
    "gateway",
    "destinationRule",
    "parent",
    "gatewayClass",
    "backend",
    "targets",
)


class Ref(NamedTuple):
    """One outgoing reference: the relation and the target (which may not exist). A tuple: the
    collector builds one or two per object, and dataclass hashing was a fifth of a row's cost."""

    relation: str  # one of RELATIONS
    kind: str  # the target's kind key in the registry, or "Service" for backends
    namespace: str  # "" for cluster-scoped targets (GatewayClass)
    name: str
    section: str = ""  # sectionName (listener) of a parentRef / targetRef, else ""


_GW = "gateway.networking.k8s.io"
_KEYS = {(k.group, k.kind): k.key for k in BUILTIN_KINDS}
"""(group, kind) -> registry key of the built-in kinds: the only targets a ref can name."""
_GROUPS = {k.key: k.group for k in BUILTIN_KINDS}


class _Obj(NamedTuple):
    """What extractors read of one object."""

    kind: Kind
    namespace: str  # "" for cluster-scoped kinds
    spec: dict[str, Any]
    labels: dict[str, Any]


_Extractor = Callable[[_Obj], Iterator[Ref]]


def extract(kind: Kind, obj: dict[str, Any]) -> list[Ref]:
    """The object's outgoing references (what it depends on), in spec order, deduplicated."""
    if not isinstance(obj, dict):
        return []
    meta = dct(obj.get("metadata"))
    if kind.relations == _ONLY_MANAGED:  # most kinds: only the labels are read
        labels = meta.get("labels")
        return _managed(labels) if isinstance(labels, dict) and labels else []
    ns = _namespace(meta.get("namespace"), "") if kind.namespaced else ""
    o = _Obj(kind, ns or "", dct(obj.get("spec")), dct(meta.get("labels")))
    refs: list[Ref] = []
    for name in kind.relations:
        if name == "managedBy":  # every kind has it: inlined (this runs for every object)
            if o.labels:
                refs.extend(_managed(o.labels))
        else:
            refs.extend(_EXTRACTORS[name](o))
    return list(dict.fromkeys(refs)) if len(refs) > 1 else refs


# Flux ---------------------------------------------------------------------------------------
# Flux references are {apiVersion?, kind, name, namespace?}: the namespace defaults to the
# object's, and LocalObjectReference / LocalHelmChartSourceReference carry none.


def _flux_ref(
    relation: str, ref: Any, ns: str, kinds: Collection[str], default_kind: str | None = None
) -> Iterator[Ref]:
    ref = dct(ref)
    kind, api_version = _opt(ref, "kind", default_kind), ref.get("apiVersion")
    if kind not in kinds:
        return
    if api_version and (not isinstance(api_version, str) or _group(api_version) != _GROUPS[kind]):
        return  # a kind of that name in another API group is not the Flux one
    yield from _named(relation, kind, ref, ns)


def _flux_source(o: _Obj) -> Iterator[Ref]:
    """Kustomization `spec.sourceRef` (Git, OCI, Bucket), HelmChart's (HelmRepository, Git,
    Bucket); `kind` is required."""
    sources = ("GitRepository", "OCIRepository", "Bucket", "HelmRepository")
    return _flux_ref("source", o.spec.get("sourceRef"), o.namespace, sources)


def _flux_git_source(o: _Obj) -> Iterator[Ref]:
    """ImageUpdateAutomation `spec.sourceRef`: a GitRepository, the default `kind`."""
    return _flux_ref(
        "source", o.spec.get("sourceRef"), o.namespace, ("GitRepository",), "GitRepository"
    )


def _flux_chart_source(o: _Obj) -> Iterator[Ref]:
    """HelmRelease `spec.chart.spec.sourceRef`."""
    ref = dct(dct(o.spec.get("chart")).get("spec")).get("sourceRef")
    return _flux_ref("source", ref, o.namespace, ("HelmRepository", "GitRepository", "Bucket"))


def _flux_chart_ref(o: _Obj) -> Iterator[Ref]:
    """HelmRelease `spec.chartRef` (an ExternalArtifact is not a collected kind: skipped)."""
    return _flux_ref("chart", o.spec.get("chartRef"), o.namespace, ("OCIRepository", "HelmChart"))


def _flux_depends_on(o: _Obj) -> Iterator[Ref]:
    """`spec.dependsOn[]` {name, namespace?}: objects of the object's own kind."""
    for ref in lst(o.spec.get("dependsOn")):
        yield from _named("dependsOn", o.kind.key, dct(ref), o.namespace)


def _flux_image_repository(o: _Obj) -> Iterator[Ref]:
    """ImagePolicy `spec.imageRepositoryRef` {name, namespace?}."""
    return _named(
        "imageRepository", "ImageRepository", dct(o.spec.get("imageRepositoryRef")), o.namespace
    )


def _flux_provider(o: _Obj) -> Iterator[Ref]:
    """Alert `spec.providerRef` {name}: a Provider of the Alert's namespace."""
    return _named("provider", "Provider", dct(o.spec.get("providerRef")), o.namespace, local=True)


MANAGERS = (
    ("kustomize.toolkit.fluxcd.io", "Kustomization"),
    ("helm.toolkit.fluxcd.io", "HelmRelease"),
)


def _managed_by(o: _Obj) -> Iterator[Ref]:
    """The Kustomization or HelmRelease that applied the object, from the labels
    `<group>/name` and `<group>/namespace` its controller sets (both are needed)."""
    return iter(_managed(o.labels))


def _managed(labels: dict[str, Any]) -> list[Ref]:
    out = []
    for name_label, ns_label, key in _MANAGER_LABELS:
        name, ns = labels.get(name_label), labels.get(ns_label)
        if _name(name) and _name(ns):
            out.append(Ref("managedBy", key, ns, name))
    return out


_MANAGER_LABELS = tuple((f"{p}/name", f"{p}/namespace", key) for p, key in MANAGERS)
_ONLY_MANAGED = ("managedBy",)


# Istio --------------------------------------------------------------------------------------


def _istio_gateways(o: _Obj) -> Iterator[Ref]:
    """VirtualService `spec.gateways` and http/tls/tcp `match[].gateways`, except `mesh`."""
    for ref in references(o.spec)[0]:
        if ref != "mesh":
            gw_ns, name = gateway_name(ref, o.namespace)
            if gw_ns and name:
                yield Ref("gateway", "Gateway", gw_ns, name)


def resolve_destination_rules(
    vs: dict[str, Any],
    destination_rules: Iterable[dict[str, Any]],
    *,
    namespaces: Iterable[str] = (),
) -> list[Ref]:
    """VirtualService -> DestinationRule. For each route (and mirror) destination host, the
    DestinationRules visible from the VirtualService's namespace (`exportTo`) whose host is
    the most specific match (Istio's MostSpecificHostMatch: the host itself, else the longest
    wildcard covering it), in destination order, then by namespace and name, each once. Hosts
    resolve as `istio_mesh.fqdn` has it; `namespaces` (the cluster's) lets `name.ns` resolve
    when no VirtualService or DestinationRule given lives in `ns`. No match, no Ref. For many
    VirtualServices of one cluster, build a `DestinationRuleIndex` once instead."""
    return DestinationRuleIndex(destination_rules, namespaces).refs(vs)


class DestinationRuleIndex:
    """One cluster's DestinationRules by resolved host, built once (`refs` per VirtualService
    is then linear in its destinations, not in the cluster's DestinationRules)."""

    def __init__(
        self, destination_rules: Iterable[dict[str, Any]], namespaces: Iterable[str] = ()
    ) -> None:
        self.rules = [r for r in map(_rule, destination_rules) if r is not None]
        self.known = {*(ns for _, ns, _, _ in self.rules), *namespaces}
        self.by_host = self._by_host(self.known)

    def _by_host(self, known: set[str]) -> dict[str, list[tuple[str, str, Exported]]]:
        by_host: dict[str, list[tuple[str, str, Exported]]] = {}
        for host, ns, name, exp in self.rules:
            by_host.setdefault(fqdn(host, ns, known), []).append((ns, name, exp))
        return by_host

    def refs(self, vs: dict[str, Any]) -> list[Ref]:
        vs = dct(vs)
        vs_ns = _namespace(dct(vs.get("metadata")).get("namespace"), "") or ""
        known, by_host = self.known, self.by_host
        if vs_ns not in known:  # the VirtualService's namespace also resolves `name.ns` hosts
            known = {*known, vs_ns}
            by_host = self._by_host(known)
        seen: dict[str, list[tuple[str, str]]] = {}

        def shown(host: str) -> list[tuple[str, str]]:
            """The rules of `host` visible from the VirtualService's namespace, sorted."""
            if host not in seen:
                rules = by_host.get(host, ())
                seen[host] = sorted((ns, n) for ns, n, exp in rules if visible(exp, vs_ns))
            return seen[host]

        refs: dict[Ref, None] = {}
        for dest in references(dct(vs.get("spec")))[1]:
            dest_host = dest.get("host")
            fq = fqdn(dest_host, vs_ns, known) if _name(dest_host) else ""
            for ns, name in shown(_most_specific(fq, lambda h: bool(shown(h)))):
                refs[Ref("destinationRule", "DestinationRule", ns, name)] = None
        return list(refs)


def _rule(dr: Any) -> tuple[str, str, str, Exported] | None:
    """A DestinationRule as (host, namespace, name, exportTo), None when malformed."""
    dr = dct(dr)
    meta, spec = dct(dr.get("metadata")), dct(dr.get("spec"))
    host, ns, name = spec.get("host"), meta.get("namespace"), meta.get("name")
    if not (_name(host) and _name(ns) and _name(name)):
        return None
    return host, ns, name, exported(strs(spec.get("exportTo")), ns)


def _most_specific(fq: str, has: Callable[[str], bool]) -> str:
    """The host (one `has` accepts) that Istio applies to `fq`, "" for none."""
    if not fq or has(fq):
        return fq
    if fq.startswith("*"):
        return ""  # a wildcard destination names no service
    wildcards = (f"*{s}" for s in suffixes(fq))  # longest first
    return next((w for w in wildcards if has(w)), "*" if has("*") else "")


# Gateway API and Kuadrant -------------------------------------------------------------------
# gateway-api apis/v1 shared_types.go: ParentReference {group (default gateway.networking.k8s.io),
# kind (default Gateway), namespace (default the route's), name, sectionName, port};
# BackendObjectReference {group (default "", core), kind (default Service), namespace, name}.


def _gateway_parents(o: _Obj) -> Iterator[Ref]:
    """A route's `spec.parentRefs[]` naming a Gateway API Gateway (GAMMA's Service parents and
    other kinds are skipped); one Ref per listener named (`sectionName`)."""
    for ref in map(dct, lst(o.spec.get("parentRefs"))):
        key = _key(_opt(ref, "group", _GW), _opt(ref, "kind", "Gateway"))
        if key == "K8sGateway":
            yield from _named("parent", key, ref, o.namespace, section=True)


def _gateway_class(o: _Obj) -> Iterator[Ref]:
    """A Gateway's `spec.gatewayClassName` (GatewayClass is cluster-scoped)."""
    name = o.spec.get("gatewayClassName")
    if _name(name):
        yield Ref("gatewayClass", "GatewayClass", "", name)


def _gateway_backends(o: _Obj) -> Iterator[Ref]:
    """A route's `spec.rules[].backendRefs[]` naming a core Service (other kinds skipped)."""
    for rule in map(dct, lst(o.spec.get("rules"))):
        for ref in map(dct, lst(rule.get("backendRefs"))):
            if (_opt(ref, "group", ""), _opt(ref, "kind", "Service")) == ("", "Service"):
                yield from _named("backend", "Service", ref, o.namespace)


_POLICY_TARGETS = frozenset({"K8sGateway", "HTTPRoute", "GRPCRoute"})


def _policy_targets(o: _Obj) -> Iterator[Ref]:
    """A Kuadrant policy's `spec.targetRef`, then `spec.targetRefs[]`
    (LocalPolicyTargetReferenceWithSectionName: group and kind required, same namespace as the
    policy) naming a Gateway, HTTPRoute or GRPCRoute."""
    refs = [o.spec.get("targetRef"), *lst(o.spec.get("targetRefs"))]
    for ref in map(dct, refs):
        key = _key(ref.get("group"), ref.get("kind"))
        if key in _POLICY_TARGETS:
            yield from _named("targets", key, ref, o.namespace, local=True, section=True)


# Shared -------------------------------------------------------------------------------------


def _named(
    relation: str,
    key: str,
    ref: dict[str, Any],
    ns: str,
    local: bool = False,
    section: bool = False,
) -> Iterator[Ref]:
    """The Ref to `ref`'s `name` (and `sectionName`), in `ns` unless the ref names another
    namespace (not for `local` refs); nothing when a field is malformed."""
    name, section_name = ref.get("name"), ref.get("sectionName") if section else None
    target_ns = ns if local else _namespace(ref.get("namespace"), ns)
    if not _name(name) or target_ns is None:
        return
    if section_name is not None and not (
        isinstance(section_name, str) and section_name.isprintable()
    ):
        return
    yield Ref(relation, key, target_ns, name, section_name or "")


def _name(value: Any) -> TypeGuard[str]:
    """A usable name: a non-empty string without control characters (they could not be stored:
    common.index.edges separates fields with them; the API server would reject such a name)."""
    return isinstance(value, str) and bool(value) and value.isprintable()


def _namespace(value: Any, default: str) -> str | None:
    """A ref's namespace: the default when unset or empty, None when malformed."""
    if value is None or value == "":
        return default
    return value if isinstance(value, str) and value.isprintable() else None


def _opt(ref: dict[str, Any], field: str, default: Any) -> Any:
    """A field with a kubebuilder default: the default only when the field is absent (null)."""
    value = ref.get(field)
    return default if value is None else value


def _key(group: Any, kind: Any) -> str | None:
    """The registry key of the built-in kind (group, kind), None for any other."""
    return _KEYS.get((group, kind)) if isinstance(group, str) and isinstance(kind, str) else None


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


_EXTRACTORS: dict[str, _Extractor] = {
    "flux-source": _flux_source,
    "flux-git-source": _flux_git_source,
    "flux-chart-source": _flux_chart_source,
    "flux-chart-ref": _flux_chart_ref,
    "flux-dependsOn": _flux_depends_on,
    "flux-imageRepository": _flux_image_repository,
    "flux-provider": _flux_provider,
    "managedBy": _managed_by,
    "istio-gateways": _istio_gateways,
    "gateway-parents": _gateway_parents,
    "gateway-class": _gateway_class,
    "gateway-backends": _gateway_backends,
    "policy-targets": _policy_targets,
}
"""The implementation of each name in registry.RELATION_EXTRACTORS."""
