"""Edge extraction (common/kinds/relations.py): one table per extractor, cases shaped like the
upstream projects' documented YAML (Flux, Istio, Gateway API, Kuadrant), with namespace
defaulting, cross-namespace refs, sectionName, duplicates, cycles and malformed input; the
VirtualService -> DestinationRule resolution; the extractors each built-in kind carries; and
kinds-file kinds using them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from common.kinds.istio_checks import essentials
from common.kinds.registry import (
    BUILTIN_KINDS,
    RELATION_EXTRACTORS,
    Kind,
    builtin_registry,
    load_registry,
)
from common.kinds.relations import RELATIONS, Ref, extract, resolve_destination_rules
from tests.support.paths import REPO

REGISTRY = builtin_registry()
GW = "gateway.networking.k8s.io"
NS = "apps"  # the namespace of the object under test


def obj(spec: Any = None, ns: str | None = NS, name: str = "me", **meta: Any) -> dict[str, Any]:
    metadata = {"name": name, **meta} if ns is None else {"namespace": ns, "name": name, **meta}
    return {"metadata": metadata, "spec": {} if spec is None else spec}


def refs(key: str, spec: Any, ns: str | None = NS, **meta: Any) -> list[Ref]:
    kind = REGISTRY.get(key)
    assert kind is not None
    return extract(kind, obj(spec, ns, **meta))


# Flux ---------------------------------------------------------------------------------------

SOURCE = [
    # flux docs: sourceRef {kind, name}; the namespace defaults to the Kustomization's.
    ({"sourceRef": {"kind": "GitRepository", "name": "podinfo"}}, [("GitRepository", NS)]),
    (
        {"sourceRef": {"kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system"}},
        [("OCIRepository", "flux-system")],
    ),
    (
        {
            "sourceRef": {
                "apiVersion": "source.toolkit.fluxcd.io/v1",
                "kind": "Bucket",
                "name": "podinfo",
                "namespace": "",
            }
        },
        [("Bucket", NS)],
    ),
    # ExternalArtifact is no collected kind; `kind` is required (no default).
    ({"sourceRef": {"kind": "ExternalArtifact", "name": "podinfo"}}, []),
    ({"sourceRef": {"name": "podinfo"}}, []),
    # A kind of the same name in another API group is not the Flux source.
    ({"sourceRef": {"apiVersion": "example.io/v1", "kind": "GitRepository", "name": "p"}}, []),
    ({"sourceRef": {"kind": "GitRepository", "name": "podinfo", "namespace": 7}}, []),
    ({"sourceRef": {"kind": "GitRepository", "name": ""}}, []),
    ({"sourceRef": "podinfo"}, []),
    ("not a spec", []),
]


@pytest.mark.parametrize(("spec", "expected"), SOURCE)
def test_kustomization_source(spec: Any, expected: list[tuple[str, str]]) -> None:
    got = refs("Kustomization", spec)
    assert got == [Ref("source", kind, ns, "podinfo") for kind, ns in expected]


@pytest.mark.parametrize(
    ("key", "spec", "expected"),
    [
        # kustomize-controller docs: dependsOn [{name, namespace?}] -> Kustomizations.
        (
            "Kustomization",
            {"dependsOn": [{"name": "common"}, {"name": "infra", "namespace": "flux-system"}]},
            [
                Ref("dependsOn", "Kustomization", NS, "common"),
                Ref("dependsOn", "Kustomization", "flux-system", "infra"),
            ],
        ),
        # helm-controller: the same shape, naming HelmReleases (readyExpr is ignored).
        (
            "HelmRelease",
            {
                "dependsOn": [
                    {
                        "name": "cert-manager",
                        "namespace": "cert-manager",
                        "readyExpr": "status.ready",
                    }
                ]
            },
            [Ref("dependsOn", "HelmRelease", "cert-manager", "cert-manager")],
        ),
        # Duplicates (the namespace written out or defaulted) collapse to one edge.
        (
            "Kustomization",
            {
                "dependsOn": [
                    {"name": "common"},
                    {"name": "common", "namespace": NS},
                    {"name": "common"},
                ]
            },
            [Ref("dependsOn", "Kustomization", NS, "common")],
        ),
        # Malformed entries are skipped, the good one kept.
        (
            "Kustomization",
            {
                "dependsOn": [
                    7,
                    "common",
                    {"name": 5},
                    {"namespace": "x"},
                    {"name": ""},
                    {"name": "ok", "namespace": ["x"]},
                    {"name": "infra"},
                ]
            },
            [Ref("dependsOn", "Kustomization", NS, "infra")],
        ),
        ("Kustomization", {"dependsOn": {"name": "common"}}, []),
    ],
)
def test_depends_on(key: str, spec: Any, expected: list[Ref]) -> None:
    assert refs(key, spec) == expected


def test_depends_on_cycles_are_data() -> None:
    a = refs("Kustomization", {"dependsOn": [{"name": "b"}]}, name="a")
    b = refs("Kustomization", {"dependsOn": [{"name": "a"}]}, name="b")
    assert a == [Ref("dependsOn", "Kustomization", NS, "b")]
    assert b == [Ref("dependsOn", "Kustomization", NS, "a")]
    itself = refs("HelmRelease", {"dependsOn": [{"name": "me"}]}, name="me")
    assert itself == [Ref("dependsOn", "HelmRelease", NS, "me")]


HELM = [
    # helm-controller docs: chart.spec.sourceRef -> HelmRepository / GitRepository / Bucket.
    (
        {
            "chart": {
                "spec": {
                    "chart": "podinfo",
                    "version": "6.5.*",
                    "sourceRef": {"kind": "HelmRepository", "name": "podinfo"},
                }
            }
        },
        [Ref("source", "HelmRepository", NS, "podinfo")],
    ),
    (
        {
            "chart": {
                "spec": {
                    "chart": "./charts/podinfo",
                    "sourceRef": {
                        "kind": "GitRepository",
                        "name": "podinfo",
                        "namespace": "flux-system",
                    },
                }
            }
        },
        [Ref("source", "GitRepository", "flux-system", "podinfo")],
    ),
    # The chart template's sourceRef may not name an OCIRepository (that is chartRef's).
    ({"chart": {"spec": {"sourceRef": {"kind": "OCIRepository", "name": "podinfo"}}}}, []),
    # chartRef -> OCIRepository / HelmChart, relation "chart"; ExternalArtifact is skipped.
    (
        {"chartRef": {"kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system"}},
        [Ref("chart", "OCIRepository", "flux-system", "podinfo")],
    ),
    (
        {"chartRef": {"kind": "HelmChart", "name": "podinfo"}},
        [Ref("chart", "HelmChart", NS, "podinfo")],
    ),
    ({"chartRef": {"kind": "ExternalArtifact", "name": "podinfo"}}, []),
    ({"chart": {"spec": "podinfo"}, "chartRef": None}, []),
    # Spec order: chart source, chartRef, dependsOn.
    (
        {
            "dependsOn": [{"name": "db"}],
            "chartRef": {"kind": "HelmChart", "name": "c"},
            "chart": {"spec": {"sourceRef": {"kind": "Bucket", "name": "b"}}},
        },
        [
            Ref("source", "Bucket", NS, "b"),
            Ref("chart", "HelmChart", NS, "c"),
            Ref("dependsOn", "HelmRelease", NS, "db"),
        ],
    ),
]


@pytest.mark.parametrize(("spec", "expected"), HELM)
def test_helm_release(spec: Any, expected: list[Ref]) -> None:
    assert refs("HelmRelease", spec) == expected


@pytest.mark.parametrize(
    ("key", "spec", "expected"),
    [
        # HelmChart: a LocalHelmChartSourceReference (same namespace).
        (
            "HelmChart",
            {"sourceRef": {"kind": "HelmRepository", "name": "podinfo"}},
            [Ref("source", "HelmRepository", NS, "podinfo")],
        ),
        (
            "HelmChart",
            {"sourceRef": {"kind": "GitRepository", "name": "podinfo"}},
            [Ref("source", "GitRepository", NS, "podinfo")],
        ),
        # ImagePolicy: imageRepositoryRef {name, namespace?}.
        (
            "ImagePolicy",
            {"imageRepositoryRef": {"name": "podinfo"}},
            [Ref("imageRepository", "ImageRepository", NS, "podinfo")],
        ),
        (
            "ImagePolicy",
            {"imageRepositoryRef": {"name": "podinfo", "namespace": "flux-system"}},
            [Ref("imageRepository", "ImageRepository", "flux-system", "podinfo")],
        ),
        ("ImagePolicy", {"imageRepositoryRef": "podinfo"}, []),
        # ImageUpdateAutomation: sourceRef kind defaults to GitRepository, its only value.
        (
            "ImageUpdateAutomation",
            {"sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
            [Ref("source", "GitRepository", NS, "flux-system")],
        ),
        (
            "ImageUpdateAutomation",
            {"sourceRef": {"name": "fleet", "namespace": "flux-system"}},
            [Ref("source", "GitRepository", "flux-system", "fleet")],
        ),
        ("ImageUpdateAutomation", {"sourceRef": {"kind": "OCIRepository", "name": "x"}}, []),
        # Alert: providerRef is a LocalObjectReference: the Alert's namespace, always.
        (
            "Alert",
            {
                "providerRef": {"name": "slack"},
                "eventSources": [{"kind": "Kustomization", "name": "*"}],
            },
            [Ref("provider", "Provider", NS, "slack")],
        ),
        (
            "Alert",
            {"providerRef": {"name": "slack", "namespace": "other"}},
            [Ref("provider", "Provider", NS, "slack")],
        ),
        ("Alert", {"providerRef": {}}, []),
    ],
)
def test_flux_references(key: str, spec: Any, expected: list[Ref]) -> None:
    assert refs(key, spec) == expected


KUSTOMIZE = {
    "kustomize.toolkit.fluxcd.io/name": "apps",
    "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
}
HELM_LABELS = {
    "helm.toolkit.fluxcd.io/name": "podinfo",
    "helm.toolkit.fluxcd.io/namespace": "podinfo",
}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (KUSTOMIZE, [Ref("managedBy", "Kustomization", "flux-system", "apps")]),
        (HELM_LABELS, [Ref("managedBy", "HelmRelease", "podinfo", "podinfo")]),
        (
            {**HELM_LABELS, **KUSTOMIZE, "app": "x"},
            [
                Ref("managedBy", "Kustomization", "flux-system", "apps"),
                Ref("managedBy", "HelmRelease", "podinfo", "podinfo"),
            ],
        ),
        # Both labels are needed; values must be strings.
        ({"kustomize.toolkit.fluxcd.io/name": "apps"}, []),
        ({"helm.toolkit.fluxcd.io/namespace": "podinfo"}, []),
        (
            {
                "kustomize.toolkit.fluxcd.io/name": "apps",
                "kustomize.toolkit.fluxcd.io/namespace": "",
            },
            [],
        ),
        ({"kustomize.toolkit.fluxcd.io/name": 1, "kustomize.toolkit.fluxcd.io/namespace": "x"}, []),
        ("not labels", []),
    ],
)
def test_managed_by(labels: Any, expected: list[Ref]) -> None:
    assert refs("Sidecar", {}, labels=labels) == expected


@pytest.mark.parametrize("kind", BUILTIN_KINDS, ids=lambda k: k.key)
def test_every_builtin_kind_is_managed_by_its_applier(kind: Kind) -> None:
    ns = NS if kind.namespaced else None
    got = extract(kind, obj({}, ns, labels=KUSTOMIZE))
    assert got == [Ref("managedBy", "Kustomization", "flux-system", "apps")]


def test_the_flux_system_kustomization_manages_itself() -> None:
    """Flux bootstrap labels flux-system with its own name: a self-edge, as the labels say."""
    labels = {
        "kustomize.toolkit.fluxcd.io/name": "flux-system",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    spec = {"sourceRef": {"kind": "GitRepository", "name": "flux-system"}}
    assert refs("Kustomization", spec, "flux-system", name="flux-system", labels=labels) == [
        Ref("source", "GitRepository", "flux-system", "flux-system"),
        Ref("managedBy", "Kustomization", "flux-system", "flux-system"),
    ]


# Istio: VirtualService -> Gateway ----------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # istio.io VirtualService docs: `gateways` names Gateways; `mesh` is the sidecars.
        (
            {"hosts": ["bookinfo.com"], "gateways": ["bookinfo-gateway", "mesh"]},
            [(NS, "bookinfo-gateway")],
        ),
        (
            {"gateways": ["istio-system/ingress", "./local", "mesh"]},
            [("istio-system", "ingress"), (NS, "local")],
        ),
        # The legacy FQDN form reads as ns/name.
        ({"gateways": ["ingress.istio-system.svc.cluster.local"]}, [("istio-system", "ingress")]),
        # match[].gateways of http, tls and tcp routes, after spec.gateways, each once.
        (
            {
                "gateways": ["edge/public", "mesh"],
                "http": [
                    {"match": [{"gateways": ["mesh"]}, {"gateways": ["edge/public", "internal"]}]}
                ],
                "tls": [{"match": [{"gateways": ["tls-gw"], "sniHosts": ["a.example.com"]}]}],
                "tcp": [{"match": [{"gateways": ["edge/tcp-gw"]}]}],
            },
            [("edge", "public"), (NS, "internal"), (NS, "tls-gw"), ("edge", "tcp-gw")],
        ),
        ({"gateways": ["mesh"]}, []),
        ({"gateways": "bookinfo-gateway"}, []),
        ({"gateways": [7, "", "ns/"], "http": [{"match": "x"}, "y"], "tcp": 5}, []),
    ],
)
def test_virtual_service_gateways(spec: Any, expected: list[tuple[str, str]]) -> None:
    assert refs("VirtualService", spec) == [Ref("gateway", "Gateway", ns, n) for ns, n in expected]


def dr(ns: str, name: str, host: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"host": host, **spec},
    }


def vs(ns: str, *hosts: str, mirror: str = "") -> dict[str, Any]:
    routes: list[dict[str, Any]] = [
        {"route": [{"destination": {"host": h, "subset": "v1"}}]} for h in hosts
    ]
    if mirror:
        routes.append({"route": [], "mirror": {"host": mirror}, "mirrorPercentage": {"value": 5}})
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"namespace": ns, "name": "vs"},
        "spec": {"hosts": ["reviews"], "http": routes},
    }


DRS = [
    dr("bookinfo", "reviews", "reviews", subsets=[{"name": "v1"}]),
    dr("other", "reviews-fq", "reviews.bookinfo.svc.cluster.local"),
    dr("other", "reviews-private", "reviews.bookinfo.svc.cluster.local", exportTo=["."]),
    dr("bookinfo", "ratings-wide", "*.bookinfo.svc.cluster.local"),
    dr("istio-system", "mesh-mtls", "*.local"),
    dr("shop", "payments-ns", "payments.shop"),
    dr("shop", "api", "api.example.com", exportTo=["bookinfo", "shop"]),
    dr("edge", "everything", "*", exportTo=["."]),
]


@pytest.mark.parametrize(
    ("virtual_service", "namespaces", "expected"),
    [
        # The short name resolves in the VirtualService's namespace; every visible
        # DestinationRule for that host counts (exportTo "." hides other's private one).
        (vs("bookinfo", "reviews"), (), [("bookinfo", "reviews"), ("other", "reviews-fq")]),
        (
            vs("frontend", "reviews.bookinfo.svc.cluster.local"),
            (),
            [("bookinfo", "reviews"), ("other", "reviews-fq")],
        ),
        (
            vs("other", "reviews.bookinfo.svc.cluster.local"),
            (),
            [("bookinfo", "reviews"), ("other", "reviews-fq"), ("other", "reviews-private")],
        ),
        # No exact host: the longest wildcard covering it; nothing more specific: `*.local`.
        (vs("bookinfo", "ratings"), (), [("bookinfo", "ratings-wide")]),
        (vs("frontend", "web"), (), [("istio-system", "mesh-mtls")]),
        # `*` is the least specific host of all; exportTo "." keeps it in its namespace.
        (vs("edge", "unknown.example.org"), (), [("edge", "everything")]),
        (vs("edge", "web"), (), [("istio-system", "mesh-mtls")]),
        (vs("frontend", "unknown.example.org"), (), []),
        # `name.ns` resolves when `ns` is a namespace the caller or an object names.
        (vs("frontend", "payments.shop.svc.cluster.local"), (), [("shop", "payments-ns")]),
        (
            vs("frontend", "reviews.bookinfo"),
            (),
            [("bookinfo", "reviews"), ("other", "reviews-fq")],
        ),
        # External hosts match as written; exportTo lists the namespaces that see it.
        (vs("bookinfo", "api.example.com"), (), [("shop", "api")]),
        (vs("frontend", "api.example.com"), (), []),
        # Destinations in order, each DestinationRule once; mirrors count.
        (
            vs("bookinfo", "ratings", "reviews", "ratings"),
            (),
            [("bookinfo", "ratings-wide"), ("bookinfo", "reviews"), ("other", "reviews-fq")],
        ),
        (vs("frontend", mirror="api.example.com"), (), []),
        (vs("shop", mirror="api.example.com"), (), [("shop", "api")]),
    ],
)
def test_resolve_destination_rules(
    virtual_service: dict[str, Any], namespaces: tuple[str, ...], expected: list[tuple[str, str]]
) -> None:
    want = [Ref("destinationRule", "DestinationRule", ns, n) for ns, n in expected]
    assert resolve_destination_rules(virtual_service, DRS, namespaces=namespaces) == want
    # The watcher keeps essentials() of Istio objects: they resolve alike.
    slim = [essentials("DestinationRule", d) for d in DRS]
    got = resolve_destination_rules(essentials("VirtualService", virtual_service), slim)
    assert got == want


def test_name_ns_hosts_need_the_cluster_namespaces() -> None:
    """`reviews.bookinfo` is in-cluster only when bookinfo is a namespace of the cluster."""
    rules = [dr("other", "reviews-fq", "reviews.bookinfo.svc.cluster.local")]
    service = vs("frontend", "reviews.bookinfo")
    assert resolve_destination_rules(service, rules) == []
    assert resolve_destination_rules(service, rules, namespaces=["bookinfo"]) == [
        Ref("destinationRule", "DestinationRule", "other", "reviews-fq")
    ]


def test_a_missing_destination_rule_is_no_edge() -> None:
    assert resolve_destination_rules(vs("shop", "cart"), [dr("shop", "x", "orders")]) == []
    assert resolve_destination_rules(vs("shop", "cart"), []) == []


@pytest.mark.parametrize(
    ("virtual_service", "rules"),
    [
        ("not a vs", DRS),
        ({"metadata": "x", "spec": {"http": [{"route": [{"destination": {"host": 5}}]}]}}, DRS),
        (
            vs("bookinfo", "reviews"),
            [
                "x",
                {"spec": {"host": "reviews"}},
                dr("", "n", "reviews"),
                dr("bookinfo", "n", ""),
                {"metadata": {"namespace": "bookinfo", "name": "n"}, "spec": "x"},
            ],
        ),
    ],
)
def test_resolve_destination_rules_skips_malformed_input(
    virtual_service: Any, rules: list[Any]
) -> None:
    assert resolve_destination_rules(virtual_service, rules) == []


# Gateway API --------------------------------------------------------------------------------


def parent(name: str, section: str = "", ns: str = NS) -> Ref:
    return Ref("parent", "K8sGateway", ns, name, section)


PARENTS = [
    # gateway-api docs: parentRefs [{name}]: group and kind default to a Gateway API Gateway,
    # the namespace to the route's.
    ([{"name": "example-gateway"}], [parent("example-gateway")]),
    (
        [
            {
                "group": GW,
                "kind": "Gateway",
                "name": "gw",
                "namespace": "infra",
                "sectionName": "https",
            }
        ],
        [parent("gw", "https", "infra")],
    ),
    # One edge per listener; a port alone selects no listener by name.
    (
        [
            {"name": "gw", "sectionName": "http"},
            {"name": "gw", "sectionName": "https"},
            {"name": "gw", "sectionName": "http"},
            {"name": "gw", "port": 443},
        ],
        [parent("gw", "http"), parent("gw", "https"), parent("gw")],
    ),
    # GAMMA: a Service parent (group "") is no Gateway; nor is a ListenerSet.
    ([{"group": "", "kind": "Service", "name": "reviews"}], []),
    ([{"group": "gateway.networking.x-k8s.io", "kind": "XListenerSet", "name": "ls"}], []),
    ([{"group": "networking.istio.io", "kind": "Gateway", "name": "istio-gw"}], []),
    # Malformed refs are skipped.
    (
        [{"name": "gw", "sectionName": 443}, {"namespace": "x"}, "gw", {"name": "gw", "kind": ""}],
        [],
    ),
    ({"name": "gw"}, []),
]


@pytest.mark.parametrize("route", ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"])
@pytest.mark.parametrize(("parent_refs", "expected"), PARENTS)
def test_route_parents(route: str, parent_refs: Any, expected: list[Ref]) -> None:
    assert refs(route, {"parentRefs": parent_refs}) == expected


def backend(name: str, ns: str = NS) -> Ref:
    return Ref("backend", "Service", ns, name)


BACKENDS = [
    # backendRefs [{name, port}]: group "" and kind Service by default.
    ([{"backendRefs": [{"name": "example-svc", "port": 80}]}], [backend("example-svc")]),
    # Cross-namespace (allowed by a ReferenceGrant there): the namespace given.
    (
        [
            {
                "backendRefs": [
                    {
                        "group": "",
                        "kind": "Service",
                        "name": "db",
                        "namespace": "data",
                        "port": 5432,
                        "weight": 10,
                    }
                ]
            }
        ],
        [backend("db", "data")],
    ),
    # Across rules, in order, each once.
    (
        [{"backendRefs": [{"name": "v1"}, {"name": "v2"}]}, {"backendRefs": [{"name": "v1"}]}],
        [backend("v1"), backend("v2")],
    ),
    # Other backend kinds are not Services.
    (
        [
            {
                "backendRefs": [
                    {"group": "multicluster.x-k8s.io", "kind": "ServiceImport", "name": "s"},
                    {"group": "networking.istio.io", "kind": "Hostname", "name": "h"},
                    {"kind": "Service", "group": "core", "name": "c"},
                ]
            }
        ],
        [],
    ),
    ([{"backendRefs": "svc"}, "rule", {"backendRefs": [{"port": 80}, {"name": 5}]}], []),
]


@pytest.mark.parametrize("route", ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"])
@pytest.mark.parametrize(("rules", "expected"), BACKENDS)
def test_route_backends(route: str, rules: Any, expected: list[Ref]) -> None:
    assert refs(route, {"rules": rules}) == expected


def test_route_parents_come_before_backends() -> None:
    spec = {"rules": [{"backendRefs": [{"name": "web"}]}], "parentRefs": [{"name": "gw"}]}
    assert refs("HTTPRoute", spec) == [parent("gw"), backend("web")]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"gatewayClassName": "istio", "listeners": [{"name": "http", "port": 80}]},
            [Ref("gatewayClass", "GatewayClass", "", "istio")],
        ),
        ({"gatewayClassName": ""}, []),
        ({"gatewayClassName": ["istio"]}, []),
        ({}, []),
    ],
)
def test_gateway_class(spec: Any, expected: list[Ref]) -> None:
    assert refs("K8sGateway", spec) == expected


@pytest.mark.parametrize("key", ["GatewayClass", "ReferenceGrant", "DestinationRule", "Gateway"])
def test_kinds_with_only_managed_by_read_no_spec(key: str) -> None:
    spec = {
        "gatewayClassName": "x",
        "parentRefs": [{"name": "gw"}],
        "gateways": ["gw"],
        "from": [{"group": GW, "kind": "HTTPRoute", "namespace": "x"}],
        "to": [{"group": "", "kind": "Service"}],
        "controllerName": "istio.io/gateway-controller",
    }
    assert refs(key, spec, None if key == "GatewayClass" else NS) == []


# Kuadrant -----------------------------------------------------------------------------------


def target(key: str, name: str, section: str = "") -> Ref:
    return Ref("targets", key, NS, name, section)


@pytest.mark.parametrize("policy", ["AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy"])
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # docs.kuadrant.io: targetRef {group, kind, name, sectionName?}, the policy's namespace.
        (
            {"targetRef": {"group": GW, "kind": "HTTPRoute", "name": "toystore"}},
            [target("HTTPRoute", "toystore")],
        ),
        (
            {
                "targetRef": {
                    "group": GW,
                    "kind": "Gateway",
                    "name": "external",
                    "sectionName": "api",
                }
            },
            [target("K8sGateway", "external", "api")],
        ),
        (
            {
                "targetRef": {
                    "group": GW,
                    "kind": "GRPCRoute",
                    "name": "grpc",
                    "namespace": "elsewhere",
                }
            },
            [target("GRPCRoute", "grpc")],
        ),
        # targetRefs (GEP-713), after targetRef, each once.
        (
            {
                "targetRef": {"group": GW, "kind": "Gateway", "name": "gw"},
                "targetRefs": [
                    {"group": GW, "kind": "Gateway", "name": "gw"},
                    {"group": GW, "kind": "Gateway", "name": "gw", "sectionName": "https"},
                    {"group": GW, "kind": "HTTPRoute", "name": "r"},
                ],
            },
            [
                target("K8sGateway", "gw"),
                target("K8sGateway", "gw", "https"),
                target("HTTPRoute", "r"),
            ],
        ),
        # group and kind are required; other kinds are no targets.
        ({"targetRef": {"kind": "HTTPRoute", "name": "toystore"}}, []),
        ({"targetRef": {"group": GW, "name": "toystore"}}, []),
        ({"targetRef": {"group": GW, "kind": "TCPRoute", "name": "t"}}, []),
        ({"targetRef": {"group": "", "kind": "Service", "name": "s"}}, []),
        ({"targetRef": {"group": "networking.istio.io", "kind": "Gateway", "name": "g"}}, []),
        ({"targetRef": "gw", "targetRefs": {"name": "gw"}}, []),
        ({"targetRef": {"group": GW, "kind": "Gateway", "name": "gw", "sectionName": {}}}, []),
    ],
)
def test_policy_targets(policy: str, spec: Any, expected: list[Ref]) -> None:
    assert refs(policy, spec) == expected


# The registry's extractors ------------------------------------------------------------------

# What issue 15 names per built-in kind; every built-in kind also gets managedBy.
EXPECTED_RELATIONS = {
    "Kustomization": {"flux-source", "flux-dependsOn"},
    "HelmRelease": {"flux-chart-source", "flux-chart-ref", "flux-dependsOn"},
    "HelmChart": {"flux-source"},
    "ImagePolicy": {"flux-imageRepository"},
    "ImageUpdateAutomation": {"flux-git-source"},
    "Alert": {"flux-provider"},
    "VirtualService": {"istio-gateways"},
    "K8sGateway": {"gateway-class"},
    "HTTPRoute": {"gateway-parents", "gateway-backends"},
    "GRPCRoute": {"gateway-parents", "gateway-backends"},
    "TLSRoute": {"gateway-parents", "gateway-backends"},
    "TCPRoute": {"gateway-parents", "gateway-backends"},
    "AuthPolicy": {"policy-targets"},
    "RateLimitPolicy": {"policy-targets"},
    "DNSPolicy": {"policy-targets"},
    "TLSPolicy": {"policy-targets"},
}


def test_every_builtin_kind_has_the_extractors_the_issue_names() -> None:
    got = {k.key: set(k.relations) for k in REGISTRY}
    want = {k.key: {*EXPECTED_RELATIONS.get(k.key, ()), "managedBy"} for k in REGISTRY}
    assert got == want
    assert len(got) == 34


@pytest.mark.parametrize("name", RELATION_EXTRACTORS)
def test_every_extractor_name_is_implemented(name: str) -> None:
    kind = Kind("example.io", ("v1",), "Widget", "widgets", "conditions", relations=(name,))
    assert extract(kind, obj({})) == []
    assert extract(kind, "not an object") == []  # type: ignore[arg-type]


def test_relations_name_each_edge_type() -> None:
    found = {
        *(r.relation for case in HELM for r in case[1]),
        *(r.relation for r in refs("Kustomization", {"dependsOn": [{"name": "a"}]})),
    }
    assert found <= set(RELATIONS)
    assert len(RELATIONS) == len(set(RELATIONS)) == 12


def test_kinds_file_kinds_use_the_extractors(tmp_path: Path) -> None:
    f = tmp_path / "kinds.yaml"
    f.write_text(
        "- {group: gateway.networking.k8s.io, versions: [v1alpha2], kind: UDPRoute,"
        "   plural: udproutes, status_rule: route, relations: [gateway-parents, gateway-backends]}\n"
        "- {group: example.io, versions: [v1], kind: Pipeline, plural: pipelines,"
        "   relations: [flux-source, flux-dependsOn, managedBy]}\n"
        "- {group: example.io, versions: [v1], kind: Widget, plural: widgets}\n"
        "- {group: example.io, versions: [v1], kind: Plain, plural: plains, relations: []}\n"
    )
    reg = load_registry(str(f))
    udp, pipeline, widget, plain = (reg.get(k) for k in ("UDPRoute", "Pipeline", "Widget", "Plain"))
    assert udp and pipeline and widget and plain
    spec = {
        "parentRefs": [{"name": "gw", "sectionName": "dns"}],
        "rules": [{"backendRefs": [{"name": "coredns", "port": 53}]}],
    }
    assert extract(udp, obj(spec)) == [parent("gw", "dns"), backend("coredns")]
    spec = {
        "sourceRef": {"kind": "GitRepository", "name": "repo"},
        "dependsOn": [{"name": "build", "namespace": "ci"}],
    }
    assert extract(pipeline, obj(spec, labels=KUSTOMIZE)) == [
        Ref("source", "GitRepository", NS, "repo"),
        Ref("dependsOn", "Pipeline", "ci", "build"),  # dependsOn names the kind's own key
        Ref("managedBy", "Kustomization", "flux-system", "apps"),
    ]
    # Without `relations`, a kinds-file kind is linked to the Kustomization that applied it.
    assert widget.relations == ("managedBy",)
    assert extract(widget, obj(spec, labels=KUSTOMIZE)) == [
        Ref("managedBy", "Kustomization", "flux-system", "apps")
    ]
    assert extract(plain, obj(spec, labels=KUSTOMIZE)) == []


def test_the_documented_table_lists_every_extractor_once() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text()
    section = doc.split("## Relations", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([\w-]+)` \|", section, re.MULTILINE)
    assert sorted(documented) == sorted(RELATION_EXTRACTORS)
