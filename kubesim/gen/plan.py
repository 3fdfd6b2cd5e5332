"""What a generated cluster's traffic objects will be, decided before any is made: the cluster's
mesh-wide mTLS mode and GatewayClasses, which namespaces hold Gateway API objects, which
routes reach a Service in another namespace (and whether a ReferenceGrant lets them), and the
showcase run of namespaces that holds one of each kind of breakage.

These draws use `seeds.unit` (order-independent), so a namespace can know what other
namespaces send it before they are generated. `Planned` is one object to render.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kubesim.gen.seeds import mix64, unit

LABELS = {
    "app.kubernetes.io/part-of": "@@ns@@",
    "fleetscope.io/team": "@@team@@",
    # Kubernetes' recommended labels, filled by kubesim.gen.fleet from the object's name, kind and
    # manager (functions of them, no random draws: the fleet stays as it was generated)
    "app.kubernetes.io/name": "@@name@@",
    "app.kubernetes.io/instance": "@@name@@-@@ns@@",
    "app.kubernetes.io/version": "@@appver@@",
    "app.kubernetes.io/component": "@@component@@",
    "app.kubernetes.io/managed-by": "@@managedby@@",
}
"""Labels of the generated objects teams own (not of what a controller makes)."""
GATEWAY_ITEMS = ("gw-", "route-", "policy-")
SHOWCASE = (
    # Istio (no status: fleetscope's own validation must find these)
    "vs-gateway-local",
    "vs-gateway-remote",
    "vs-subset",
    "host-missing",
    "dr-duplicate",
    "sidecar-duplicate",
    "mtls-conflict",
    "mtls-permissive-ns",  # valid: a namespace PERMISSIVE under a STRICT mesh may DISABLE
    "gateway-duplicate",
    "authz-namespace",
    "istiod-error",
    "istiod-warning",
    # Gateway API
    "gw-bad-cert",
    "gw-no-address",
    "gw-conflicted",
    "gw-progressing",
    "gw-unknown",
    "route-no-parent",
    "route-not-allowed",
    "route-backend-missing",
    "route-ref-not-permitted",
    "route-cross-ns",  # valid: a ReferenceGrant allows it
    # Kuadrant
    "policy-target-missing",
    "policy-conflicted",
    "policy-invalid",
    "policy-overridden",
    "policy-out-of-sync",
    "policy-failing",
    "policy-unknown",
    "policy-partial",
    # Flux: suspended while failing (the status stays what the controller last wrote)
    "flux-suspended-failing",
    # Flux propagation (kubesim.gen.flux): a failing source and its users, a sourceRef naming no
    # object, a dependsOn chain failing at its root, a dependsOn cycle
    "flux-source-failing",
    "flux-source-dangling",
    "flux-depends-chain",
    "flux-depends-cycle",
    # Appended last, so the earlier items keep their namespaces: a VirtualService bound to the
    # Gateway API Gateway istio-system/public (valid, as istioctl analyze reads it), a Kuadrant
    # policy whose conditions describe an older generation (progressing)
    "vs-k8s-gateway",
    "policy-stale",
)
SHOWCASE_MIN = 50  # namespaces per cluster from which the showcase run is placed
API_ROUTE_SHARE = 0.6  # Gateway API namespaces with an `api` HTTPRoute
CROSS_SHARE = 0.1  # `api` routes whose backend is another namespace's Service
_SALT_SHOWCASE, _SALT_GW, _SALT_API, _SALT_CROSS, _SALT_TARGET, _SALT_GRANT = range(6)


Manager = tuple[str, str, str]  # ("kustomize" | "helm", name, namespace) of the managing object


class Planned(NamedTuple):
    """One object to render: `kind` as `Catalog.find` takes it, the template `key` and the
    `make` that builds its shape (called once per key), and slot `values` beyond the stamp.
    `manager`: the Flux object that applied it (`kubesim.gen.marks`); `dangling`: the paths of
    its references that name no object, comma-separated."""

    kind: str
    namespace: str
    name: str
    key: tuple[Any, ...]
    make: Callable[[], dict[str, Any]]
    values: dict[str, str]
    manager: Manager | None = None
    dangling: str = ""


@dataclass
class ClusterPlan:
    seed: int
    index: int
    namespaces: list[str]
    breakage: float
    unhealthy: float
    api_version: Callable[[str], str]
    showcase: dict[int, str] = field(default_factory=dict)
    gateway: list[bool] = field(default_factory=list)
    api_route: list[bool] = field(default_factory=list)
    cross: list[int] = field(default_factory=list)  # the backend namespace's index, or -1
    permitted: list[bool] = field(default_factory=list)
    inbound: dict[int, list[str]] = field(default_factory=dict)  # namespaces a grant allows
    needs_api: set[int] = field(default_factory=set)  # hold an `api` Service others reach
    public_routes: int = 0  # routes attached to istio-system/public's `https` listener
    _next_ip: int = 10

    @property
    def mesh_mtls(self) -> str:
        """The mesh-wide PeerAuthentication's mode (a quarter of clusters are migrating)."""
        return "PERMISSIVE" if (self.seed + self.index) % 4 == 2 else "STRICT"

    def extra_classes(self) -> tuple[str, ...]:
        """GatewayClasses beyond Istio's two: a misconfigured one in a third of clusters, one
        no controller handles in another third."""
        return {0: ("custom-lb",), 1: ("envoy",)}.get((self.seed + self.index) % 3, ())

    def cluster_ip(self) -> str:
        k = self._next_ip
        self._next_ip += 1
        return f"10.{96 + (k >> 16)}.{(k >> 8) & 255}.{k & 255}"

    def item(self, i: int) -> str:
        return self.showcase.get(i, "")


