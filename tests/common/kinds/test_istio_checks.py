"""fleetscope's Istio validation (common/kinds/istio_checks.py): one table per check, each with
cases that pass and cases that fail, shaped like real Istio YAML and following Istio's and
Kiali's semantics (short names, `name.ns`, FQDNs, wildcards, exportTo, cross-namespace
references). Every case runs twice: on full objects and on their `essentials()`."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest

from common.kinds.istio_checks import CHECKED_KINDS, ROOT_NAMESPACE, essentials, validate
from common.kinds.registry import BUILTIN_KINDS
from common.kinds.status import Finding
from tests.support.paths import REPO

NAMESPACES = ["istio-system", "bookinfo", "shop", "frontend", "edge"]
GROUPS = {
    "VirtualService": "networking.istio.io",
    "DestinationRule": "networking.istio.io",
    "Gateway": "networking.istio.io",
    "ServiceEntry": "networking.istio.io",
    "Sidecar": "networking.istio.io",
    "WorkloadEntry": "networking.istio.io",
    "AuthorizationPolicy": "security.istio.io",
    "PeerAuthentication": "security.istio.io",
    "RequestAuthentication": "security.istio.io",
    "Telemetry": "telemetry.istio.io",
    "K8sGateway": "gateway.networking.k8s.io",
}


def istio(kind: str, ns: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUPS[kind]}/v1",
        "kind": kind,
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{ns}-{name}", **meta},
        "spec": spec,
        "status": {},
    }


def svc(
    ns: str, name: str, selector: dict[str, str] | None = None, export_to: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": ns, "name": name, "labels": {"app": name}}
    if export_to:
        meta["annotations"] = {"networking.istio.io/exportTo": export_to, "other": "x"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": selector or {"app": name},
            "ports": [{"name": "http", "port": 9080, "targetPort": 9080}],
            "clusterIP": "10.0.0.1",
        },
    }


def vs(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return istio("VirtualService", ns, name, {"hosts": [name], **spec})


def route(host: str, subset: str = "") -> list[dict[str, Any]]:
    dest = {"host": host, **({"subset": subset} if subset else {})}
    return [{"route": [{"destination": dest, "weight": 100}]}]


def dr(ns: str, name: str, host: str, *subsets: str, **spec: Any) -> dict[str, Any]:
    subs = [{"name": s, "labels": {"version": s}} for s in subsets]
    return istio(
        "DestinationRule", ns, name, {"host": host, **({"subsets": subs} if subs else {}), **spec}
    )


def gw(ns: str, name: str, *servers: dict[str, Any], selector: dict[str, str] | None = None):
    sel = {"istio": "ingressgateway"} if selector is None else selector
    return istio("Gateway", ns, name, {"selector": sel, "servers": list(servers)})


def server(port: int, *hosts: str, **extra: Any) -> dict[str, Any]:
    proto = "HTTPS" if port == 443 else "HTTP"
    return {
        "port": {"number": port, "name": f"p{port}", "protocol": proto},
        "hosts": list(hosts),
        **extra,
    }


def se(ns: str, name: str, *hosts: str, **spec: Any) -> dict[str, Any]:
    ports = [{"number": 443, "name": "https", "protocol": "TLS"}]
    body = {"hosts": list(hosts), "ports": ports, "location": "MESH_EXTERNAL", "resolution": "DNS"}
    return istio("ServiceEntry", ns, name, {**body, **spec})


def pa(ns: str, name: str, mode: str, selector: dict[str, str] | None = None, **meta: Any):
    spec: dict[str, Any] = {"mtls": {"mode": mode}} if mode else {}
    if selector:
        spec["selector"] = {"matchLabels": selector}
    return istio("PeerAuthentication", ns, name, spec, **meta)


SERVICES = [
    svc("bookinfo", "reviews", {"app": "reviews"}),
    svc("bookinfo", "ratings"),
    svc("shop", "cart"),
    svc("shop", "internal", export_to="."),
    svc("shop", "partner", export_to="frontend"),
]


@pytest.fixture(params=["full", "essentials"])
def form(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(
    form: str,
    objects: list[dict[str, Any]],
    services: list[dict[str, Any]] | None = None,
    namespaces: list[str] | None = None,
    root: str = ROOT_NAMESPACE,
) -> dict[tuple[str, str, str], list[Finding]]:
    services = SERVICES if services is None else services
    if form == "essentials":
        objects = [{"kind": o["kind"], **essentials(o["kind"], o)} for o in objects]
        services = [essentials("Service", s) for s in services]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objects:
        by_kind.setdefault(o["kind"], []).append(o)
    return validate(by_kind, services, NAMESPACES if namespaces is None else namespaces, root)


def codes(
    result: dict[tuple[str, str, str], list[Finding]], key: tuple[str, str, str]
) -> list[str]:
    return [f.code for f in result[key]]


def check(form: str, objects: list[dict[str, Any]], key: tuple[str, str, str], expected: list[str]):
    result = run(form, objects)
    assert codes(result, key) == expected, result[key]
    return result


def key(kind: str, ns: str, name: str) -> tuple[str, str, str]:
    return ns, kind, name


def levels(result: dict[tuple[str, str, str], list[Finding]], k: tuple[str, str, str]) -> list[str]:
    return [f.level for f in result[k]]


# VirtualService: gateways (KIA1102, error) ---------------------------------------------------

INGRESS = gw("shop", "ingress", server(80, "shop.example.com"))
K8S_GW = istio("K8sGateway", "edge", "public", {"gatewayClassName": "istio", "listeners": []})
HTTP_MATCH = [{"match": [{"gateways": ["edge/gone"], "uri": {"prefix": "/"}}], **route("cart")[0]}]
TLS_MATCH = [{"match": [{"gateways": ["gone"], "sniHosts": ["a.example.com"]}]}]


@pytest.mark.parametrize(
    ("objects", "ns", "expected"),
    [
        pytest.param([INGRESS, vs("shop", "v", gateways=["ingress"])], "shop", [], id="short"),
        pytest.param(
            [INGRESS, vs("bookinfo", "v", gateways=["shop/ingress"])], "bookinfo", [], id="ns/name"
        ),
        pytest.param(
            [INGRESS, vs("shop", "v", gateways=["./ingress"])], "shop", [], id="dot-slash"
        ),
        pytest.param(
            [INGRESS, vs("bookinfo", "v", gateways=["ingress.shop.svc.cluster.local"])],
            "bookinfo",
            [],
            id="legacy-fqdn",
        ),
        pytest.param([vs("shop", "v", gateways=["mesh"])], "shop", [], id="mesh-reserved"),
        pytest.param([vs("shop", "v")], "shop", [], id="none"),
        pytest.param(
            [K8S_GW, vs("shop", "v", gateways=["edge/public"])], "shop", [], id="k8s-gateway"
        ),
        pytest.param(
            [INGRESS, vs("bookinfo", "v", gateways=["ingress"])],
            "bookinfo",
            ["KIA1102"],
            id="short-is-own-ns",
        ),
        pytest.param(
            [INGRESS, vs("shop", "v", gateways=["shop/gone"])], "shop", ["KIA1102"], id="missing"
        ),
        pytest.param(
            [INGRESS, vs("shop", "v", gateways=["mesh", "gone", "ingress"])],
            "shop",
            ["KIA1102"],
            id="one-of-3",
        ),
        pytest.param(
            [INGRESS, vs("shop", "v", http=HTTP_MATCH)], "shop", ["KIA1102"], id="http-match"
        ),
        pytest.param(
            [INGRESS, vs("shop", "v", tls=TLS_MATCH)], "shop", ["KIA1102"], id="tls-match"
        ),
        pytest.param(
            [vs("shop", "v", gateways=["gone"], http=[{"match": [{"gateways": ["gone"]}]}])],
            "shop",
            ["KIA1102"],
            id="reported-once",
        ),
    ],
)
def test_virtualservice_gateway(
    form: str, objects: list[dict[str, Any]], ns: str, expected: list[str]
):
    result = check(form, objects, key("VirtualService", ns, "v"), expected)
    assert set(levels(result, key("VirtualService", ns, "v"))) <= {"error"}


def test_virtualservice_gateway_messages_name_the_resolved_reference(form: str):
    result = run(form, [vs("bookinfo", "v", gateways=["ingress", "shop/gone"])])
    assert [f.message for f in result[key("VirtualService", "bookinfo", "v")]] == [
        'gateway "bookinfo/ingress" not found',
        'gateway "shop/gone" not found',
    ]


def test_deleting_the_gateway_turns_its_virtualservices_unhealthy(form: str):
    objects = [
        INGRESS,
        vs("shop", "a", gateways=["ingress"]),
        vs("bookinfo", "b", gateways=["shop/ingress"]),
    ]
    assert all(not f for f in run(form, objects).values())
    after = run(form, objects[1:])
    assert codes(after, key("VirtualService", "shop", "a")) == ["KIA1102"]
    assert codes(after, key("VirtualService", "bookinfo", "b")) == ["KIA1102"]


# VirtualService: destination subsets (KIA1107, error) ----------------------------------------

REVIEWS_DR = dr("bookinfo", "reviews", "reviews", "v1", "v2")


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [REVIEWS_DR, vs("bookinfo", "v", http=route("reviews", "v1"))], [], id="short-same-ns"
        ),
        pytest.param(
            [
                REVIEWS_DR,
                vs("frontend", "v", http=route("reviews.bookinfo.svc.cluster.local", "v2")),
            ],
            [],
            id="fqdn-to-short-dr-in-service-ns",
        ),
        pytest.param(
            [
                dr("frontend", "d", "reviews.bookinfo.svc.cluster.local", "v1"),
                vs("frontend", "v", http=route("reviews.bookinfo", "v1")),
            ],
            [],
            id="name.ns-to-fqdn-dr-in-vs-ns",
        ),
        pytest.param(
            [REVIEWS_DR, vs("frontend", "v", http=route("reviews.bookinfo.svc", "v1"))],
            [],
            id="name.ns.svc",
        ),
        pytest.param(
            [
                dr("bookinfo", "all", "*.bookinfo.svc.cluster.local", "v1"),
                vs("bookinfo", "v", http=route("reviews", "v1")),
            ],
            [],
            id="wildcard-dr",
        ),
        pytest.param(
            [
                dr("bookinfo", "d", "reviews", "v1", exportTo=["frontend"]),
                vs("frontend", "v", http=route("reviews.bookinfo", "v1")),
            ],
            [],
            id="exported-to-vs-ns",
        ),
        pytest.param([vs("bookinfo", "v", http=route("reviews"))], [], id="no-subset-no-dr"),
        pytest.param(
            [REVIEWS_DR, vs("bookinfo", "v", http=route("reviews", "v3"))],
            ["KIA1107"],
            id="unknown-subset",
        ),
        pytest.param([vs("bookinfo", "v", http=route("reviews", "v1"))], ["KIA1107"], id="no-dr"),
        pytest.param(
            [REVIEWS_DR, vs("frontend", "v", http=route("reviews", "v1"))],
            ["KIA1107"],
            id="short-is-vs-ns",
        ),
        pytest.param(
            [
                dr("bookinfo", "d", "reviews", "v1", exportTo=["."]),
                vs("frontend", "v", http=route("reviews.bookinfo", "v1")),
            ],
            ["KIA1107"],
            id="dr-exported-only-to-its-ns",
        ),
        pytest.param(
            [REVIEWS_DR, vs("bookinfo", "v", tcp=route("reviews", "v9"))],
            ["KIA1107"],
            id="tcp-route",
        ),
        pytest.param(
            [
                REVIEWS_DR,
                vs(
                    "bookinfo",
                    "v",
                    tls=[{"match": [{"sniHosts": ["r"]}], **route("reviews", "v9")[0]}],
                ),
            ],
            ["KIA1107"],
            id="tls-route",
        ),
        pytest.param(
            [
                REVIEWS_DR,
                vs(
                    "bookinfo",
                    "v",
                    http=[
                        {**route("reviews", "v1")[0], "mirror": {"host": "reviews", "subset": "v9"}}
                    ],
                ),
            ],
            ["KIA1107"],
            id="http-mirror",
        ),
        pytest.param(
            [
                dr("shop", "d", "reviews.bookinfo.svc.cluster.local", "v1", exportTo=["."]),
                vs("bookinfo", "v", http=route("reviews", "v1")),
            ],
            ["KIA1107"],
            id="dr-elsewhere-not-exported",
        ),
    ],
)
def test_virtualservice_subset(form: str, objects: list[dict[str, Any]], expected: list[str]):
    ns = objects[-1]["metadata"]["namespace"]
    result = run(form, objects)
    found = [f for f in result[key("VirtualService", ns, "v")] if f.code == "KIA1107"]
    assert [f.code for f in found] == expected
    assert all(f.level == "error" for f in found)


def test_subset_message(form: str):
    result = run(form, [REVIEWS_DR, vs("bookinfo", "v", http=route("reviews", "v3"))])
    assert result[key("VirtualService", "bookinfo", "v")] == [
        Finding(
            "error", "KIA1107", 'subset "v3" of host "reviews" not found in any DestinationRule'
        )
    ]


# VirtualService and DestinationRule: hosts (KIA1101 / KIA0202, warning) ----------------------


@pytest.mark.parametrize(
    ("host", "ns", "objects", "found"),
    [
        pytest.param("reviews", "bookinfo", [], True, id="short"),
        pytest.param("reviews.bookinfo", "frontend", [], True, id="name.ns"),
        pytest.param("reviews.bookinfo.svc", "frontend", [], True, id="name.ns.svc"),
        pytest.param("reviews.bookinfo.svc.cluster.local", "frontend", [], True, id="fqdn"),
        pytest.param(
            "REVIEWS.bookinfo.svc.cluster.local", "frontend", [], True, id="case-insensitive"
        ),
        pytest.param("reviews", "frontend", [], False, id="short-is-own-ns"),
        pytest.param("reviews.nowhere", "frontend", [], False, id="name.unknown-ns"),
        pytest.param(
            "internal.shop.svc.cluster.local", "shop", [], True, id="svc-exported-dot-same-ns"
        ),
        pytest.param(
            "internal.shop.svc.cluster.local", "frontend", [], False, id="svc-exported-dot-other-ns"
        ),
        pytest.param("partner.shop", "frontend", [], True, id="svc-exported-to-viewer"),
        pytest.param("partner.shop", "bookinfo", [], False, id="svc-not-exported-to-viewer"),
        pytest.param(
            "api.example.com", "shop", [se("edge", "api", "api.example.com")], True, id="se-host"
        ),
        pytest.param(
            "a.b.example.com", "shop", [se("edge", "w", "*.example.com")], True, id="se-wildcard"
        ),
        pytest.param(
            "example.com",
            "shop",
            [se("edge", "w", "*.example.com")],
            False,
            id="se-wildcard-not-apex",
        ),
        pytest.param(
            "api.example.org",
            "shop",
            [se("edge", "w", "*.example.com")],
            False,
            id="se-other-domain",
        ),
        pytest.param(
            "api.example.com",
            "shop",
            [se("edge", "api", "api.example.com", exportTo=["."])],
            False,
            id="se-private",
        ),
        pytest.param(
            "api.example.com",
            "edge",
            [se("edge", "api", "api.example.com", exportTo=["."])],
            True,
            id="se-private-own-ns",
        ),
        pytest.param("db", "shop", [se("shop", "db", "db")], True, id="se-short-host"),
        pytest.param("api.example.com", "shop", [], False, id="external-unknown"),
    ],
)
def test_destination_hosts(
    form: str, host: str, ns: str, objects: list[dict[str, Any]], found: bool
):
    result = run(form, [*objects, vs(ns, "v", http=route(host)), dr(ns, "d", host)])
    expected_vs = (
        []
        if found
        else [Finding("warning", "KIA1101", f'host "{host}" matches no Service or ServiceEntry')]
    )
    expected_dr = (
        []
        if found
        else [Finding("warning", "KIA0202", f'host "{host}" matches no Service or ServiceEntry')]
    )
    assert result[key("VirtualService", ns, "v")] == expected_vs
    assert result[key("DestinationRule", ns, "d")] == expected_dr


def test_gateway_bound_virtualservice_hosts_are_external_names(form: str):
    obj = vs("shop", "v", gateways=["ingress"], http=route("cart"))
    obj["spec"]["hosts"] = ["www.shop.example.com"]
    assert run(form, [INGRESS, obj])[key("VirtualService", "shop", "v")] == []


@pytest.mark.parametrize("host", ["*.bookinfo.svc.cluster.local", "*.local", "*", "*.example.com"])
def test_wildcard_destinationrule_hosts_are_patterns(form: str, host: str):
    assert run(form, [dr("bookinfo", "d", host)])[key("DestinationRule", "bookinfo", "d")] == []


# DestinationRule: duplicates (KIA0201, warning on both) --------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1"),
            dr("bookinfo", "b", "reviews", "v1", "v2"),
            True,
            id="same-subset",
        ),
        pytest.param(
            dr(
                "bookinfo",
                "a",
                "reviews",
                trafficPolicy={"loadBalancer": {"simple": "LEAST_REQUEST"}},
            ),
            dr(
                "bookinfo",
                "b",
                "reviews.bookinfo.svc.cluster.local",
                trafficPolicy={"tls": {"mode": "ISTIO_MUTUAL"}},
            ),
            True,
            id="two-traffic-policies-short-vs-fqdn",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1"),
            dr("bookinfo", "b", "reviews", "v2"),
            False,
            id="merged-subsets",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", trafficPolicy={"loadBalancer": {"simple": "RANDOM"}}),
            dr("bookinfo", "b", "reviews", "v1"),
            False,
            id="policy-plus-subsets",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1"),
            dr("frontend", "b", "reviews.bookinfo", "v1"),
            False,
            id="other-ns",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1"),
            dr("bookinfo", "b", "ratings", "v1"),
            False,
            id="other-host",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1", workloadSelector={"matchLabels": {"app": "x"}}),
            dr("bookinfo", "b", "reviews", "v1", workloadSelector={"matchLabels": {"app": "y"}}),
            False,
            id="different-selectors",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1", exportTo=["."]),
            dr("bookinfo", "b", "reviews", "v1", exportTo=["*"]),
            False,
            id="different-exportTo",
        ),
        pytest.param(
            dr("bookinfo", "a", "reviews", "v1", exportTo=["."]),
            dr("bookinfo", "b", "reviews", "v1", exportTo=["bookinfo"]),
            True,
            id="same-exportTo-spelled-differently",
        ),
    ],
)
def test_duplicate_destination_rules(
    form: str, first: dict[str, Any], second: dict[str, Any], conflict: bool
):
    result = run(form, [first, second])
    for obj, other in ((first, second), (second, first)):
        k = key("DestinationRule", obj["metadata"]["namespace"], obj["metadata"]["name"])
        dup = [f for f in result[k] if f.code == "KIA0201"]
        assert len(dup) == (1 if conflict else 0)
        if conflict:
            assert dup[0].level == "warning"
            assert (
                f'"{other["metadata"]["namespace"]}/{other["metadata"]["name"]}"' in dup[0].message
            )


def test_three_duplicates_name_one_other_each_whatever_the_order(form: str):
    rules = [dr("bookinfo", n, "reviews", "v1") for n in ("c", "a", "b")]
    for objects in (rules, rules[::-1]):
        result = run(form, objects)
        messages = {k[2]: [f.message for f in v] for k, v in result.items()}
        assert messages == {
            "a": ['DestinationRule "bookinfo/b" also sets subset "v1" for host "reviews"'],
            "b": ['DestinationRule "bookinfo/a" also sets subset "v1" for host "reviews"'],
            "c": ['DestinationRule "bookinfo/a" also sets subset "v1" for host "reviews"'],
        }


# DestinationRule tls DISABLE against STRICT PeerAuthentication (KIA0207 / KIA0208, error) ---

DISABLE = {"trafficPolicy": {"tls": {"mode": "DISABLE"}}}


def disabled(ns: str, host: str) -> dict[str, Any]:
    return dr(ns, "d", host, **DISABLE)


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [pa("istio-system", "default", "STRICT"), disabled("bookinfo", "reviews")],
            ["KIA0208"],
            id="mesh-strict",
        ),
        pytest.param(
            [
                pa("istio-system", "default", "STRICT"),
                pa("bookinfo", "default", "PERMISSIVE"),
                disabled("bookinfo", "reviews"),
            ],
            [],
            id="namespace-permissive-overrides-mesh",
        ),
        pytest.param(
            [
                pa("istio-system", "default", "STRICT"),
                pa("bookinfo", "default", "DISABLE"),
                disabled("bookinfo", "reviews"),
            ],
            [],
            id="namespace-disable-overrides-mesh",
        ),
        pytest.param(
            [
                pa("istio-system", "default", "STRICT"),
                pa("bookinfo", "default", "UNSET"),
                disabled("bookinfo", "reviews"),
            ],
            ["KIA0208"],
            id="namespace-unset-inherits",
        ),
        pytest.param(
            [pa("bookinfo", "default", "STRICT"), disabled("bookinfo", "reviews")],
            ["KIA0207"],
            id="namespace-strict",
        ),
        pytest.param(
            [
                pa("istio-system", "default", "PERMISSIVE"),
                pa("bookinfo", "default", "STRICT"),
                disabled("frontend", "reviews.bookinfo.svc.cluster.local"),
            ],
            ["KIA0207"],
            id="client-ns-dr-server-ns-strict",
        ),
        pytest.param(
            [pa("bookinfo", "default", "STRICT"), disabled("frontend", "reviews")],
            [],
            id="short-host-is-dr-ns",
        ),
        pytest.param(
            [pa("shop", "default", "STRICT"), disabled("bookinfo", "reviews")],
            [],
            id="other-namespace-strict",
        ),
        pytest.param(
            [
                pa("istio-system", "default", "STRICT"),
                se("edge", "api", "api.example.com"),
                disabled("edge", "api.example.com"),
            ],
            [],
            id="external-host",
        ),
        pytest.param(
            [
                pa("istio-system", "gw-only", "STRICT", {"istio": "ingressgateway"}),
                disabled("bookinfo", "reviews"),
            ],
            [],
            id="root-ns-with-selector-is-not-mesh-wide",
        ),
        pytest.param(
            [
                pa("istio-system", "default", "STRICT"),
                dr("bookinfo", "d", "reviews", trafficPolicy={"tls": {"mode": "ISTIO_MUTUAL"}}),
            ],
            [],
            id="istio-mutual",
        ),
        pytest.param(
            [pa("istio-system", "default", "STRICT"), disabled("bookinfo", "*.local")],
            ["KIA0208"],
            id="mesh-wide-dr",
        ),
        pytest.param(
            [
                pa("bookinfo", "default", "STRICT"),
                disabled("bookinfo", "*.bookinfo.svc.cluster.local"),
            ],
            ["KIA0207"],
            id="namespace-wide-dr",
        ),
        pytest.param(
            [
                pa("bookinfo", "default", "STRICT"),
                pa("bookinfo", "reviews", "PERMISSIVE", {"app": "reviews"}),
                disabled("bookinfo", "reviews"),
            ],
            [],
            id="workload-permissive-exception",
        ),
        pytest.param(
            [
                pa("bookinfo", "default", "STRICT"),
                pa("bookinfo", "other", "PERMISSIVE", {"app": "ratings"}),
                disabled("bookinfo", "reviews"),
            ],
            ["KIA0207"],
            id="exception-for-another-workload",
        ),
        pytest.param(
            [
                pa("bookinfo", "reviews", "STRICT", {"app": "reviews"}),
                disabled("bookinfo", "reviews"),
            ],
            ["KIA0207"],
            id="workload-strict",
        ),
        pytest.param(
            [
                pa("bookinfo", "old", "STRICT", creationTimestamp="2026-01-01T00:00:00Z"),
                pa("bookinfo", "new", "PERMISSIVE", creationTimestamp="2026-02-01T00:00:00Z"),
                disabled("bookinfo", "reviews"),
            ],
            ["KIA0207"],
            id="oldest-namespace-policy-wins",
        ),
    ],
)
def test_disabled_mtls_against_strict(
    form: str, objects: list[dict[str, Any]], expected: list[str]
):
    result = run(form, objects)
    found = [
        f
        for f in result[key("DestinationRule", objects[-1]["metadata"]["namespace"], "d")]
        if f.code in ("KIA0207", "KIA0208")
    ]
    assert [f.code for f in found] == expected
    assert all(f.level == "error" for f in found)


def test_disabled_mtls_message_and_custom_root_namespace(form: str):
    objects = [pa("istio-config", "default", "STRICT"), disabled("bookinfo", "reviews")]
    assert (
        run(form, objects, namespaces=[*NAMESPACES, "istio-config"])[
            key("DestinationRule", "bookinfo", "d")
        ]
        == []
    )
    result = run(form, objects, namespaces=[*NAMESPACES, "istio-config"], root="istio-config")
    assert result[key("DestinationRule", "bookinfo", "d")] == [
        Finding(
            "error",
            "KIA0208",
            'tls.mode DISABLE for "reviews" but mesh-wide PeerAuthentication "istio-config/default" is STRICT',
        )
    ]


# Gateway: same selector, port and host (KIA0301, warning on both) ----------------------------


@pytest.mark.parametrize(
    ("first", "second", "conflict"),
    [
        pytest.param(
            gw("shop", "a", server(443, "shop.example.com")),
            gw("edge", "b", server(443, "shop.example.com")),
            True,
            id="same-host-port",
        ),
        pytest.param(
            gw("shop", "a", server(80, "shop.example.com")),
            gw("edge", "b", server(443, "shop.example.com")),
            False,
            id="other-port",
        ),
        pytest.param(
            gw("shop", "a", server(80, "shop.example.com")),
            gw("edge", "b", server(80, "shop.example.com"), selector={"istio": "internal"}),
            False,
            id="other-selector",
        ),
        pytest.param(
            gw("shop", "a", server(80, "x.com"), selector={"app": "gw", "istio": "ingressgateway"}),
            gw("edge", "b", server(80, "x.com"), selector={"istio": "ingressgateway", "app": "gw"}),
            True,
            id="selector-order-irrelevant",
        ),
        pytest.param(
            gw("shop", "a", server(80, "*")),
            gw("edge", "b", server(80, "shop.example.com")),
            True,
            id="star-overlaps-all",
        ),
        pytest.param(
            gw("shop", "a", server(80, "shop/foo.com")),
            gw("edge", "b", server(80, "edge/foo.com")),
            True,
            id="ns-part-stripped",
        ),
        pytest.param(
            gw("shop", "a", server(80, "./foo.com")),
            gw("edge", "b", server(80, "*/foo.com")),
            True,
            id="dot-and-star-ns",
        ),
        pytest.param(
            gw("shop", "a", server(80, "*.example.com")),
            gw("edge", "b", server(80, "api.example.com")),
            True,
            id="wildcard-covers",
        ),
        pytest.param(
            gw("shop", "a", server(80, "*.example.com")),
            gw("edge", "b", server(80, "*.api.example.com")),
            False,
            id="two-wildcards",
        ),
        pytest.param(
            gw("shop", "a", server(80, "example.com")),
            gw("edge", "b", server(80, "api.example.com")),
            False,
            id="subdomain",
        ),
        pytest.param(
            gw("shop", "a", server(80, "api-dev.example.com")),
            gw("edge", "b", server(80, "api.dev.example.com")),
            False,
            id="no-regex-dot",
        ),
        pytest.param(
            gw("shop", "a", server(80, "Foo.COM")),
            gw("edge", "b", server(80, "foo.com")),
            True,
            id="case-insensitive",
        ),
        pytest.param(
            gw("shop", "a", server(80, "foo.com", bind="10.0.0.1")),
            gw("edge", "b", server(80, "foo.com", bind="10.0.0.2")),
            False,
            id="other-bind",
        ),
    ],
)
def test_gateway_conflicts(
    form: str, first: dict[str, Any], second: dict[str, Any], conflict: bool
):
    result = run(form, [first, second])
    for obj, other in ((first, second), (second, first)):
        k = key("Gateway", obj["metadata"]["namespace"], obj["metadata"]["name"])
        assert codes(result, k) == (["KIA0301"] if conflict else [])
        if conflict:
            assert levels(result, k) == ["warning"]
            assert (
                f'Gateway "{other["metadata"]["namespace"]}/{other["metadata"]["name"]}"'
                in result[k][0].message
            )


def test_one_gateway_repeating_a_host_is_not_a_conflict(form: str):
    obj = gw("shop", "a", server(80, "foo.com"), server(80, "foo.com", "*.foo.com"))
    assert run(form, [obj])[key("Gateway", "shop", "a")] == []


def test_gateway_conflict_message(form: str):
    result = run(form, [gw("shop", "a", server(443, "x.com")), gw("edge", "b", server(443, "*"))])
    assert result[key("Gateway", "shop", "a")] == [
        Finding(
            "warning", "KIA0301", 'host "x.com" on port 443 is also exposed by Gateway "edge/b"'
        )
    ]


# ServiceEntry --------------------------------------------------------------------------------

ENDPOINTS = [{"address": "10.1.0.1"}]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"resolution": "STATIC", "endpoints": ENDPOINTS}, [], id="static-endpoints"),
        pytest.param({"resolution": "DNS"}, [], id="dns"),
        pytest.param({"resolution": "NONE"}, [], id="none-without-endpoints"),
        pytest.param(
            {"resolution": "NONE", "endpoints": ENDPOINTS}, ["FS1201"], id="none-with-endpoints"
        ),
        pytest.param(
            {"resolution": None, "endpoints": ENDPOINTS}, ["FS1201"], id="default-is-none"
        ),
        pytest.param(
            {
                "resolution": "STATIC",
                "endpoints": ENDPOINTS,
                "workloadSelector": {"labels": {"app": "vm"}},
            },
            ["FS1202"],
            id="selector-and-endpoints",
        ),
        pytest.param(
            {"resolution": "STATIC", "workloadSelector": {"labels": {"app": "vm"}}},
            [],
            id="selector-only",
        ),
        pytest.param({"exportTo": [".", "*", "~", "shop"]}, [], id="exportTo-known"),
        pytest.param({"exportTo": ["ghost"]}, ["KIA0005"], id="exportTo-unknown-ns"),
    ],
)
def test_service_entry_config(form: str, spec: dict[str, Any], expected: list[str]):
    obj = se("edge", "api", "api.example.com", **spec)
    if spec.get("resolution", "") is None:
        del obj["spec"]["resolution"]
    result = run(form, [obj])
    assert codes(result, key("ServiceEntry", "edge", "api")) == expected
    assert set(levels(result, key("ServiceEntry", "edge", "api"))) <= {"error"}


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param(
            se("edge", "a", "api.example.com"),
            se("shop", "b", "API.example.com"),
            "KIA1211",
            id="both-everywhere",
        ),
        pytest.param(
            se("edge", "a", "api.example.com"),
            se("edge", "b", "other.example.com"),
            None,
            id="other-host",
        ),
        pytest.param(
            se("edge", "a", "api.example.com"),
            se(
                "shop",
                "b",
                "api.example.com",
                ports=[{"number": 8443, "name": "tls", "protocol": "TLS"}],
            ),
            None,
            id="other-port",
        ),
        pytest.param(
            se("edge", "a", "api.example.com", exportTo=["."]),
            se("shop", "b", "api.example.com", exportTo=["."]),
            None,
            id="private-each",
        ),
        pytest.param(
            se("edge", "a", "api.example.com", exportTo=["."]),
            se("shop", "b", "api.example.com", exportTo=["edge"]),
            "KIA1211",
            id="private-meets-exported",
        ),
        pytest.param(
            se("edge", "a", "api.example.com", exportTo=["."]),
            se("shop", "b", "api.example.com"),
            "KIA1211",
            id="private-meets-public",
        ),
        pytest.param(
            se("edge", "a", "api.example.com", exportTo=["~"]),
            se("shop", "b", "api.example.com"),
            None,
            id="exported-nowhere",
        ),
        pytest.param(
            se("edge", "a", "api.example.com"),
            se(
                "shop",
                "b",
                "api.example.com",
                ports=[{"number": 443, "name": "https", "protocol": "HTTPS"}],
            ),
            "KIA1212",
            id="protocol-conflict",
        ),
    ],
)
def test_duplicate_service_entries(
    form: str, first: dict[str, Any], second: dict[str, Any], expected: str | None
):
    result = run(form, [first, second])
    for obj, other in ((first, second), (second, first)):
        k = key("ServiceEntry", obj["metadata"]["namespace"], obj["metadata"]["name"])
        assert codes(result, k) == ([expected] if expected else [])
        if expected:
            assert levels(result, k) == ["warning"]
            assert (
                f'ServiceEntry "{other["metadata"]["namespace"]}/{other["metadata"]["name"]}"'
                in result[k][0].message
            )


# Sidecar -------------------------------------------------------------------------------------


def sidecar(
    ns: str, name: str, labels: dict[str, str] | None = None, hosts: list[str] | None = None
):
    spec: dict[str, Any] = {"egress": [{"hosts": hosts or ["./*", "istio-system/*"]}]}
    if labels is not None:
        spec["workloadSelector"] = {"labels": labels}
    return istio("Sidecar", ns, name, spec)


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [sidecar("shop", "a"), sidecar("shop", "b")],
            {"a": ["KIA0002"], "b": ["KIA0002"]},
            id="two-selectorless",
        ),
        pytest.param(
            [sidecar("shop", "a"), sidecar("shop", "b", {"app": "cart"})],
            {"a": [], "b": []},
            id="one-selectorless",
        ),
        pytest.param(
            [sidecar("shop", "a"), sidecar("edge", "b")], {"a": [], "b": []}, id="other-namespace"
        ),
        pytest.param(
            [sidecar("shop", "a"), sidecar("shop", "b", {})],
            {"a": ["KIA0002"], "b": ["KIA0002"]},
            id="empty-labels",
        ),
        pytest.param(
            [sidecar("istio-system", "a", {"app": "x"})],
            {"a": ["KIA1006"]},
            id="root-with-selector",
        ),
        pytest.param([sidecar("istio-system", "a")], {"a": []}, id="root-default"),
        pytest.param([sidecar("shop", "a", hosts=["*/*"])], {"a": []}, id="egress-all"),
        pytest.param(
            [
                sidecar(
                    "shop",
                    "a",
                    hosts=[
                        "./cart.shop.svc.cluster.local",
                        "bookinfo/reviews.bookinfo.svc.cluster.local",
                    ],
                )
            ],
            {"a": []},
            id="egress-services",
        ),
        pytest.param(
            [sidecar("shop", "a", hosts=["./gone.shop.svc.cluster.local"])],
            {"a": ["KIA1004"]},
            id="egress-missing",
        ),
        pytest.param(
            [sidecar("shop", "a", hosts=["*/*.example.com", "~/*"])],
            {"a": []},
            id="egress-wildcards",
        ),
    ],
)
def test_sidecars(form: str, objects: list[dict[str, Any]], expected: dict[str, list[str]]):
    result = run(form, objects)
    for obj in objects:
        k = key("Sidecar", obj["metadata"]["namespace"], obj["metadata"]["name"])
        assert codes(result, k) == expected[k[2]]
    levels_by_code = {f.code: f.level for fs in result.values() for f in fs}
    assert levels_by_code.get("KIA0002", "error") == "error"
    assert levels_by_code.get("KIA1006", "warning") == "warning"
    assert levels_by_code.get("KIA1004", "warning") == "warning"


def test_selectorless_sidecar_message(form: str):
    result = run(form, [sidecar("shop", "b"), sidecar("shop", "a")])
    assert result[key("Sidecar", "shop", "a")] == [
        Finding(
            "error", "KIA0002", 'Sidecar "shop/b" in this namespace also has no workloadSelector'
        )
    ]


# WorkloadEntry -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"address": "10.2.0.7", "ports": {"http": 8080}}, [], id="ip"),
        pytest.param({"address": "vm1.example.com"}, [], id="dns-name"),
        pytest.param({"network": "vm-net"}, [], id="no-address-on-a-network"),
        pytest.param({"labels": {"app": "vm"}}, ["FS1301"], id="no-address"),
        pytest.param({"address": "unix:///var/run/app.sock"}, [], id="uds"),
        pytest.param(
            {"address": "unix:///var/run/app.sock", "ports": {"http": 80}},
            ["FS1302"],
            id="uds-with-ports",
        ),
    ],
)
def test_workload_entries(form: str, spec: dict[str, Any], expected: list[str]):
    result = run(form, [istio("WorkloadEntry", "shop", "vm", spec)])
    assert codes(result, key("WorkloadEntry", "shop", "vm")) == expected
    assert set(levels(result, key("WorkloadEntry", "shop", "vm"))) <= {"error"}


# exportTo (KIA0005, error) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("export_to", "expected"),
    [
        ([".", "frontend"], []),
        (["*"], []),
        (["ghost"], ["KIA0005"]),
        ([".", "ghost", "gone"], ["KIA0005", "KIA0005"]),
    ],
)
def test_export_to_namespaces(form: str, export_to: list[str], expected: list[str]):
    result = run(
        form, [vs("shop", "v", exportTo=export_to), dr("shop", "d", "cart", exportTo=export_to)]
    )
    assert codes(result, key("VirtualService", "shop", "v")) == expected
    assert codes(result, key("DestinationRule", "shop", "d")) == expected


# Output order and one-shot inputs ------------------------------------------------------------


def test_errors_come_before_warnings(form: str):
    result = run(form, [vs("shop", "v", http=route("ghost", "v1"), exportTo=["nowhere"])])
    assert [(f.level, f.code) for f in result[key("VirtualService", "shop", "v")]] == [
        ("error", "KIA1107"),
        ("error", "KIA0005"),
        ("warning", "KIA1101"),
    ]


def test_inputs_may_be_one_shot_iterables():
    objects = {
        "Gateway": iter([INGRESS]),
        "VirtualService": (o for o in [vs("shop", "v", gateways=["ingress"])]),
    }
    result = validate(objects, iter(SERVICES), iter(NAMESPACES))
    assert result == {key("Gateway", "shop", "ingress"): [], key("VirtualService", "shop", "v"): []}


# AuthorizationPolicy ---------------------------------------------------------------------------


def authz(rules: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return istio(
        "AuthorizationPolicy", "shop", "p", {"action": "ALLOW", "rules": rules or [], **spec}
    )


def source(**fields: list[str]) -> list[dict[str, Any]]:
    return [{"from": [{"source": fields}]}]


def methods(*ms: str, field: str = "methods") -> list[dict[str, Any]]:
    return [{"to": [{"operation": {field: list(ms), "paths": ["/api/*"]}}]}]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            authz(source(namespaces=["frontend", "istio-system"])), [], id="namespaces-exist"
        ),
        pytest.param(
            authz(source(namespaces=["prod-*", "*-team", "*"])), [], id="wildcards-ignored"
        ),
        pytest.param(
            authz(source(namespaces=["frontend", "ghost"])), ["KIA0101"], id="namespace-missing"
        ),
        pytest.param(
            authz(source(notNamespaces=["ghost"])), ["KIA0101"], id="not-namespace-missing"
        ),
        pytest.param(
            authz(source(principals=["cluster.local/ns/ghost/sa/x"])),
            [],
            id="principals-not-checked",
        ),
        pytest.param(authz(methods("GET", "post", "GE*", "*ET", "*")), [], id="http-methods"),
        pytest.param(authz(methods("FETCH")), ["KIA0102"], id="not-a-method"),
        pytest.param(authz(methods("X*", field="notMethods")), ["KIA0102"], id="not-methods"),
        pytest.param(
            authz(targetRef={"kind": "Service", "group": "", "name": "cart"}),
            [],
            id="target-service",
        ),
        pytest.param(
            authz(targetRefs=[{"kind": "Service", "group": "", "name": "gone"}]),
            ["FS0001"],
            id="target-missing",
        ),
        pytest.param(
            authz(targetRefs=[{"kind": "Service", "name": "reviews"}]),
            ["FS0001"],
            id="target-other-ns-service",
        ),
        pytest.param(
            authz(
                targetRef={
                    "kind": "Gateway",
                    "group": "gateway.networking.k8s.io",
                    "name": "waypoint",
                }
            ),
            [],
            id="target-gateway-not-checked",
        ),
    ],
)
def test_authorization_policies(form: str, obj: dict[str, Any], expected: list[str]):
    result = run(form, [obj])
    assert codes(result, key("AuthorizationPolicy", "shop", "p")) == expected
    want = {"KIA0101": "warning", "KIA0102": "warning", "FS0001": "error"}
    assert all(f.level == want[f.code] for f in result[key("AuthorizationPolicy", "shop", "p")])


def test_authorization_policy_messages(form: str):
    result = run(form, [authz(source(namespaces=["ghost"]) + methods("FETCH"))])
    assert [f.message for f in result[key("AuthorizationPolicy", "shop", "p")]] == [
        'namespace "ghost" not found',
        'method "FETCH" is not an HTTP method',
    ]


# PeerAuthentication ----------------------------------------------------------------------------


def mutual(ns: str, name: str, host: str, mode: str = "ISTIO_MUTUAL") -> dict[str, Any]:
    return dr(ns, name, host, trafficPolicy={"tls": {"mode": mode}})


@pytest.mark.parametrize(
    ("objects", "target", "expected"),
    [
        pytest.param(
            [pa("shop", "a", "STRICT"), pa("shop", "b", "PERMISSIVE")],
            "a",
            ["KIA0002"],
            id="two-namespace-wide",
        ),
        pytest.param(
            [pa("shop", "a", "STRICT"), pa("shop", "b", "PERMISSIVE", {"app": "cart"})],
            "a",
            [],
            id="one-namespace-wide",
        ),
        pytest.param(
            [pa("istio-system", "a", "STRICT"), pa("shop", "b", "STRICT")],
            "a",
            [],
            id="mesh-and-namespace",
        ),
        pytest.param(
            [
                istio(
                    "PeerAuthentication",
                    "shop",
                    "a",
                    {"portLevelMtls": {"8080": {"mode": "DISABLE"}}},
                )
            ],
            "a",
            ["FS0501"],
            id="port-level-without-selector",
        ),
        pytest.param(
            [
                istio(
                    "PeerAuthentication",
                    "shop",
                    "a",
                    {
                        "selector": {"matchLabels": {"app": "cart"}},
                        "portLevelMtls": {"8080": {"mode": "DISABLE"}},
                    },
                )
            ],
            "a",
            [],
            id="port-level-with-selector",
        ),
        pytest.param(
            [pa("shop", "a", "DISABLE"), mutual("shop", "d", "*.shop.svc.cluster.local")],
            "a",
            ["KIA0505"],
            id="ns-disable-dr-mutual",
        ),
        pytest.param(
            [
                pa("shop", "a", "DISABLE"),
                mutual("shop", "d", "*.shop.svc.cluster.local", "DISABLE"),
            ],
            "a",
            [],
            id="ns-disable-dr-disable",
        ),
        pytest.param(
            [pa("shop", "a", "DISABLE"), mutual("istio-system", "d", "*.local")],
            "a",
            ["KIA0505"],
            id="ns-disable-mesh-dr-mutual",
        ),
        pytest.param(
            [
                pa("shop", "a", "DISABLE"),
                mutual("istio-system", "d", "*.local"),
                mutual("shop", "e", "*.shop.svc.cluster.local", "DISABLE"),
            ],
            "a",
            [],
            id="ns-dr-disable-excuses-mesh-dr",
        ),
        pytest.param(
            [pa("shop", "a", "PERMISSIVE"), mutual("shop", "d", "*.shop.svc.cluster.local")],
            "a",
            [],
            id="permissive",
        ),
        pytest.param(
            [pa("istio-system", "a", "DISABLE"), mutual("istio-system", "d", "*.local")],
            "a",
            ["KIA0506"],
            id="mesh-disable",
        ),
        pytest.param(
            [pa("istio-system", "a", "DISABLE"), mutual("istio-system", "d", "*.local", "MUTUAL")],
            "a",
            ["KIA0506"],
            id="mesh-mutual",
        ),
        pytest.param([pa("istio-system", "a", "DISABLE")], "a", [], id="mesh-disable-alone"),
    ],
)
def test_peer_authentications(
    form: str, objects: list[dict[str, Any]], target: str, expected: list[str]
):
    pa_obj = next(o for o in objects if o["metadata"]["name"] == target)
    result = run(form, objects)
    k = key("PeerAuthentication", pa_obj["metadata"]["namespace"], target)
    assert codes(result, k) == expected
    assert set(levels(result, k)) <= {"error"}


# RequestAuthentication and Telemetry -----------------------------------------------------------

JWT = {
    "jwtRules": [
        {"issuer": "https://issuer.example.com", "jwksUri": "https://issuer.example.com/jwks"}
    ]
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"selector": {"matchLabels": {"app": "cart"}}}, [], id="selector"),
        pytest.param(
            {"targetRef": {"kind": "Service", "group": "", "name": "cart"}}, [], id="service"
        ),
        pytest.param(
            {"targetRef": {"kind": "Service", "group": "", "name": "cart", "namespace": "shop"}},
            [],
            id="service-same-ns",
        ),
        pytest.param(
            {
                "targetRefs": [
                    {"kind": "Service", "group": "", "name": "cart"},
                    {"kind": "Service", "group": "", "name": "gone"},
                ]
            },
            ["FS0001"],
            id="one-missing",
        ),
        pytest.param(
            {
                "targetRefs": [
                    {"kind": "ServiceEntry", "group": "networking.istio.io", "name": "db"}
                ]
            },
            [],
            id="service-entry",
        ),
        pytest.param(
            {
                "targetRefs": [
                    {"kind": "ServiceEntry", "group": "networking.istio.io", "name": "gone"}
                ]
            },
            ["FS0001"],
            id="service-entry-missing",
        ),
    ],
)
def test_request_authentication_targets(form: str, spec: dict[str, Any], expected: list[str]):
    objects = [
        se("shop", "db", "db.example.com"),
        istio("RequestAuthentication", "shop", "r", {**JWT, **spec}),
    ]
    result = run(form, objects)
    assert codes(result, key("RequestAuthentication", "shop", "r")) == expected
    assert set(levels(result, key("RequestAuthentication", "shop", "r"))) <= {"error"}


def test_target_ref_message(form: str):
    spec = {**JWT, "targetRef": {"kind": "Service", "group": "", "name": "gone"}}
    result = run(form, [istio("RequestAuthentication", "shop", "r", spec)])
    assert result[key("RequestAuthentication", "shop", "r")] == [
        Finding("error", "FS0001", 'targetRef Service "shop/gone" not found')
    ]


def telemetry(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return istio("Telemetry", ns, name, {"tracing": [{"randomSamplingPercentage": 10.0}], **spec})


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param(
            [telemetry("shop", "a"), telemetry("shop", "b")],
            {"a": ["KIA0002"], "b": ["KIA0002"]},
            id="two-selectorless",
        ),
        pytest.param(
            [
                telemetry("shop", "a"),
                telemetry("shop", "b", selector={"matchLabels": {"app": "cart"}}),
            ],
            {"a": [], "b": []},
            id="one-with-selector",
        ),
        pytest.param(
            [
                telemetry("shop", "a"),
                telemetry(
                    "shop", "b", targetRefs=[{"kind": "Service", "group": "", "name": "cart"}]
                ),
            ],
            {"a": [], "b": []},
            id="one-with-target",
        ),
        pytest.param(
            [telemetry("shop", "a", targetRef={"kind": "Service", "group": "", "name": "gone"})],
            {"a": ["FS0001"]},
            id="target-missing",
        ),
        pytest.param(
            [telemetry("istio-system", "a"), telemetry("shop", "b")],
            {"a": [], "b": []},
            id="mesh-and-namespace",
        ),
    ],
)
def test_telemetries(form: str, objects: list[dict[str, Any]], expected: dict[str, list[str]]):
    result = run(form, objects)
    for obj in objects:
        k = key("Telemetry", obj["metadata"]["namespace"], obj["metadata"]["name"])
        assert codes(result, k) == expected[k[2]]
        assert set(levels(result, k)) <= {"error"}


# The contract the collector and the watcher rely on -------------------------------------------


def test_every_builtin_istio_kind_is_checked():
    istio_kinds = {k.key for k in BUILTIN_KINDS if k.status_rule == "istio"}
    assert istio_kinds == CHECKED_KINDS


def test_every_checked_object_gets_an_entry_and_only_those(form: str):
    objects = [INGRESS, vs("shop", "v", gateways=["ingress"]), K8S_GW, telemetry("shop", "t")]
    objects.append(
        {"kind": "EnvoyFilter", "metadata": {"namespace": "shop", "name": "ef"}, "spec": {}}
    )
    result = run(form, objects)
    assert result == {
        key("Gateway", "shop", "ingress"): [],
        key("VirtualService", "shop", "v"): [],
        key("Telemetry", "shop", "t"): [],
    }


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "VirtualService", "metadata": {"namespace": "shop", "name": "v"}, "spec": None},
        istio(
            "VirtualService",
            "shop",
            "v",
            {"gateways": "ingress", "http": [None, {"route": [{"destination": {"host": 7}}]}]},
        ),
        istio("DestinationRule", "shop", "v", {"host": None, "subsets": "v1", "trafficPolicy": []}),
        istio(
            "Gateway",
            "shop",
            "v",
            {"selector": None, "servers": [{"port": None, "hosts": [None, "a.com"]}]},
        ),
        istio(
            "AuthorizationPolicy",
            "shop",
            "v",
            {"rules": [{"from": [{"source": None}], "to": "x"}], "targetRefs": [None]},
        ),
        istio("PeerAuthentication", "shop", "v", {"mtls": "STRICT", "selector": []}),
        istio("Sidecar", "shop", "v", {"egress": [{"hosts": ["no-slash"]}]}),
    ],
)
def test_malformed_objects_do_not_break_validation(form: str, obj: dict[str, Any]):
    result = run(form, [obj])
    assert list(result) == [key(obj["kind"], "shop", "v")]


def test_essentials_keep_what_the_checks_read_and_little_else():
    obj = vs(
        "shop",
        "v",
        gateways=["ingress"],
        http=[{**route("cart", "v1")[0], "timeout": "5s", "retries": {"attempts": 3}}],
    )
    obj["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 2000 + "}"
    }
    slim = essentials("VirtualService", obj)
    assert slim == {
        "metadata": {"namespace": "shop", "name": "v"},
        "spec": {
            "gateways": ["ingress"],
            "http": [{"route": [{"destination": {"host": "cart", "subset": "v1"}}]}],
        },
    }
    assert essentials("VirtualService", slim) == slim
    service = essentials("Service", svc("shop", "internal", export_to="."))
    assert service == {
        "metadata": {
            "namespace": "shop",
            "name": "internal",
            "annotations": {"networking.istio.io/exportTo": "."},
        },
        "spec": {"selector": {"app": "internal"}},
    }
    assert essentials("Service", {"metadata": {"namespace": "a", "name": "b"}}) == {
        "metadata": {"namespace": "a", "name": "b"}
    }
    policy = {
        "tls": {"mode": "DISABLE", "sni": "x"},
        "connectionPool": {"tcp": {"maxConnections": 9}},
    }
    assert essentials("DestinationRule", dr("shop", "d", "cart", "v1", trafficPolicy=policy))[
        "spec"
    ] == {
        "host": "cart",
        "subsets": [{"name": "v1"}],
        "trafficPolicy": {"tls": {"mode": "DISABLE"}},
    }
    entry = se(
        "edge", "api", "api.example.com", endpoints=[{"address": "10.0.0.9", "labels": {"a": "b"}}]
    )
    assert essentials("ServiceEntry", entry)["spec"] == {
        "hosts": ["api.example.com"],
        "ports": [{"number": 443, "protocol": "TLS"}],
        "resolution": "DNS",
        "endpoints": [{}],
    }
    assert essentials(
        "PeerAuthentication", pa("shop", "p", "STRICT", creationTimestamp="2026-01-01T00:00:00Z")
    ) == {
        "metadata": {"namespace": "shop", "name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"mtls": {"mode": "STRICT"}},
    }


# Scale: one cluster at the biggest benchmark size ----------------------------------------------


SVC_REF = {"kind": "Service", "group": ""}


def big_cluster(
    scale: float = 1.0,
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]], list[str], set[Any]]:
    """At scale 1: 2,000 namespaces, 3,000 Services, ~3,000 Istio objects, among them hundreds
    of Gateways on one selector and port and of ServiceEntries for one host (the pairs a naive
    check would compare), plus known broken references (listed in the returned set)."""

    def n(count: int) -> int:
        return int(count * scale)

    namespaces = ["istio-system"] + [f"ns-{i:04d}" for i in range(n(2000))]
    services = [svc(f"ns-{i % n(2000):04d}", f"svc-{i}") for i in range(n(3000))]
    objs: dict[str, list[dict[str, Any]]] = {}

    def add(obj: dict[str, Any]) -> None:
        objs.setdefault(obj["kind"], []).append(obj)

    add(gw("istio-system", "ingress", server(443, "*.apps.example.com")))
    for i in range(n(1000)):
        ns = f"ns-{i:04d}"
        gws = ["istio-system/ingress", "mesh"] if i % 2 else ["mesh"]
        add(vs(ns, f"vs-{i}", gateways=gws, http=route(f"svc-{i}", "v1")))
        add(dr(ns, f"dr-{i}", f"svc-{i}", "v1", "v2"))
    for i in range(n(300)):
        edge = gw(f"ns-{i:04d}", f"gw-{i}", server(443, f"app-{i}.example.com"))
        edge["spec"]["selector"] = {"istio": "edge"}
        add(edge)
    for i in range(n(200)):
        add(se(f"ns-{i:04d}", f"partner-{i}", "api.partner.com", exportTo=["."]))
        add(sidecar(f"ns-{i:04d}", "default"))
    for i in range(n(100)):
        policy = authz(
            source(namespaces=[f"ns-{i + 1:04d}"]), targetRef=SVC_REF | {"name": f"svc-{i}"}
        )
        policy["metadata"] = {"namespace": f"ns-{i:04d}", "name": f"ap-{i}"}
        add(policy)
        add(pa(f"ns-{i:04d}", "default", "STRICT"))
        add(telemetry(f"ns-{i:04d}", "default"))
    # Known breakage.
    add(vs("ns-0007", "broken-gw", gateways=["istio-system/missing"], http=route("svc-7")))
    add(vs("ns-0011", "broken-subset", http=route("svc-11", "v9")))
    add(vs("ns-0013", "broken-host", http=route("svc-14")))
    dup = gw("ns-0005", "dup", server(443, "app-6.example.com"), selector={"istio": "edge"})
    add(dup)
    add(sidecar("ns-0003", "second"))
    ghost = authz(source(namespaces=["ghost"]))
    ghost["metadata"] = {"namespace": "ns-0020", "name": "ghost"}
    add(ghost)
    add(se("ns-0001", "public-partner", "api.partner.com"))
    add(dr("ns-0030", "DISABLE", "svc-30", **DISABLE))  # merges with dr-30: no KIA0201
    add(dr("ns-0040", "dup", "svc-40.ns-0040.svc.cluster.local", "v2"))
    expected = {
        (("ns-0007", "VirtualService", "broken-gw"), "KIA1102"),
        (("ns-0011", "VirtualService", "broken-subset"), "KIA1107"),
        (("ns-0013", "VirtualService", "broken-host"), "KIA1101"),
        (("ns-0005", "Gateway", "dup"), "KIA0301"),
        (("ns-0006", "Gateway", "gw-6"), "KIA0301"),
        (("ns-0003", "Sidecar", "default"), "KIA0002"),
        (("ns-0003", "Sidecar", "second"), "KIA0002"),
        (("ns-0020", "AuthorizationPolicy", "ghost"), "KIA0101"),
        (("ns-0030", "DestinationRule", "DISABLE"), "KIA0207"),
        (("ns-0001", "ServiceEntry", "public-partner"), "KIA1211"),
        (("ns-0040", "DestinationRule", "dr-40"), "KIA0201"),
        (("ns-0040", "DestinationRule", "dup"), "KIA0201"),
    }
    expected |= {
        ((f"ns-{i:04d}", "ServiceEntry", f"partner-{i}"), "KIA1211") for i in range(n(200))
    }
    return objs, services, namespaces, expected


def test_biggest_cluster_finds_exactly_the_breakage():
    objs, services, namespaces, expected = big_cluster()
    n_objects = sum(len(v) for v in objs.values())
    assert 2500 <= n_objects <= 3500
    result = validate(objs, services, namespaces)
    assert len(result) == n_objects
    assert {(k, f.code) for k, fs in result.items() for f in fs} == expected


def executed_lines(fn: Any, *args: Any) -> int:
    """How many Python lines `fn(*args)` executes: a measure of work that does not depend on the
    machine or on how the work is spread over functions."""
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(previous)
    return count


def crowded_cluster(
    n: int,
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]], list[str]]:
    """`n` namespaces whose objects all share what a naive check would compare pairwise: one
    Gateway selector and port, one ServiceEntry host, one mesh-wide mTLS policy."""
    namespaces = ["istio-system"] + [f"ns-{i}" for i in range(n)]
    services = [svc(f"ns-{i}", "app") for i in range(n)]
    objs: dict[str, list[dict[str, Any]]] = {
        "PeerAuthentication": [pa("istio-system", "m", "STRICT")]
    }
    for i in range(n):
        ns = f"ns-{i}"
        for obj in (
            vs(ns, "app", gateways=["istio-system/gw-0"], http=route("app", "v1")),
            dr(ns, "app", "app", "v1"),
            dr(ns, "plain", f"app.ns-{(i + 1) % n}.svc.cluster.local", **DISABLE),
            gw("istio-system", f"gw-{i}", server(443, f"app.{ns}.example.com")),
            se(ns, "partner", "api.partner.com", exportTo=["."]),
            sidecar(ns, "default", hosts=[f"./app.{ns}.svc.cluster.local", "istio-system/*"]),
            pa(ns, "default", "PERMISSIVE" if i % 2 else "UNSET"),
            authz(source(namespaces=[f"ns-{(i + 1) % n}"])),
            telemetry(ns, "default"),
        ):
            objs.setdefault(obj["kind"], []).append(obj)
    return objs, services, namespaces


def test_validation_work_grows_linearly_with_the_cluster():
    # Doubling a cluster doubles the work. Comparing the objects of a crowded group (one
    # Gateway selector and port, one ServiceEntry host) with each other would quadruple it.
    work = []
    for n in (150, 300):
        objs, services, namespaces = crowded_cluster(n)
        assert any(validate(objs, services, namespaces).values())
        work.append(executed_lines(validate, objs, services, namespaces))
    assert 1.8 <= work[1] / work[0] <= 2.2, work


# The documentation ------------------------------------------------------------------------------


def test_the_documented_table_lists_exactly_the_codes_the_checks_emit():
    root = REPO
    doc = (root / "docs" / "architecture.md").read_text()
    section = doc.split("## Istio validation", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| ((?:KIA|FS)\d{4}) \|", section, re.MULTILINE))
    sources = "".join(
        (root / "common" / "kinds" / f).read_text()
        for f in ("istio_traffic.py", "istio_policy.py", "istio_mesh.py")
    )
    emitted = set(re.findall(r'"((?:KIA|FS)\d{4})"', sources))
    assert documented == emitted
    assert len(emitted) >= 20
