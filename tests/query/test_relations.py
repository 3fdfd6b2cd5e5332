"""The relations endpoint and `blockedBy` on list rows, over a small hand-built cluster written
by the real writer (common.index.write.store) into a real Redis: depth 1 and 3, namespace-defaulted
and cross-namespace refs, dangling refs, a dependsOn cycle, external Service backends,
cluster-scoped GatewayClasses (`_`), RBAC (hidden rows never named, the object's own 404), bad
parameters, and what a request costs in Redis round trips."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from common.index import keys, rows
from common.index.read import relations as relations_read
from common.index.write import store
from common.rbac.authorizer import UserInfo
from common.rbac.grants import compile_grants, store_grants
from common.settings import Settings
from tests.support import topology
from tests.support.costs import count_round_trips
from tests.support.http import make_app
from tests.support.query_fleet import REG, headers, mark_synced
from tests.support.schema import check_response
from tests.support.team_cluster import rbac

C = "c1"
ADMIN = UserInfo("root", ("admins",))
TEAM = UserInfo("tina", ("team-a",))  # lists everything in team-a, nothing else
NOBODY = UserInfo("nobody", ())
HIDDEN_NAMES = ("secret-infra", "other-consumer", "ghost", "platform")
"""Rows (or refs) of namespaces TEAM may not list: never in TEAM's answers."""


def obj(kind: str, ns: str, name: str, ready: bool | None = True, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    meta = {"name": name, "generation": 1, "labels": labels, **({"namespace": ns} if ns else {})}
    out: dict[str, Any] = {"metadata": meta, "spec": spec}
    if ready is not None:
        cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "R"}
        out["status"] = {"observedGeneration": 1, "conditions": [cond]}
    return out


def dep(name: str, ns: str | None = None) -> dict[str, str]:
    return {"name": name, **({"namespace": ns} if ns else {})}


def git(name: str) -> dict[str, str]:
    return {"kind": "GitRepository", "name": name}  # no namespace: the referrer's


