"""The official `kubernetes` client against kubesim: typed, custom-objects and dynamic clients,
list and watch."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client, config, dynamic, watch

from kubesim.server import KubeSim


@pytest.fixture
def api(kubesim: KubeSim) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(kubesim.kubeconfig_path("cluster-000")))
    yield api_client
    api_client.close()


def test_typed_core_and_rbac(kubesim: KubeSim, api: client.ApiClient) -> None:
    namespaces = client.CoreV1Api(api).list_namespace()
    names = {n.metadata.name for n in namespaces.items}
    assert {"app-0000", "app-0004", "flux-system", "istio-system"} <= names
    rbac = client.RbacAuthorizationV1Api(api)
    roles = {r.metadata.name: r for r in rbac.list_cluster_role().items}
    assert roles["view"].aggregation_rule is not None
    assert (
        roles["flux-view"].metadata.labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    )
    bindings = {b.metadata.name: b for b in rbac.list_namespaced_role_binding("app-0002").items}
    assert bindings["team-view"].subjects[0].kind == "Group"
    assert bindings["solo-view"].subjects[0].name == "solo"  # the one-namespace user
    assert {b.metadata.name for b in rbac.list_cluster_role_binding().items} >= {"fleet-admins"}


def test_custom_objects_paged(kubesim: KubeSim, api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    seen: list[str] = []
    token = None
    while True:
        kw = {"_continue": token} if token else {}
        page = co.list_cluster_custom_object(
            "kustomize.toolkit.fluxcd.io", "v1", "kustomizations", limit=2, **kw
        )
        seen += [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    expected = [
        f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        for o in kubesim.list("cluster-000", "Kustomization")
    ]
    assert seen == expected and len(seen) == len(set(seen)) > 4


def test_dynamic_list_and_watch(kubesim: KubeSim, api: client.ApiClient) -> None:
    dyn = dynamic.DynamicClient(api)
    hr = dyn.resources.get(api_version="networking.istio.io/v1", kind="VirtualService")
    listed = hr.get()
    rv = listed.metadata.resourceVersion
    assert len(listed.items) == len(kubesim.list("cluster-000", "VirtualService"))

    def mutate() -> None:
        kubesim.apply(
            "cluster-000",
            {
                "apiVersion": "networking.istio.io/v1",
                "kind": "VirtualService",
                "metadata": {"name": "new", "namespace": "app-0003"},
                "spec": {"hosts": ["new"]},
            },
        )

    threading.Timer(0.1, mutate).start()
    events = []
    for event in hr.watch(resource_version=rv, timeout=10):
        events.append(event)
        break
    assert events[0]["type"] == "ADDED"
    assert events[0]["object"].metadata.name == "new"


def test_typed_watch_sees_status_change(kubesim: KubeSim, api: client.ApiClient) -> None:
    co = client.CustomObjectsApi(api)
    rv = co.list_namespaced_custom_object(
        "kustomize.toolkit.fluxcd.io", "v1", "app-0001", "kustomizations"
    )["metadata"]["resourceVersion"]
    threading.Timer(
        0.1,
        lambda: kubesim.set_ready(
            "cluster-000", "Kustomization", "app-0001", "apps", False, message="oops"
        ),
    ).start()
    w = watch.Watch()
    got = None
    for event in w.stream(
        co.list_namespaced_custom_object,
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "app-0001",
        "kustomizations",
        resource_version=rv,
        timeout_seconds=10,
    ):
        got = event
        w.stop()
    assert got is not None and got["type"] == "MODIFIED"
    ready = got["object"]["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["message"]) == ("Ready", "False", "oops")
    assert int(got["object"]["metadata"]["resourceVersion"]) > int(rv)
