"""The traffic objects of a generated cluster, namespace by namespace from its `ClusterPlan`:
Istio config (`mesh`), Gateway API and Kuadrant (`gateways`, `policies`), and the Services
behind their hosts. A Service exists for every host and backend the namespace's objects name,
except `MISSING_SERVICE` of them (and the showcase's): those hosts resolve nowhere.

Services are no fleetscope rows; the collector lists them for its Istio validation only.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import partial
from typing import Any

from kubesim.gen.gateways import cluster_gateway_api, namespace_gateway_api
from kubesim.gen.mesh import namespace_istio, system_istio
from kubesim.gen.plan import ClusterPlan, NamespacePlan, Planned
from kubesim.gen.templates import metadata, slot

MISSING_SERVICE = 0.03
Port = tuple[str, int, int, str]  # (name, port, targetPort, protocol)
LB_PORTS: tuple[Port, ...] = (
    ("status-port", 15021, 15021, "TCP"),
    ("http", 80, 80, "TCP"),
    ("https", 443, 443, "TCP"),
)
PORTS: dict[str, tuple[Port, ...]] = {
    "web": (("http", 80, 8080, "TCP"), ("https", 443, 8443, "TCP")),
    "api": (("http", 80, 8080, "TCP"), ("grpc", 9090, 9090, "TCP")),
    "db": (("postgres", 5432, 5432, "TCP"),),
    "kubernetes": (("https", 443, 6443, "TCP"),),
    "kube-dns": (
        ("dns", 53, 53, "UDP"),
        ("dns-tcp", 53, 53, "TCP"),
        ("metrics", 9153, 9153, "TCP"),
    ),
    "istiod": (
        ("grpc-xds", 15010, 15010, "TCP"),
        ("https-dns", 15012, 15012, "TCP"),
        ("https-webhook", 443, 15017, "TCP"),
        ("http-monitoring", 15014, 15014, "TCP"),
    ),
    "controller": (("http", 80, 9090, "TCP"),),
}
SYSTEM_SERVICES = (  # (namespace, name, ports, load balancer)
    ("default", "kubernetes", "kubernetes", False),
    ("kube-system", "kube-dns", "kube-dns", False),
    ("istio-system", "istiod", "istiod", False),
    ("istio-system", "istio-ingressgateway", "lb", True),
    ("istio-system", "public-istio", "lb", True),
    ("flux-system", "source-controller", "controller", False),
    ("flux-system", "notification-controller", "controller", False),
    ("flux-system", "webhook-receiver", "controller", False),
)


def service_shape(ports: tuple[Port, ...], load_balancer: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "LoadBalancer" if load_balancer else "ClusterIP",
        "clusterIP": slot("ip"),
        "clusterIPs": [slot("ip")],
        "ports": [
            {"name": name, "port": port, "protocol": proto, "targetPort": target}
            for name, port, target, proto in ports
        ],
        "selector": {"app": slot("name")},
        "sessionAffinity": "None",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "internalTrafficPolicy": "Cluster",
    }
    if load_balancer:
        spec["externalTrafficPolicy"] = "Cluster"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata({"app": slot("name")}),
        "spec": spec,
        "status": {"loadBalancer": {}},
    }


def _service(plan: ClusterPlan, namespace: str, name: str, ports: str, lb: bool) -> Planned:
    shape = partial(service_shape, LB_PORTS if ports == "lb" else PORTS[ports], lb)
    return Planned(
        "Service", namespace, name, ("Service", ports, lb), shape, {"ip": plan.cluster_ip()}
    )


def namespace_traffic(plan: ClusterPlan, index: int, rng: random.Random) -> Iterator[Planned]:
    """The traffic objects of app namespace `index`, then the Services they need."""
    name, item = plan.namespaces[index], plan.item(index)
    web_missing = (
        item in ("host-missing", "route-backend-missing") or rng.random() < MISSING_SERVICE
    )
    api_missing = index not in plan.needs_api and rng.random() < MISSING_SERVICE
    ns = NamespacePlan(index, name, item, web_missing, api_missing)
    yield from namespace_istio(plan, ns, rng)
    yield from namespace_gateway_api(plan, ns, rng)
    if index in plan.needs_api:
        ns.need("api")
    missing = {"web": web_missing, "api": api_missing}
    for service in sorted(ns.services):
        if missing.get(service):
            continue
        if service == "gateway-istio":
            yield _service(plan, name, service, "lb", True)
        else:
            yield _service(plan, name, service, service, False)


def system_traffic(plan: ClusterPlan) -> Iterator[Planned]:
    """The platform's Istio objects (first, as a cluster is set up)."""
    yield from system_istio(plan)


def cluster_traffic(plan: ClusterPlan) -> Iterator[Planned]:
    """After the namespaces: GatewayClasses, the shared Gateway, the system Services."""
    yield from cluster_gateway_api(plan)
    for namespace, name, ports, lb in SYSTEM_SERVICES:
        yield _service(plan, namespace, name, ports, lb)
