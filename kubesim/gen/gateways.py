"""The Gateway API and Kuadrant objects of one app namespace, and the cluster's own
(GatewayClasses, the shared `istio-system/public` Gateway).

A Gateway API namespace has a Gateway `gateway` (class `istio`) with `http` and `https`
listeners (plus `tls`/`tcp` for TLSRoutes/TCPRoutes), an HTTPRoute `web`, often an HTTPRoute
`api` (sometimes also attached to the shared Gateway, sometimes reaching another namespace's
Service through a ReferenceGrant), some GRPCRoute/TLSRoute/TCPRoute; and in `KUADRANT_SHARE` of
them Kuadrant policies targeting the Gateway or the `web` route. Statuses agree with the
objects: `attachedRoutes` counts the accepted routes, BackendNotFound means the Service is
missing, RefNotPermitted that no ReferenceGrant allows it, TargetNotFound that the target is.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

from kubesim.gen.gateway_shapes import (
    GROUP,
    Affected,
    Listener,
    Parent,
    gateway,
    gateway_class,
    reference_grant,
    route,
)
from kubesim.gen.plan import LABELS, ClusterPlan, NamespacePlan, Planned
from kubesim.gen.policies import namespace_policies

K8S_GATEWAY = f"gateways.{GROUP}"
ROUTE_SHARES = {"GRPCRoute": 0.15, "TLSRoute": 0.08, "TCPRoute": 0.08}
KUADRANT_SHARE = 0.4
# Failing and pending Gateways, as shares of Gateways (the rest are healthy).
GATEWAY_VARIANTS = (
    ("bad-cert", 0.02),
    ("no-address", 0.01),
    ("conflicted", 0.01),
    ("progressing", 0.02),
    ("unknown", 0.01),
)
PUBLIC: Parent = ("public", "istio-system", "https")
PUBLIC_INTERNAL: Parent = ("public", "istio-system", "internal")
CLASSES = {  # name -> (controllerName, variant, description, parametersRef)
    "istio": ("istio.io/gateway-controller", "accepted", "The default Istio GatewayClass", False),
    "istio-remote": (
        "istio.io/unmanaged-gateway",
        "accepted",
        "Remote to this cluster. Does not deploy or affect configuration.",
        False,
    ),
    "custom-lb": ("istio.io/gateway-controller", "invalid", "Internal load balancers", True),
    "envoy": ("gateway.envoyproxy.io/gatewayclass-controller", "pending", "Envoy Gateway", False),
}


def _listener(
    name: str, port: int, protocol: str, kinds: tuple[str, ...], allow: str = "Same", **extra: Any
) -> Listener:
    """A listener as stored (the API server defaults `allowedRoutes.namespaces.from: Same`)."""
    spec: dict[str, Any] = {"name": name, "port": port, "protocol": protocol, **extra}
    allowed: dict[str, Any] = {"namespaces": {"from": allow}}
    if protocol in ("TLS", "TCP"):
        allowed["kinds"] = [{"group": GROUP, "kind": kinds[0]}]
    spec["allowedRoutes"] = allowed
    return spec, kinds


def _cert(name: str) -> dict[str, Any]:
    return {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": name}]}


HTTP_KINDS = ("HTTPRoute", "GRPCRoute")
HOST = "*.@@ns@@.example.io"
LISTENERS = {
    "http": _listener("http", 80, "HTTP", HTTP_KINDS, hostname=HOST),
    "https": _listener("https", 443, "HTTPS", HTTP_KINDS, hostname=HOST, tls=_cert("@@name@@-tls")),
    "tls": _listener("tls", 8443, "TLS", ("TLSRoute",), hostname=HOST, tls={"mode": "Passthrough"}),
    "tcp": _listener("tcp", 9000, "TCP", ("TCPRoute",)),
    "legacy": _listener("legacy", 443, "TCP", ("TCPRoute",)),  # conflicts with `https`
}
PUBLIC_LISTENERS = (
    _listener(
        "https", 443, "HTTPS", HTTP_KINDS, hostname="*.apps.example.com",
        tls=_cert("wildcard-apps-tls"), allow="All",
    ),
    _listener(
        "internal", 8443, "HTTPS", HTTP_KINDS, hostname="*.internal.example.com",
        tls=_cert("wildcard-internal-tls"),
    ),
)  # fmt: skip


def _gateway_variant(item: str, rng: random.Random) -> str:
    if item.startswith("gw-"):
        return item[3:]
    if item:  # the showcase's route and policy items need a Gateway that works
        return "healthy"
    u = rng.random()
    for variant, share in GATEWAY_VARIANTS:
        if u < share:
            return variant
        u -= share
    return "healthy"


def namespace_gateway_api(
    plan: ClusterPlan, ns: NamespacePlan, rng: random.Random
) -> Iterator[Planned]:
    if plan.gateway[ns.index]:
        yield from _gateway_namespace(plan, ns, rng)
    grants = plan.inbound.get(ns.index)
    if grants:
        entries = [
            {"group": GROUP, "kind": "HTTPRoute", "namespace": n} for n in sorted(set(grants))
        ]
        make = partial(reference_grant, plan.api_version("ReferenceGrant"), LABELS)
        values = {"grants": json.dumps(entries, separators=(",", ":"))}
        yield Planned("ReferenceGrant", ns.name, "allow-routes", ("ReferenceGrant",), make, values)


def _gateway_namespace(
    plan: ClusterPlan, ns: NamespacePlan, rng: random.Random
) -> Iterator[Planned]:
    item = ns.item
    variant = _gateway_variant(item, rng)
    managed = variant != "unknown"
    extra = {kind: rng.random() < share for kind, share in ROUTE_SHARES.items()}
    # `web` names a listener the Gateway lacks: NoMatchingParent, attached nowhere
    no_parent = item == "route-no-parent" or (not item and rng.random() < plan.breakage)
    policies: list[Planned] = []
    affected: dict[str, Affected] = {}
    if managed and (item.startswith("policy-") or rng.random() < KUADRANT_SHARE):
        other_routes = plan.api_route[ns.index] or extra["GRPCRoute"]
        paths = (not no_parent, other_routes)
        policies, affected = namespace_policies(plan, ns, paths, rng)
    attached: Counter[str] = Counter()
    routes = list(_routes(plan, ns, managed, no_parent, extra, affected, attached, rng))
    names = ["http", "https"] + [
        n for n, k in (("tls", "TLSRoute"), ("tcp", "TCPRoute")) if extra[k]
    ]
    if variant == "conflicted":
        names.append("legacy")
    listeners = tuple(LISTENERS[n] for n in names)
    faulty = {"bad-cert": "https", "conflicted": "legacy"}.get(variant, "")
    gw_affected = affected.get("gateway", ())
    make = partial(
        gateway,
        plan.api_version(K8S_GATEWAY),
        "istio" if managed else "envoy",
        listeners,
        variant,
        LABELS,
        gw_affected,
        faulty,
    )
    key = ("K8sGateway", tuple(names), variant, gw_affected)
    values = {f"ar_{n}": str(attached[n]) for n in names}
    # a class no controller serves, often not even installed: the Gateway waits either way
    dangling = "" if managed or "envoy" in plan.extra_classes() else "spec.gatewayClassName"
    yield Planned(K8S_GATEWAY, ns.name, "gateway", key, make, values, dangling=dangling)
    if managed:
        ns.need("gateway-istio")
    yield from routes
    yield from policies


def _routes(
    plan: ClusterPlan,
    ns: NamespacePlan,
    managed: bool,
    no_parent: bool,
    extra: dict[str, bool],
    affected: dict[str, Affected],
    attached: Counter[str],
    rng: random.Random,
) -> Iterator[Planned]:
    """The namespace's routes, counting in `attached` the accepted ones per local listener."""
    ok = "ok" if managed else ""
    section = "https-legacy" if no_parent else "https"
    web_refs = "BackendNotFound" if ns.web_missing else "ok"
    ns.need("web")
    yield _route(plan, ns, "HTTPRoute", "web", (("gateway", "", section),),
                 ("no-parent" if no_parent and managed else ok,), ("web", 80, ""), web_refs,
                 affected.get("web", ()))  # fmt: skip
    if managed and not no_parent:
        attached["https"] += 1
    if plan.api_route[ns.index]:
        yield _api_route(plan, ns, managed, affected.get("route", ()), attached, rng)
    api_refs = "BackendNotFound" if ns.api_missing else "ok"
    for kind, name, listener, backend in (
        ("GRPCRoute", "grpc", "https", ("api", 9090, "")),
        ("TLSRoute", "tls", "tls", ("web", 443, "")),
        ("TCPRoute", "tcp", "tcp", ("db", 5432, "")),
    ):
        if not extra[kind]:
            continue
        ns.need(backend[0])
        refs = {"api": api_refs, "web": web_refs}.get(backend[0], "ok")
        kuadrant = affected.get("route", ()) if kind == "GRPCRoute" else ()
        yield _route(
            plan, ns, kind, name, (("gateway", "", listener),), (ok,), backend, refs, kuadrant
        )
        if managed:
            attached[listener] += 1


