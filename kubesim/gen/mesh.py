"""The Istio objects of one app namespace (and the platform's own in `istio-system`).

Valid unless broken on purpose: a VirtualService's gateways exist, its subsets are defined by
the DestinationRule for its host, its hosts name a Service of the namespace (short, `name.ns`
or FQDN form); DestinationRules keep mTLS on where a PeerAuthentication is STRICT (a namespace
PERMISSIVE under a STRICT mesh may DISABLE it: that is valid). Each kind of breakage hits
`ClusterPlan.breakage` of the relevant objects (Services: `MISSING_SERVICE`), plus the
showcase; broken objects carry the Kiali codes in `EXPECTED_FINDINGS`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from kubesim.gen.istio_shapes import (
    authorization_policy,
    destination_rule,
    istio_gateway,
    istio_object,
    peer_authentication,
    static_spec,
    virtual_service,
)
from kubesim.gen.plan import LABELS, ClusterPlan, NamespacePlan, Planned, host_form

# Share of app namespaces holding each object (as before Gateway API joined the fleet).
SHARES = {
    "vs-web": 0.4,
    "vs-api": 0.1,
    "dr-web": 0.3,
    "sidecar": 0.05,
    "authz": 0.1,
    "pa": 0.03,
    "reqauthn": 0.02,
    "se": 0.05,
    "gateway": 0.02,
    "we": 0.01,
    "telemetry": 0.01,
}
LEGACY_SHARE = 0.005  # DestinationRules with mTLS off in a PERMISSIVE namespace (valid)
ISTIOD_WARNING_SHARE = 0.02
VS_ITEMS = ("vs-gateway-local", "vs-gateway-remote", "vs-subset", "host-missing", "vs-k8s-gateway")
K8S_GATEWAY_REF = "istio-system/public"  # the shared Gateway API Gateway (kubesim.gen.gateways)
DR_ITEMS = ("dr-duplicate", "mtls-conflict", "mtls-permissive-ns", "host-missing")
NETWORKING_GATEWAY = "gateways.networking.istio.io"


def _shape(
    api_version: str,
    kind: str,
    spec: Callable[..., dict[str, Any]],
    args: tuple[Any, ...],
    variant: str,
    expected: str,
) -> dict[str, Any]:
    return istio_object(api_version, kind, spec(*args), LABELS, variant, expected)


def _planned(
    plan: ClusterPlan,
    kind: str,
    ns: str,
    name: str,
    spec: Callable[..., dict[str, Any]],
    args: tuple[Any, ...],
    variant: str = "",
    codes: tuple[str, ...] = (),
    dangling: str = "",
) -> Planned:
    lookup = NETWORKING_GATEWAY if kind == "Gateway" else kind
    expected = ",".join(sorted(codes))
    make = partial(_shape, plan.api_version(lookup), kind, spec, args, variant, expected)
    key = (kind, spec.__name__, args, variant, expected)
    return Planned(lookup, ns, name, key, make, {}, dangling=dangling)


def _istiod(plan: ClusterPlan, rng: random.Random) -> str:
    u = rng.random()
    if u < plan.unhealthy:
        return "istiod-error"
    return "istiod-warning" if u < plan.unhealthy + ISTIOD_WARNING_SHARE else ""


def namespace_istio(plan: ClusterPlan, ns: NamespacePlan, rng: random.Random) -> Iterator[Planned]:
    has = _draw(ns.item, rng)
    pa_mode, mtls = _mtls(plan, ns.item, has, rng)
    subsets: tuple[str, ...] = ()
    if has["dr-web"]:
        subsets = ("v1", "v2") if rng.random() < 0.5 else ("v1",)
    if has["gateway"]:
        yield from _gateways(plan, ns, rng)
    if has["vs-web"]:
        ns.need("web")
        yield _virtual_service(plan, ns, has["gateway"], subsets, rng)
    if has["vs-api"]:
        ns.need("api")
        yield _api_virtual_service(plan, ns, rng)
    if has["dr-web"]:
        ns.need("web")
        yield from _destination_rules(plan, ns, subsets, mtls, rng)
    if pa_mode:
        args = (pa_mode,)
        yield _planned(plan, "PeerAuthentication", ns.name, "default", peer_authentication, args)
    if has["sidecar"]:
        yield from _sidecars(plan, ns, rng)
    if has["authz"]:
        yield _authorization_policy(plan, ns, rng)
    for key, kind, name in (
        ("reqauthn", "RequestAuthentication", "jwt"),
        ("se", "ServiceEntry", "external-api"),
        ("we", "WorkloadEntry", "vm"),
        ("telemetry", "Telemetry", "default"),
    ):
        if has[key]:
            forced = key == "se" and ns.item.startswith("istiod-")
            variant = ns.item if forced else _istiod(plan, rng)
            yield _planned(plan, kind, ns.name, name, static_spec, (kind,), variant)


def _draw(item: str, rng: random.Random) -> dict[str, bool]:
    """Which objects the namespace holds (its showcase item forces some)."""
    has = {k: rng.random() < share for k, share in SHARES.items()}
    has["vs-web"] |= item in VS_ITEMS
    has["dr-web"] |= item in DR_ITEMS
    has["sidecar"] |= item == "sidecar-duplicate"
    has["authz"] |= item == "authz-namespace"
    has["se"] |= item in ("istiod-error", "istiod-warning")
    has["gateway"] = (has["gateway"] and item != "vs-gateway-local") or item == "gateway-duplicate"
    return has


def _api_virtual_service(plan: ClusterPlan, ns: NamespacePlan, rng: random.Random) -> Planned:
    dest = host_form(rng, "api")
    codes = ("KIA1101",) if ns.api_missing else ()
    args = ((dest,), (), ((dest, "", 0),))
    variant = _istiod(plan, rng)
    return _planned(plan, "VirtualService", ns.name, "api", virtual_service, args, variant, codes)


def _sidecars(plan: ClusterPlan, ns: NamespacePlan, rng: random.Random) -> Iterator[Planned]:
    dup = ns.item == "sidecar-duplicate" or rng.random() < plan.breakage
    codes = ("KIA0002",) if dup else ()
    for name in ("default", "egress")[: 2 if dup else 1]:
        yield _planned(plan, "Sidecar", ns.name, name, static_spec, ("Sidecar",), "", codes)


def _authorization_policy(plan: ClusterPlan, ns: NamespacePlan, rng: random.Random) -> Planned:
    bad = ns.item == "authz-namespace" or rng.random() < plan.breakage
    peers = ("@@ns@@", "monitoring") if bad else ("@@ns@@",)  # no namespace `monitoring`
    codes = ("KIA0101",) if bad else ()
    kind, variant = "AuthorizationPolicy", _istiod(plan, rng)
    return _planned(plan, kind, ns.name, "allow-ns", authorization_policy, (peers,), variant, codes)


def _mtls(
    plan: ClusterPlan, item: str, has: dict[str, bool], rng: random.Random
) -> tuple[str, str]:
    """(namespace PeerAuthentication mode or "", the `web` DestinationRule's break: "" | legacy
    | KIA0207 (namespace STRICT) | KIA0208 (mesh STRICT))."""
    legacy = has["dr-web"] and (item == "mtls-permissive-ns" or rng.random() < LEGACY_SHARE)
    legacy = legacy and item != "mtls-conflict"
    bad = has["dr-web"] and not legacy and (item == "mtls-conflict" or rng.random() < plan.breakage)
    if legacy:
        return "PERMISSIVE", "legacy"
    pa_mode = "STRICT" if has["pa"] or (bad and plan.mesh_mtls != "STRICT") else ""
    if not bad:
        return pa_mode, ""
    return pa_mode, "KIA0207" if pa_mode == "STRICT" else "KIA0208"


def _virtual_service(
    plan: ClusterPlan,
    ns: NamespacePlan,
    local_gateway: bool,
    subsets: tuple[str, ...],
    rng: random.Random,
) -> Planned:
    item, b = ns.item, plan.breakage
    dest = host_form(rng, "web")
    codes = ["KIA1101"] if ns.web_missing else []
    gateways: tuple[str, ...] = ()
    hosts: tuple[str, ...] = (dest,)
    if item == "vs-k8s-gateway":  # no draw: the other namespaces' objects stay as they were
        gateways, hosts = (K8S_GATEWAY_REF,), ("web.@@ns@@.example.com",)
    elif item == "vs-gateway-local" or (not local_gateway and rng.random() < b / 2):
        gateways, hosts = ("ingress",), ("web.@@ns@@.example.com",)
        codes.append("KIA1102")
    elif item == "vs-gateway-remote" or rng.random() < b / 2:
        gateways, hosts = ("istio-system/ingress-legacy",), ("web.@@ns@@.example.com",)
        codes.append("KIA1102")
    elif local_gateway:
        gateways, hosts = ("ingress",), ("@@ns@@.example.org",)
    elif rng.random() < 0.25:
        gateways, hosts = ("istio-system/ingressgateway",), ("web.@@ns@@.example.com",)
    if item == "vs-subset" or rng.random() < b:
        codes.append("KIA1107")
        routes = ((dest, "v1", 90), (dest, "canary", 10)) if subsets else ((dest, "v1", 0),)
    elif len(subsets) == 2:
        routes = ((dest, "v1", 90), (dest, "v2", 10))
    else:
        routes = ((dest, subsets[0] if subsets else "", 0),)
    args = (hosts, gateways, routes)
    dangling = "spec.gateways[0]" if "KIA1102" in codes else ""  # the one gateway named
    return _planned(
        plan,
        "VirtualService",
        ns.name,
        "web",
        virtual_service,
        args,
        _istiod(plan, rng),
        tuple(codes),
        dangling,
    )


def _destination_rules(
    plan: ClusterPlan,
    ns: NamespacePlan,
    subsets: tuple[str, ...],
    mtls: str,
    rng: random.Random,
) -> Iterator[Planned]:
    dup = ns.item == "dr-duplicate" or rng.random() < plan.breakage
    missing = ("KIA0202",) if ns.web_missing else ()
    dup_code = ("KIA0201",) if dup else ()
    mtls_code = (mtls,) if mtls.startswith("KIA") else ()
    tls = "DISABLE" if mtls else "ISTIO_MUTUAL"
    args = (host_form(rng, "web"), subsets, tls)
    codes = missing + dup_code + mtls_code
    yield _planned(
        plan, "DestinationRule", ns.name, "web", destination_rule, args, _istiod(plan, rng), codes
    )
    if dup:
        args = (host_form(rng, "web"), ("v1",), "ISTIO_MUTUAL")
        yield _planned(
            plan,
            "DestinationRule",
            ns.name,
            "web-canary",
            destination_rule,
            args,
            "",
            missing + dup_code,
        )


def _gateways(plan: ClusterPlan, ns: NamespacePlan, rng: random.Random) -> Iterator[Planned]:
    dup = ns.item == "gateway-duplicate" or rng.random() < plan.breakage
    codes = ("KIA0301",) if dup else ()
    args = ("@@ns@@.example.org", "@@ns@@-tls")
    for name in ("ingress", "ingress-v2")[: 2 if dup else 1]:
        yield _planned(
            plan, "Gateway", ns.name, name, istio_gateway, args, _istiod(plan, rng), codes
        )


def system_istio(plan: ClusterPlan) -> Iterator[Planned]:
    """The platform's own: the ingress gateway, the mesh-wide PeerAuthentication, Telemetry."""
    gw_args = ("*.example.com", "wildcard-example-com")
    yield _planned(plan, "Gateway", "istio-system", "ingressgateway", istio_gateway, gw_args)
    pa_args = (plan.mesh_mtls,)
    yield _planned(
        plan, "PeerAuthentication", "istio-system", "default", peer_authentication, pa_args
    )
    yield _planned(plan, "Telemetry", "istio-system", "mesh-default", static_spec, ("Telemetry",))
