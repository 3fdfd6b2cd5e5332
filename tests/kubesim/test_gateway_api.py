"""Gateway API, Kuadrant and Services as kubesim serves them: discovery with the right scope,
the cluster-scoped GatewayClass over raw HTTPS and through the official `kubernetes` client
(custom-objects and dynamic), Services through the typed client, and RBAC: team members see
the namespaced kinds in their namespaces, GatewayClasses only callers bound cluster-wide."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import requests
from kubernetes import client, config, dynamic

from common.rbac.authorizer import UserInfo
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim

GW = "/apis/gateway.networking.k8s.io/v1"


@pytest.fixture
def api(kubesim: KubeSim) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(kubesim.kubeconfig_path("cluster-000")))  # type: ignore[no-untyped-call]
    yield api_client
    api_client.close()


def test_discovery_says_which_kinds_are_cluster_scoped(
    kubesim: KubeSim, http: requests.Session
) -> None:
    resources = {
        r["name"]: r for r in http.get(kubesim.url("cluster-000") + GW).json()["resources"]
    }
    assert resources["gatewayclasses"]["namespaced"] is False
    for plural in ("gateways", "httproutes", "grpcroutes", "tlsroutes", "referencegrants"):
        assert resources[plural]["namespaced"] is True, plural
    assert "gatewayclasses/status" in resources and "referencegrants/status" not in resources
    alpha = http.get(kubesim.url("cluster-000") + "/apis/gateway.networking.k8s.io/v1alpha2")
    assert [r["name"] for r in alpha.json()["resources"]] == ["tcproutes", "tcproutes/status"]
    kuadrant = http.get(kubesim.url("cluster-000") + "/apis/kuadrant.io/v1").json()["resources"]
    assert {r["name"] for r in kuadrant} >= {"authpolicies", "ratelimitpolicies", "dnspolicies"}
    core = {
        r["name"]: r for r in http.get(kubesim.url("cluster-000") + "/api/v1").json()["resources"]
    }
    assert core["services"]["namespaced"] is True and core["services"]["shortNames"] == ["svc"]


def test_gateway_classes_served_cluster_scoped(kubesim: KubeSim, http: requests.Session) -> None:
    base = kubesim.url("cluster-000") + GW
    listed = http.get(f"{base}/gatewayclasses").json()
    names = [c["metadata"]["name"] for c in listed["items"]]
    assert names == sorted(names) and {"istio", "istio-remote"} <= set(names)
    assert all("namespace" not in c["metadata"] for c in listed["items"])
    one = http.get(f"{base}/gatewayclasses/istio").json()
    assert one["spec"]["controllerName"] == "istio.io/gateway-controller"
    assert http.get(f"{base}/namespaces/default/gatewayclasses/istio").status_code == 404
    gateways = http.get(f"{base}/gateways").json()["items"]
    assert {"istio-system"} <= {g["metadata"]["namespace"] for g in gateways}


def test_gateway_classes_through_the_kubernetes_client(
    kubesim: KubeSim, api: client.ApiClient
) -> None:
    co = client.CustomObjectsApi(api)
    listed = cast(
        dict[str, Any],
        co.list_cluster_custom_object("gateway.networking.k8s.io", "v1", "gatewayclasses"),
    )
    expected = [c["metadata"]["name"] for c in kubesim.list("cluster-000", "GatewayClass")]
    assert [c["metadata"]["name"] for c in listed["items"]] == expected
    istio = cast(
        dict[str, Any],
        co.get_cluster_custom_object("gateway.networking.k8s.io", "v1", "gatewayclasses", "istio"),
    )
    assert istio["status"]["conditions"][0]["type"] == "Accepted"
    dyn = dynamic.DynamicClient(api)  # type: ignore[no-untyped-call]
    classes = dyn.resources.get(api_version="gateway.networking.k8s.io/v1", kind="GatewayClass")
    assert classes.namespaced is False
    assert sorted(c.metadata.name for c in classes.get().items) == sorted(expected)
    gateways = dyn.resources.get(api_version="gateway.networking.k8s.io/v1", kind="Gateway")
    public = gateways.get(namespace="istio-system", name="public")
    assert public.status.listeners[0].name == "https"


def test_services_through_the_typed_client(kubesim: KubeSim, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    services = core.list_service_for_all_namespaces()
    assert len(services.items) == len(kubesim.list("cluster-000", "Service")) > 5
    system = {(s.metadata.namespace, s.metadata.name) for s in services.items if s.metadata}
    assert {("default", "kubernetes"), ("istio-system", "istiod")} <= system
    spec = core.read_namespaced_service("istiod", "istio-system").spec
    assert spec is not None and spec.ports is not None and spec.cluster_ip is not None
    assert spec.cluster_ip.startswith("10.") and spec.ports[0].port == 15010
    paged = core.list_service_for_all_namespaces(limit=3)
    assert len(paged.items) == 3 and paged.metadata is not None and paged.metadata._continue


def test_team_members_see_gateway_api_and_kuadrant_in_their_namespaces(kubesim: KubeSim) -> None:
    kinds = [
        ("gateway.networking.k8s.io", "httproutes"),
        ("gateway.networking.k8s.io", "gateways"),
        ("kuadrant.io", "authpolicies"),
        ("", "services"),
    ]
    for user in fleet_users(kubesim.fleet):  # type: ignore[arg-type]
        info = UserInfo(user.name, (*user.groups, "system:authenticated"))
        for cluster in kubesim.clusters:
            authz = kubesim._cluster(cluster).authz
            namespaces = [n["metadata"]["name"] for n in kubesim.list(cluster, "Namespace")]
            expected = user.namespaces(cluster)
            for group, plural in kinds:
                allowed = [
                    ns for ns in namespaces if authz.allowed(info, "list", group, plural, ns)
                ]
                assert allowed == (namespaces if expected == "*" else expected), (user.name, plural)
            everywhere = authz.allowed(
                info, "list", "gateway.networking.k8s.io", "gatewayclasses", None
            )
            assert everywhere == (expected == "*"), (user.name, cluster)


def test_gateway_classes_forbidden_to_namespace_viewers(
    kubesim: KubeSim, http: requests.Session
) -> None:
    path = kubesim.url("cluster-000") + f"{GW}/gatewayclasses"
    assert http.get(path, headers={"Impersonate-User": "solo"}).status_code == 403
    assert http.get(path, headers={"Impersonate-User": "platform-sre"}).status_code == 200
    _, solo_ns = kubesim.fleet.solo_namespace()  # type: ignore[attr-defined]
    routes = kubesim.url("cluster-000") + f"{GW}/namespaces/{solo_ns}/httproutes"
    assert http.get(routes, headers={"Impersonate-User": "solo"}).status_code == 200
