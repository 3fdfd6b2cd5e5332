"""kubesim's API semantics over raw HTTPS: pagination exactly once, 410 on expired continue
tokens and too-old watches, watch events and bookmarks, selectors, writes, RBAC and
impersonation, authentication."""

from __future__ import annotations

import json

import pytest
import requests

from kubesim.server import KubeSim

KS = "/apis/kustomize.toolkit.fluxcd.io/v1"


def url(sim: KubeSim, path: str, cluster: str = "cluster-000") -> str:
    return sim.url(cluster) + path


def walk(sim: KubeSim, http: requests.Session, path: str, limit: int) -> list[str]:
    seen, token = [], ""
    while True:
        params = {"limit": limit, **({"continue": token} if token else {})}
        body = http.get(url(sim, path), params=params).json()
        seen += [
            f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in body["items"]
        ]
        token = body["metadata"].get("continue", "")
        if not token:
            return seen


@pytest.mark.parametrize("limit", [1, 3, 500])
def test_pagination_returns_every_object_exactly_once(
    kubesim: KubeSim, http: requests.Session, limit: int
) -> None:
    for path in (
        f"{KS}/kustomizations",
        "/api/v1/namespaces",
        f"{KS}/namespaces/app-0003/kustomizations",
    ):
        everything = http.get(url(kubesim, path)).json()["items"]
        seen = walk(kubesim, http, path, limit)
        assert len(seen) == len(set(seen)) == len(everything) > 0


def test_pages_deep_in_the_list_scan_only_the_page(
    kubesim: KubeSim, http: requests.Session
) -> None:
    first = http.get(url(kubesim, "/api/v1/namespaces"), params={"limit": 2}).json()
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    assert kubesim.request_log("cluster-000")[-1].items == 2


def test_expired_continue_token_is_410(kubesim: KubeSim, http: requests.Session) -> None:
    first = http.get(url(kubesim, "/api/v1/namespaces"), params={"limit": 2}).json()
    kubesim.set_ready("cluster-000", "Kustomization", "app-0001", "apps", True)
    kubesim.compact("cluster-000")  # like etcd compacting past the token's revision
    resp = http.get(
        url(kubesim, "/api/v1/namespaces"),
        params={"limit": 2, "continue": first["metadata"]["continue"]},
    )
    assert resp.status_code == 410
    assert (resp.json()["kind"], resp.json()["reason"]) == ("Status", "Expired")


def test_watch_streams_events_after_a_mutation(kubesim: KubeSim, http: requests.Session) -> None:
    rv = http.get(url(kubesim, f"{KS}/kustomizations")).json()["metadata"]["resourceVersion"]
    kubesim.set_ready("cluster-000", "Kustomization", "app-0002", "apps", False, message="broken")
    kubesim.delete("cluster-000", "Kustomization", "app-0002", "apps")
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "1"}
    with http.get(url(kubesim, f"{KS}/kustomizations"), params=params, stream=True) as resp:
        events = [json.loads(line) for line in resp.iter_lines() if line]
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    assert events[0]["object"]["status"]["conditions"][0]["message"] == "broken"


def test_watch_from_zero_lists_then_bookmarks(kubesim: KubeSim, http: requests.Session) -> None:
    params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    path = f"{KS}/namespaces/app-0001/kustomizations"
    with http.get(url(kubesim, path), params=params, stream=True) as resp:
        events = [json.loads(line) for line in resp.iter_lines() if line]
    added = [e for e in events if e["type"] == "ADDED"]
    assert [e["object"]["metadata"]["name"] for e in added] == [
        o["metadata"]["name"] for o in kubesim.list("cluster-000", "Kustomization", "app-0001")
    ]
    assert any(e["type"] == "BOOKMARK" for e in events)


def test_watch_with_too_old_resource_version_is_410(
    kubesim: KubeSim, http: requests.Session
) -> None:
    rv = kubesim.resource_version("cluster-000")
    kubesim.set_ready("cluster-000", "Kustomization", "app-0001", "apps", True)
    kubesim.compact("cluster-000")
    params = {"watch": "1", "resourceVersion": str(rv), "timeoutSeconds": "1"}
    with http.get(url(kubesim, f"{KS}/kustomizations"), params=params, stream=True) as resp:
        events = [json.loads(line) for line in resp.iter_lines() if line]
    assert events[0]["type"] == "ERROR"
    assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")