@dataclass
class NamespacePlan:
    """One app namespace while its objects are made: its showcase item, which of its Services
    are missing (hosts that resolve nowhere) and which Services its objects need."""

    index: int
    name: str
    item: str
    web_missing: bool
    api_missing: bool
    services: set[str] = field(default_factory=set)

    def need(self, service: str) -> None:
        self.services.add(service)


def plan_cluster(
    seed: int,
    index: int,
    namespaces: list[str],
    shares: tuple[float, float, float],
    api_version: Callable[[str], str],
) -> ClusterPlan:
    """`shares`: (Gateway API namespaces, breakage, istiod errors)."""
    gateway_share, breakage, unhealthy = shares
    plan = ClusterPlan(seed, index, namespaces, breakage, unhealthy, api_version)
    n = len(namespaces)
    if n >= SHOWCASE_MIN:
        start = mix64(seed, index, _SALT_SHOWCASE) % n
        plan.showcase = {(start + k) % n: item for k, item in enumerate(SHOWCASE)}
    for i in range(n):
        _plan_namespace(plan, i, gateway_share)
    return plan


def _plan_namespace(plan: ClusterPlan, i: int, gateway_share: float) -> None:
    seed, index, n, item = plan.seed, plan.index, len(plan.namespaces), plan.item(i)
    cross_items = ("route-ref-not-permitted", "route-cross-ns")
    is_gw = item.startswith(GATEWAY_ITEMS) or unit(seed, index, i, _SALT_GW) < gateway_share
    has_api = is_gw and (
        item in (*cross_items, "route-not-allowed")
        or unit(seed, index, i, _SALT_API) < API_ROUTE_SHARE
    )
    target = -1
    if (
        has_api
        and n > 1
        and (item in cross_items or unit(seed, index, i, _SALT_CROSS) < CROSS_SHARE)
    ):
        target = (i + 1 + mix64(seed, index, i, _SALT_TARGET) % (n - 1)) % n
    ok = item == "route-cross-ns" or (
        item != "route-ref-not-permitted" and unit(seed, index, i, _SALT_GRANT) >= plan.breakage
    )
    plan.gateway.append(is_gw)
    plan.api_route.append(has_api)
    plan.cross.append(target)
    plan.permitted.append(ok)
    if target >= 0:
        plan.needs_api.add(target)
        if ok:
            plan.inbound.setdefault(target, []).append(plan.namespaces[i])


def host_form(rng: random.Random, service: str) -> str:
    """How a user names a Service in a host field: short, `name.ns` or the FQDN."""
    return (service, f"{service}.@@ns@@", f"{service}.@@ns@@.svc.cluster.local")[rng.randrange(3)]