def _api_route(
    plan: ClusterPlan,
    ns: NamespacePlan,
    managed: bool,
    kuadrant: Affected,
    attached: Counter[str],
    rng: random.Random,
) -> Planned:
    parents: tuple[Parent, ...] = (("gateway", "", ""),)
    outcomes: tuple[str, ...] = ("ok" if managed else "",)
    if ns.item == "route-not-allowed" or rng.random() < plan.breakage:
        parents, outcomes = (*parents, PUBLIC_INTERNAL), (*outcomes, "not-allowed")
    elif rng.random() < 0.3:
        parents, outcomes = (*parents, PUBLIC), (*outcomes, "ok")
        plan.public_routes += 1
    if managed:
        attached["http"] += 1
        attached["https"] += 1
    target = plan.cross[ns.index]
    if target >= 0:
        refs = "ok" if plan.permitted[ns.index] else "RefNotPermitted"
        backend = ("api", 80, plan.namespaces[target])
    else:
        ns.need("api")
        refs = "BackendNotFound" if ns.api_missing else "ok"
        backend = ("api", 80, "")
    return _route(plan, ns, "HTTPRoute", "api", parents, outcomes, backend, refs, kuadrant)


def _route(
    plan: ClusterPlan,
    ns: NamespacePlan,
    kind: str,
    name: str,
    parents: tuple[Parent, ...],
    outcomes: tuple[str, ...],
    backend: tuple[str, int, str],
    refs: str,
    kuadrant: Affected,
) -> Planned:
    """`backend`: (Service, port, its namespace or "" for the route's own)."""
    service, port, namespace = backend
    accepted_locally = outcomes[0] == "ok"
    kuadrant = kuadrant if accepted_locally else ()
    make = partial(
        route,
        plan.api_version(kind),
        kind,
        parents,
        port,
        bool(namespace),
        outcomes,
        refs,
        LABELS,
        kuadrant,
        "gateway",
    )
    key = (kind, parents, port, bool(namespace), outcomes, refs, kuadrant)
    values = {"bname": service, "bns": namespace or ns.name}
    dangling = "spec.rules[0].backendRefs[0]" if refs == "BackendNotFound" else ""
    return Planned(kind, ns.name, name, key, make, values, dangling=dangling)


def cluster_gateway_api(plan: ClusterPlan) -> Iterator[Planned]:
    """The GatewayClasses, and the shared Gateway `istio-system/public` (its `https` listener
    admits routes from every namespace, `internal` only from `istio-system`)."""
    for name in ("istio", "istio-remote", *plan.extra_classes()):
        controller, variant, description, params = CLASSES[name]
        api = plan.api_version("GatewayClass")
        make = partial(gateway_class, api, controller, variant, description, params)
        yield Planned("GatewayClass", "", name, ("GatewayClass", name), make, {})
    api = plan.api_version(K8S_GATEWAY)
    make = partial(gateway, api, "istio", PUBLIC_LISTENERS, "healthy", LABELS)
    values = {"ar_https": str(plan.public_routes), "ar_internal": "0"}
    yield Planned(K8S_GATEWAY, "istio-system", "public", ("K8sGateway", "public"), make, values)