FLEET: list[tuple[str, dict[str, Any]]] = [
    ("GitRepository", obj("", "team-a", "repo")),
    ("GitRepository", obj("", "team-a", "failing-repo", ready=False)),
    ("HelmRepository", obj("", "team-a", "charts")),
    (
        "Kustomization",
        obj(
            "",
            "team-a",
            "app",
            sourceRef=git("repo"),  # namespace defaulted
            dependsOn=[dep("secret-infra", "flux-system"), dep("gone")],  # cross-ns, dangling
        ),
    ),
    ("Kustomization", obj("", "team-a", "web", dependsOn=[dep("app")])),
    ("Kustomization", obj("", "team-a", "top", dependsOn=[dep("web")])),
    (
        "Kustomization",
        obj(
            "",
            "team-a",
            "broken",
            sourceRef=git("failing-repo"),
            dependsOn=[dep("ghost", "team-c")],
        ),
    ),
    ("Kustomization", obj("", "team-a", "cyc-a", dependsOn=[dep("cyc-b")])),
    ("Kustomization", obj("", "team-a", "cyc-b", dependsOn=[dep("cyc-a")])),
    (
        "HelmRelease",
        obj(
            "",
            "team-a",
            "rel",
            chart={"spec": {"sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
            labels={
                "kustomize.toolkit.fluxcd.io/name": "app",
                "kustomize.toolkit.fluxcd.io/namespace": "team-a",
            },
        ),
    ),
    ("K8sGateway", obj("", "team-a", "gw", None, gatewayClassName="istio")),
    (
        "HTTPRoute",
        obj(
            "",
            "team-a",
            "route",
            None,
            parentRefs=[{"name": "gw", "sectionName": "http"}],
            rules=[{"backendRefs": [{"name": "svc", "port": 80}]}],
        ),
    ),
    ("GatewayClass", obj("", "", "istio", None)),
    (
        "Kustomization",
        obj("", "flux-system", "secret-infra", ready=False, sourceRef=git("platform")),
    ),
    ("GitRepository", obj("", "flux-system", "platform")),
    ("Kustomization", obj("", "team-b", "other-consumer", dependsOn=[dep("app", "team-a")])),
    ("K8sGateway", obj("", "team-b", "gw2", None, gatewayClassName="istio")),
]


def members() -> list[str]:
    out = []
    for key, raw in FLEET:
        k = REG.get(key)
        assert k is not None
        out.append(rows.member(C, k, k.api_version(), raw))
    return out


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    r = topology.client(redis_url)
    store.replace_rows(r, C, members())
    r.hset(keys.CLUSTERS, C, json.dumps({"source": "dir"}))
    store_grants(r, C, compile_grants(rbac(), REG), time.time())
    mark_synced(r, C, objects=len(FLEET))
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    yield make_app(settings).test_client()
    r.close()


def get(client: Any, user: UserInfo, path: str, **params: Any) -> Any:
    """GET the relations of `path` (namespace/kind/name on C); every answer is checked against
    the OpenAPI document."""
    url = f"/api/v1/objects/{C}/{path}/relations"
    resp = client.get(url, headers=headers(user), query_string=params)
    check_response(url, resp.status_code, resp.get_json())
    return resp


def ok(client: Any, user: UserInfo, path: str, **params: Any) -> dict[str, Any]:
    resp = get(client, user, path, **params)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def short(edges: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(depth, relation, namespace/kind/name, exists, status) of each edge, in answer order."""
    return [
        (
            e["depth"],
            e["relation"],
            f"{e['namespace']}/{e['kind']}/{e['name']}",
            e["exists"],
            e["status"],
        )
        for e in edges
    ]


def test_depth_1_names_defaulted_cross_namespace_and_dangling_refs(client: Any) -> None:
    body = ok(client, ADMIN, "team-a/Kustomization/app")
    assert body["object"]["name"] == "app" and body["object"]["status"] == "healthy"
    assert body["object"]["blockedBy"] == {
        "cluster": C,
        "namespace": "flux-system",
        "kind": "Kustomization",
        "name": "secret-infra",
        "exists": True,
    }
    assert short(body["upstream"]) == [
        (1, "source", "team-a/GitRepository/repo", True, "healthy"),  # namespace defaulted
        (1, "dependsOn", "flux-system/Kustomization/secret-infra", True, "unhealthy"),
        (1, "dependsOn", "team-a/Kustomization/gone", False, None),  # dangling
    ]
    assert short(body["downstream"]) == [
        (1, "managedBy", "team-a/HelmRelease/rel", True, "healthy"),
        (1, "dependsOn", "team-a/Kustomization/web", True, "healthy"),
        (1, "dependsOn", "team-b/Kustomization/other-consumer", True, "healthy"),
    ]
    assert body["hidden"] == 0
    edge = body["upstream"][0]
    assert list(edge) == [
        "relation", "cluster", "namespace", "kind", "name", "exists", "status", "depth"
    ]  # fmt: skip
    assert edge["cluster"] == C


def test_depth_3_walks_both_ways_level_by_level(client: Any) -> None:
    body = ok(client, ADMIN, "team-a/Kustomization/web", depth=3)
    assert short(body["upstream"]) == [
        (1, "dependsOn", "team-a/Kustomization/app", True, "healthy"),
        (2, "source", "team-a/GitRepository/repo", True, "healthy"),
        (2, "dependsOn", "flux-system/Kustomization/secret-infra", True, "unhealthy"),
        (2, "dependsOn", "team-a/Kustomization/gone", False, None),
        (3, "source", "flux-system/GitRepository/platform", True, "healthy"),
    ]
    assert short(body["downstream"]) == [
        (1, "dependsOn", "team-a/Kustomization/top", True, "healthy")
    ]
    assert short(ok(client, ADMIN, "team-a/Kustomization/web")["upstream"]) == [
        (1, "dependsOn", "team-a/Kustomization/app", True, "healthy")
    ]
    down = ok(client, ADMIN, "team-a/GitRepository/repo", depth=3)["downstream"]
    assert short(down) == [
        (1, "source", "team-a/Kustomization/app", True, "healthy"),
        (2, "managedBy", "team-a/HelmRelease/rel", True, "healthy"),
        (2, "dependsOn", "team-a/Kustomization/web", True, "healthy"),
        (2, "dependsOn", "team-b/Kustomization/other-consumer", True, "healthy"),
        (3, "dependsOn", "team-a/Kustomization/top", True, "healthy"),
    ]


def test_a_dependson_cycle_ends_with_each_node_once(client: Any) -> None:
    body = ok(client, ADMIN, "team-a/Kustomization/cyc-a", depth=5)
    # cyc-b is both what cyc-a depends on and what depends on it: once in each direction.
    assert short(body["upstream"]) == [
        (1, "dependsOn", "team-a/Kustomization/cyc-b", True, "healthy")
    ]
    assert short(body["downstream"]) == [
        (1, "dependsOn", "team-a/Kustomization/cyc-b", True, "healthy")
    ]


def test_routes_name_listeners_and_external_backends(client: Any) -> None:
    body = ok(client, ADMIN, "team-a/HTTPRoute/route", depth=2)
    assert [
        (
            e["relation"],
            e["kind"],
            e["name"],
            e.get("sectionName"),
            e["exists"],
            e["status"],
            e["depth"],
        )
        for e in body["upstream"]
    ] == [
        ("parent", "K8sGateway", "gw", "http", True, "progressing", 1),
        ("backend", "Service", "svc", None, True, None, 1),  # not a row: no status, not followed
        ("gatewayClass", "GatewayClass", "istio", None, True, "progressing", 2),
    ]
    assert "sectionName" not in body["upstream"][1]
    gw = ok(client, ADMIN, "team-a/K8sGateway/gw")
    assert gw["downstream"][0]["sectionName"] == "http"


def test_cluster_scoped_gatewayclass_by_underscore(client: Any) -> None:
    body = ok(client, ADMIN, "_/GatewayClass/istio")
    assert body["object"]["namespace"] == "" and body["upstream"] == []
    assert short(body["downstream"]) == [
        (1, "gatewayClass", "team-a/K8sGateway/gw", True, "progressing"),
        (1, "gatewayClass", "team-b/K8sGateway/gw2", True, "progressing"),
    ]
    assert get(client, TEAM, "_/GatewayClass/istio").status_code == 404  # not theirs to list


def test_team_member_sees_hidden_counts_never_names(client: Any) -> None:
    for depth in (1, 3, 5):
        resp = get(client, TEAM, "team-a/Kustomization/app", depth=depth)
        body = resp.get_json()
        assert body["hidden"] == 2  # secret-infra upstream, other-consumer downstream
        text = resp.get_data(as_text=True)
        for name in HIDDEN_NAMES:
            assert name not in text
        assert "blockedBy" not in body["object"]  # the blocker is secret-infra: not theirs
        assert short(body["upstream"])[:2] == [
            (1, "source", "team-a/GitRepository/repo", True, "healthy"),
            (1, "dependsOn", "team-a/Kustomization/gone", False, None),
        ]
        assert [e["name"] for e in body["downstream"] if e["depth"] == 1] == ["rel", "web"]
    # A dangling ref into a namespace they may not list is hidden too: whether a ref resolves
    # is not theirs to learn.
    resp = get(client, TEAM, "team-a/Kustomization/broken")
    assert resp.get_json()["hidden"] == 1 and "ghost" not in resp.get_data(as_text=True)
    assert resp.get_json()["object"]["blockedBy"]["name"] == "failing-repo"
    admin = ok(client, ADMIN, "team-a/Kustomization/broken")
    assert (1, "dependsOn", "team-c/Kustomization/ghost", False, None) in short(admin["upstream"])


def test_objects_the_caller_may_not_list_are_404_like_unknown_ones(client: Any) -> None:
    hidden = get(client, TEAM, "flux-system/Kustomization/secret-infra")
    unknown = get(client, ADMIN, "flux-system/Kustomization/no-such")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.get_json() == {
        "error": "not_found",
        "message": unknown.get_json()["message"].replace("no-such", "secret-infra"),
    }
    assert get(client, TEAM, "team-a/Kustomization/no-such").status_code == 404
    nobody = get(client, NOBODY, "team-a/Kustomization/app")
    unregistered = client.get(
        "/api/v1/objects/c9/team-a/Kustomization/app/relations", headers=headers(ADMIN)
    )
    assert nobody.status_code == unregistered.status_code == 404
    assert nobody.get_json()["message"] == unregistered.get_json()["message"].replace("c9", C)


@pytest.mark.parametrize(
    "query, status, param",
    [
        ({"depth": "0"}, 400, "depth"),
        ({"depth": "6"}, 400, "depth"),
        ({"depth": "two"}, 400, "depth"),
        ({"depth": "²"}, 400, "depth"),
        ({"depth": ["1", "2"]}, 400, "depth"),
        ({"limit": "5"}, 400, "limit"),
    ],
)
def test_bad_parameters_are_400(
    client: Any, query: dict[str, Any], status: int, param: str
) -> None:
    resp = get(client, ADMIN, "team-a/Kustomization/app", **query)
    assert resp.status_code == status
    assert resp.get_json()["error"] == "invalid_parameter"
    assert param in resp.get_json()["message"]


def test_bad_paths(client: Any) -> None:
    assert get(client, ADMIN, "_/Kustomization/app").status_code == 400  # namespaced kind
    assert get(client, ADMIN, "team-a/GatewayClass/istio").status_code == 400
    assert get(client, ADMIN, "team-a/NoSuchKind/app").status_code == 404
    assert get(client, ADMIN, "Team_A/Kustomization/app").status_code == 400


def test_list_rows_carry_blockedby_only_where_the_caller_may_list_it(client: Any) -> None:
    def blocked(user: UserInfo) -> dict[str, Any]:
        resp = client.get(
            "/api/v1/objects",
            headers=headers(user),
            query_string={"cluster": C, "namespace": "team-a", "kind": "Kustomization"},
        )
        check_response("/api/v1/objects", resp.status_code, resp.get_json())
        return {row["name"]: row.get("blockedBy") for row in resp.get_json()["items"]}

    infra = {
        "cluster": C,
        "namespace": "flux-system",
        "kind": "Kustomization",
        "name": "secret-infra",
        "exists": True,
    }
    for _ in range(2):  # the second round: every row text from the cache, spliced per caller
        admin, team = blocked(ADMIN), blocked(TEAM)
        assert admin["app"] == admin["web"] == admin["top"] == infra
        assert admin["broken"]["name"] == "failing-repo" and admin["broken"]["exists"] is True
        assert admin["cyc-a"] is None
        assert team["app"] is None and team["web"] is None  # secret-infra is not theirs
        assert team["broken"] == admin["broken"]
        assert set(team) == set(admin)


def test_a_request_costs_one_round_trip_per_level(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = client.application.extensions["fleetscope"]
    st.fleet.cache_s = 3600  # the fleet view's refresh is per period, not per request
    ok(client, ADMIN, "team-a/GitRepository/repo")  # warm: grants and fleet view cached
    trips = count_round_trips(monkeypatch)
    for depth in (1, 3, 5):
        trips.clear()
        ok(client, ADMIN, "team-a/GitRepository/repo", depth=depth)
        # the object with its dependents and the grants version, then one per level (repo's
        # downstream ends at level 3: no fourth read however deep the request)
        assert trips == ["pipeline"] * (1 + min(depth, 3))


@pytest.mark.standalone_only
def test_grants_revoked_after_they_were_cached_are_honoured(
    client: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller's grants come from the resolver's cache and are confirmed by the version read
    with the object: a revocation (a new version) is seen by the very next request."""
    st = client.application.extensions["fleetscope"]
    st.fleet.cache_s = 3600
    assert ok(client, TEAM, "team-a/Kustomization/app")["object"]["name"] == "app"
    r = topology.client(redis_url)
    revoked = rbac()
    revoked.role_bindings.clear()  # team-a's RoleBinding deleted
    store_grants(r, C, compile_grants(revoked, REG), time.time())
    r.close()
    trips = count_round_trips(monkeypatch)
    assert get(client, TEAM, "team-a/Kustomization/app").status_code == 404
    # the optimistic read of the object stops at the moved version: the checked grants next
    assert trips[:2] == ["pipeline", "GET"]
    assert ok(client, ADMIN, "team-a/Kustomization/app")["object"]["name"] == "app"


def test_reader_fans_out_in_one_round_trip_per_level(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = topology.client(redis_url)
    fan = [("GitRepository", obj("", "ns", "src"))]
    fan += [("Kustomization", obj("", "ns", f"k{i}", sourceRef=git("src"))) for i in range(40)]
    fan += [("Kustomization", obj("", "ns", f"d{i}", dependsOn=[dep(f"k{i}")])) for i in range(40)]
    ms = []
    for key, raw in fan:
        k = REG.get(key)
        assert k is not None
        ms.append(rows.member(C, k, k.api_version(), raw))
    store.replace_rows(r, C, ms)
    trips = count_round_trips(monkeypatch)
    got = relations_read.read(
        r, C, rows.sort_key("ns", "GitRepository", "src"), 5, lambda ns, k: True
    )
    assert got is not None
    assert len(got.downstream) == 80 and got.round_trips == 3 and trips == ["pipeline"] * 3
    hide_d = relations_read.read(
        r, C, rows.sort_key("ns", "GitRepository", "src"), 5, lambda ns, k: k != "Kustomization"
    )
    assert hide_d is not None and hide_d.downstream == [] and hide_d.hidden == 40
    assert (
        relations_read.read(
            r, C, rows.sort_key("ns", "GitRepository", "nope"), 1, lambda ns, k: True
        )
        is None
    )
    r.close()
