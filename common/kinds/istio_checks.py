"""fleetscope's own validation of one cluster's Istio configuration: cross-object checks in the
spirit of Kiali's validations (and with Kiali's codes where the check is the same), because
istiod writes status only when PILOT_ENABLE_STATUS / enableAnalysis are on, which they are not
by default. Input: the cluster's Istio objects, its Services and its namespace names; output:
findings per object. The table of checks is in docs/architecture.md ("Istio validation")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from common.kinds import istio_policy, istio_traffic
from common.kinds.istio_mesh import EXPORT_TO_ANNOTATION, Item, Mesh, Report, dct, item
from common.kinds.status import Finding

ROOT_NAMESPACE = "istio-system"
CHECKED_KINDS: frozenset[str] = frozenset(
    {
        "VirtualService",
        "DestinationRule",
        "Gateway",
        "ServiceEntry",
        "Sidecar",
        "WorkloadEntry",
        "AuthorizationPolicy",
        "PeerAuthentication",
        "RequestAuthentication",
        "Telemetry",
    }
)

# The spec fields each check reads, as a pruning shape: True keeps a value whole, a dict keeps
# those keys (applied to each item of a list). Objects keep their YAML shape, so `validate`
# reads full objects and essentials alike.
_DEST: dict[str, Any] = {"host": True, "subset": True}
_ROUTE: dict[str, Any] = {"match": {"gateways": True}, "route": {"destination": _DEST}}
_REFS: dict[str, Any] = {"targetRef": True, "targetRefs": True}
_SHAPES: dict[str, dict[str, Any]] = {
    "VirtualService": {
        "gateways": True,
        "exportTo": True,
        "http": {**_ROUTE, "mirror": _DEST, "mirrors": {"destination": _DEST}},
        "tls": _ROUTE,
        "tcp": _ROUTE,
    },
    "DestinationRule": {
        "host": True,
        "exportTo": True,
        "subsets": {"name": True},
        "trafficPolicy": {"tls": {"mode": True}},
        "workloadSelector": True,
    },
    "Gateway": {
        "selector": True,
        "servers": {"port": {"number": True}, "hosts": True, "bind": True},
    },
    "ServiceEntry": {
        "hosts": True,
        "exportTo": True,
        "ports": {"number": True, "protocol": True},
        "resolution": True,
        "endpoints": {},
        "workloadSelector": True,
    },
    "Sidecar": {"workloadSelector": True, "egress": {"hosts": True}},
    "WorkloadEntry": {"address": True, "network": True, "ports": True},
    "AuthorizationPolicy": {
        **_REFS,
        "rules": {
            "from": {"source": {"namespaces": True, "notNamespaces": True}},
            "to": {"operation": {"methods": True, "notMethods": True}},
        },
    },
    "PeerAuthentication": {"selector": True, "mtls": True, "portLevelMtls": True},
    "RequestAuthentication": _REFS,
    "Telemetry": {**_REFS, "selector": True},
    "Service": {"selector": True},
}


def essentials(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of an Istio object (or a core `Service`, kind "Service") the checks read:
    metadata namespace/name plus the spec fields used. The watcher keeps these in memory for
    every Istio object and Service of a cluster, so keep them small."""
    meta = dct(obj.get("metadata"))
    out_meta = {"namespace": meta.get("namespace") or "", "name": meta.get("name") or ""}
    if kind == "PeerAuthentication" and meta.get("creationTimestamp"):
        out_meta["creationTimestamp"] = meta["creationTimestamp"]  # the oldest one wins
    note = dct(meta.get("annotations")).get(EXPORT_TO_ANNOTATION)
    if kind == "Service" and note:
        out_meta["annotations"] = {EXPORT_TO_ANNOTATION: note}
    spec = _prune(dct(obj.get("spec")), _SHAPES.get(kind, {}))
    return {"metadata": out_meta, "spec": spec} if spec else {"metadata": out_meta}


def _prune(value: Any, shape: Any) -> Any:
    if shape is True:
        return value
    if isinstance(value, list):
        return [_prune(v, shape) for v in value]
    if isinstance(value, dict):
        return {k: _prune(value[k], s) for k, s in shape.items() if k in value}
    return value


def validate(
    objects: Mapping[str, Iterable[dict[str, Any]]],
    services: Iterable[dict[str, Any]],
    namespaces: Iterable[str],
    root_namespace: str = ROOT_NAMESPACE,
) -> dict[tuple[str, str, str], list[Finding]]:
    """(namespace, kind, name) -> findings, for EVERY object of a kind in CHECKED_KINDS (an
    empty list when it passed); errors and warnings in a stable order (errors first).

    `objects` maps Istio kind names to objects (full or `essentials()`); a `K8sGateway` entry,
    when given, also satisfies VirtualService gateway references (as istioctl analyze has it)."""
    items = {
        kind: [item(kind, o) for o in objs if isinstance(o, dict)] for kind, objs in objects.items()
    }
    mesh = Mesh(items, services, namespaces, root_namespace)
    report = Report()
    for kind in sorted(CHECKED_KINDS):
        for it in items.get(kind, ()):
            report.ensure(it.key)
    for kind, check in _CHECKS:
        check(mesh, items.get(kind, []), report)
    return report.result()


_CHECKS: tuple[tuple[str, Callable[[Mesh, list[Item], Report], None]], ...] = (
    ("VirtualService", istio_traffic.virtual_services),
    ("DestinationRule", istio_traffic.destination_rules),
    ("Gateway", istio_traffic.gateways),
    ("ServiceEntry", istio_traffic.service_entries),
    ("Sidecar", istio_traffic.sidecars),
    ("WorkloadEntry", istio_traffic.workload_entries),
    ("AuthorizationPolicy", istio_policy.authorization_policies),
    ("PeerAuthentication", istio_policy.peer_authentications),
    ("RequestAuthentication", istio_policy.request_authentications),
    ("Telemetry", istio_policy.telemetries),
)