def test_label_and_field_selectors(kubesim: KubeSim, http: requests.Session) -> None:
    ns = kubesim.get("cluster-000", "Namespace", "", "app-0001")
    team = ns["metadata"]["labels"]["fleetscope.io/team"]  # type: ignore[index]
    got = http.get(
        url(kubesim, "/api/v1/namespaces"), params={"labelSelector": f"fleetscope.io/team={team}"}
    )
    names = {i["metadata"]["name"] for i in got.json()["items"]}
    assert "app-0001" in names and "flux-system" not in names
    got = http.get(
        url(kubesim, "/api/v1/namespaces"),
        params={"labelSelector": "fleetscope.io/team notin (platform)"},
    )
    assert {i["metadata"]["name"] for i in got.json()["items"]} == {f"app-000{i}" for i in range(5)}
    got = http.get(
        url(kubesim, f"{KS}/kustomizations"),
        params={"fieldSelector": "metadata.namespace=app-0004"},
    )
    assert {i["metadata"]["namespace"] for i in got.json()["items"]} == {"app-0004"}


def test_writes_bump_resource_version_and_generation(
    kubesim: KubeSim, http: requests.Session
) -> None:
    http.headers["Authorization"] = f"Bearer {kubesim.admin_token}"
    path = f"{KS}/namespaces/app-0001/kustomizations/apps"
    before = http.get(url(kubesim, path)).json()
    resp = http.patch(
        url(kubesim, path),
        data=json.dumps([{"op": "replace", "path": "/spec/path", "value": "./other"}]),
        headers={"Content-Type": "application/json-patch+json"},
    )
    after = resp.json()
    assert resp.status_code == 200 and after["spec"]["path"] == "./other"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    stale = dict(before, spec={"path": "./stale"})
    assert http.put(url(kubesim, path), data=json.dumps(stale)).status_code == 409
    created = http.post(
        url(kubesim, f"{KS}/namespaces/app-0001/kustomizations"), data=json.dumps(stale)
    )
    assert created.status_code == 409 and created.json()["reason"] == "AlreadyExists"
    missing = http.post(
        url(kubesim, f"{KS}/namespaces/nope/kustomizations"),
        data=json.dumps({"metadata": {"name": "x"}}),
    )
    assert missing.status_code == 404


def test_unauthenticated_is_401(kubesim: KubeSim, http: requests.Session) -> None:
    resp = http.get(url(kubesim, "/api/v1/namespaces"), headers={"Authorization": "Bearer wrong"})
    assert resp.status_code == 401 and resp.json()["reason"] == "Unauthorized"


def test_rbac_with_impersonation(kubesim: KubeSim, http: requests.Session) -> None:
    path = f"{KS}/namespaces/app-0002/kustomizations"
    as_solo = {"Impersonate-User": "solo"}
    assert http.get(url(kubesim, path), headers=as_solo).status_code == 200
    assert http.get(url(kubesim, f"{KS}/kustomizations"), headers=as_solo).status_code == 403
    # solo's RoleBinding is on cluster-000 only
    assert http.get(url(kubesim, path, "cluster-001"), headers=as_solo).status_code == 403
    admin = {"Impersonate-User": "someone", "Impersonate-Group": "fleet-admins"}
    assert http.get(url(kubesim, f"{KS}/kustomizations"), headers=admin).status_code == 200
    log = kubesim.request_log("cluster-000")[-1]
    assert (log.user, log.impersonate_user, log.impersonate_groups) == (
        "fleetscope-collector", "someone", ("fleet-admins",),
    )  # fmt: skip


def test_impersonation_needs_the_impersonate_permission(
    kubesim: KubeSim, http: requests.Session
) -> None:
    token = kubesim.token_for("platform-sre")  # view everywhere, but may not impersonate
    headers = {"Authorization": f"Bearer {token}"}
    assert http.get(url(kubesim, f"{KS}/kustomizations"), headers=headers).status_code == 200
    resp = http.get(
        url(kubesim, f"{KS}/kustomizations"), headers={**headers, "Impersonate-User": "solo"}
    )
    assert resp.status_code == 403
    assert 'cannot impersonate resource "users"' in resp.json()["message"]
    kubesim.apply(
        "cluster-000",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "sre-impersonate"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "platform-sre"}
            ],
        },
    )
    resp = http.get(
        url(kubesim, f"{KS}/kustomizations"), headers={**headers, "Impersonate-User": "solo"}
    )
    assert resp.status_code == 403 and 'User "solo" cannot list' in resp.json()["message"]
