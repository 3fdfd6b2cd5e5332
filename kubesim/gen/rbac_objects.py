"""RBAC objects of the generated fleet, shaped like a real multi-tenant cluster running Flux,
Istio, Gateway API and Kuadrant.

ClusterRoles `flux-view`, `istio-view`, `gateway-api-view` and `kuadrant-view` carry
`aggregate-to-view` (as Flux ships its roles), `view` aggregates them (rules filled in, as the
aggregation controller would), `cluster-admin` allows everything. ClusterRoleBindings: group
`fleet-admins` and the Flux controllers' service account to cluster-admin; user `platform-sre`
and service account `istio-system:kiali` to view. A RoleBinding to `view` grants the namespaced
kinds only: cluster-scoped GatewayClasses are visible through ClusterRoleBindings alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kubesim.catalog import Catalog, Resource
from kubesim.gen.templates import Template, metadata, slot

if TYPE_CHECKING:
    from kubesim.gen.fleet import GeneratedFleet

AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
READ = ["get", "list", "watch"]
RBAC_V1 = "rbac.authorization.k8s.io/v1"


def namespace_shape() -> dict[str, Any]:
    meta = metadata(
        {"kubernetes.io/metadata.name": slot("name"), "fleetscope.io/team": slot("team")},
        namespaced=False,
    )
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _subject(kind: str, name: str, namespace: str = "") -> dict[str, str]:
    if kind == "ServiceAccount":
        return {"kind": kind, "name": name, "namespace": namespace}
    return {"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": name}


def _binding(
    kind: str, role: str, subjects: list[dict[str, str]], namespaced: bool
) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_V1,
        "kind": kind,
        "metadata": metadata(namespaced=namespaced),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    }


def role_binding_shape(service_account: bool = False) -> dict[str, Any]:
    """The per-namespace RoleBinding of the owning team (and its deployer SA, sometimes)."""
    subjects = [_subject("Group", slot("team"))]
    if service_account:
        subjects.append(_subject("ServiceAccount", "deployer", slot("ns")))
    return _binding("RoleBinding", "view", subjects, True)


def _rules_for(catalog: Catalog, suffix: str) -> list[dict[str, Any]]:
    groups: dict[str, list[str]] = {}
    for res in catalog:
        if res.group.endswith(suffix) and res.status_rule:
            groups.setdefault(res.group, []).append(res.plural)
    return [{"apiGroups": [g], "resources": sorted(p), "verbs": READ} for g, p in groups.items()]


def _cluster_role(name: str, rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    meta = metadata(namespaced=False)
    if extra.get("labels"):
        meta["labels"] = extra.pop("labels")
    return {"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": meta, "rules": rules, **extra}


VIEWS = {  # aggregated view ClusterRole -> API group suffix
    "flux-view": "toolkit.fluxcd.io",
    "istio-view": "istio.io",
    "gateway-api-view": "gateway.networking.k8s.io",
    "kuadrant-view": "kuadrant.io",
}


def cluster_roles(catalog: Catalog) -> dict[str, dict[str, Any]]:
    views = {name: _rules_for(catalog, suffix) for name, suffix in VIEWS.items()}
    core = [
        {"apiGroups": [""], "resources": ["namespaces", "services", "configmaps"], "verbs": READ}
    ]
    agg = {AGGREGATE_TO_VIEW: "true"}
    selector = {"clusterRoleSelectors": [{"matchLabels": agg}]}
    return {
        "cluster-admin": _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        **{name: _cluster_role(name, rules, labels=agg) for name, rules in views.items()},
        "view": _cluster_role(
            "view", core + [r for rules in views.values() for r in rules], aggregationRule=selector
        ),
    }


def cluster_role_bindings() -> dict[str, dict[str, Any]]:
    return {
        "fleet-admins": _binding(
            "ClusterRoleBinding", "cluster-admin", [_subject("Group", "fleet-admins")], False
        ),
        "cluster-reconciler-flux-system": _binding(
            "ClusterRoleBinding",
            "cluster-admin",
            [_subject("ServiceAccount", "kustomize-controller", "flux-system")],
            False,
        ),
        "platform-sre-view": _binding(
            "ClusterRoleBinding", "view", [_subject("User", "platform-sre")], False
        ),
        "kiali-view": _binding(
            "ClusterRoleBinding",
            "view",
            [_subject("ServiceAccount", "kiali", "istio-system")],
            False,
        ),
    }


def cluster_rbac(
    fleet: GeneratedFleet, cluster: str, catalog: Catalog
) -> Iterator[tuple[Resource, str, str, Template, dict[str, str]]]:
    """Cluster-wide RBAC objects (and the `solo` user's RoleBinding on its cluster)."""
    cr, crb, rb = (
        catalog.find("ClusterRole"),
        catalog.find("ClusterRoleBinding"),
        catalog.find("RoleBinding"),
    )
    for name, shape in cluster_roles(catalog).items():
        yield cr, "", name, Template(shape), {}
    for name, shape in cluster_role_bindings().items():
        yield crb, "", name, Template(shape), {}
    solo_cluster, solo_ns = fleet.solo_namespace()
    if cluster == solo_cluster:
        shape = _binding("RoleBinding", "view", [_subject("User", "solo")], True)
        yield rb, solo_ns, "solo-view", Template(shape), {}
