"""The query API over HTTP (Flask test client, real Redis, real compiled grants): RBAC-filtered
pages equal the authorizer's answer for each kind of user, tokens are bound and signed, bad
input is 400 JSON, freshness and status tell the truth without naming clusters out of scope.
Every response is validated against the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from common.index import keys
from tests.support.index_fleet import delete_row, make_row, order, write_rows
from tests.support.paths import REPO
from tests.support.query_fleet import USERS, headers, mark_synced, oracle
from tests.support.schema import check_response


def get(client, path: str, user: str | None = "admin", **params: Any):
    h = headers(USERS[user]) if user else {}
    resp = client.get(path, query_string=params, headers=h)
    body = resp.get_json()
    check_response(path.split("?")[0], resp.status_code, body)
    return resp.status_code, body


def walk(client, user: str, **params: Any) -> list[dict]:
    rows, token = [], None
    while True:
        extra = {"continue": token} if token else {}
        status, body = get(client, "/api/v1/objects", user, **params, **extra)
        assert status == 200, body
        rows.extend(body["items"])
        token = body["continue"]
        if token is None:
            return rows
        assert len(body["items"]) == int(params.get("limit", 50))


@pytest.mark.parametrize("who", sorted(USERS))
def test_every_user_sees_exactly_what_rbac_lets_them_list(client, seeded, who) -> None:
    expected = sorted(oracle(seeded.rows, USERS[who]), key=order)
    got = walk(client, who, limit=7)
    assert [order(r) for r in got] == [order(r) for r in expected]
    assert got == expected
    if who == "nobody":
        assert got == []


def test_filters_combine_with_rbac(client, seeded) -> None:
    params = {
        "status": "unhealthy,progressing",
        "kind": ["HelmRelease", "Kustomization"],
        "limit": 3,
    }
    expected = [
        r
        for r in oracle(seeded.rows, USERS["team"])
        if r["status"] in ("unhealthy", "progressing")
        and r["kind"] in ("HelmRelease", "Kustomization")
    ]
    got = walk(client, "team", **params)
    assert [order(r) for r in got] == sorted(order(r) for r in expected)


@pytest.mark.parametrize("flag", ["true", "false"])
def test_suspension_filters_and_counts_beside_the_status(client, seeded, flag) -> None:
    for who in ("admin", "team"):
        visible = oracle(seeded.rows, USERS[who])
        wanted = flag == "true"
        expected = [r for r in visible if r["suspended"] is wanted]
        got = walk(client, who, suspended=flag, limit=5)
        assert [order(r) for r in got] == sorted(order(r) for r in expected)
        failing = walk(client, who, suspended=flag, status="unhealthy", limit=5)
        assert [order(r) for r in failing] == sorted(
            order(r) for r in expected if r["status"] == "unhealthy"
        )
        _, facets = get(client, "/api/v1/facets", who, suspended=flag)
        assert facets["total"] == len(expected)
        _, every = get(client, "/api/v1/facets", who)
        assert every["suspended"] == {
            "true": sum(r["suspended"] for r in visible),
            "false": sum(not r["suspended"] for r in visible),
        }
    assert any(r["suspended"] and r["status"] == "unhealthy" for r in seeded.rows)


def test_cluster_scoped_rows_need_a_cluster_wide_grant(client, seeded) -> None:
    scoped = [r for r in seeded.rows if r["namespace"] == ""]
    assert scoped
    admin = walk(client, "admin", namespace="_", limit=50)
    assert sorted(order(r) for r in admin) == sorted(order(r) for r in scoped)
    assert all(r["namespace"] == "" and r["kind"] == "GatewayClass" for r in admin)
    # Team members are bound by RoleBindings only: never a cluster-scoped row, with or without
    # the `_` filter, although their role allows every resource in their namespaces.
    assert walk(client, "team", namespace="_", limit=50) == []
    assert not [r for r in walk(client, "team", limit=50) if r["namespace"] == ""]


def test_continue_token_is_bound_to_filters_and_signed(client) -> None:
    _, body = get(client, "/api/v1/objects", limit=2, status="healthy")
    token = body["continue"]
    assert token
    status, err = get(client, "/api/v1/objects", limit=2, status="unhealthy", **{"continue": token})
    assert status == 400 and err["error"] == "invalid_parameter" and "continue" in err["message"]
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    status, err = get(
        client, "/api/v1/objects", limit=2, status="healthy", **{"continue": tampered}
    )
    assert status == 400 and "continue" in err["message"]
    status, _ = get(client, "/api/v1/objects", limit=5, status="healthy", **{"continue": token})
    assert status == 200  # another limit is fine


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "²"}, "limit"),
        ({"status": "broken"}, "status"),
        ({"kind": "Pod"}, "kind"),
        ({"namespace": "Not_A_Namespace"}, "namespace"),
        ({"cluster": "UPPER"}, "cluster"),
        ({"name": "x" * 300}, "name"),
        ({"sort": "name"}, "sort"),
        ({"suspended": "yes"}, "suspended"),
        ({"status": "suspended"}, "status"),
        ({"continue": "garbage"}, "continue"),
    ],
)
def test_bad_input_is_400_naming_the_parameter(client, params, param) -> None:
    status, body = get(client, "/api/v1/objects", **params)
    assert status == 400
    assert body["error"] == "invalid_parameter" and body["message"].startswith(param)


def test_unknown_route_and_unauthenticated_are_json(client) -> None:
    resp = client.get("/api/v1/nope", headers=headers(USERS["admin"]))
    assert resp.status_code == 404 and resp.get_json()["error"] == "not_found"
    status, body = get(client, "/api/v1/objects", user=None)
    assert status == 401 and body["error"] == "unauthenticated"


def test_header_identity_is_refused_from_untrusted_addresses(client) -> None:
    h = headers(USERS["admin"])
    # Twice each, interleaved: the verdict is remembered per peer address, never shared.
    for _ in range(2):
        assert client.get("/api/v1/objects", headers=h).status_code == 200  # trusted peer
        resp = client.get("/api/v1/objects", headers=h, environ_base={"REMOTE_ADDR": "10.1.2.3"})
        assert resp.status_code == 401 and resp.get_json()["error"] == "unauthenticated"


def test_facets_count_visible_rows(client, seeded) -> None:
    for who in ("admin", "team", "alice"):
        expected = [r for r in oracle(seeded.rows, USERS[who]) if r["status"] != "healthy"]
        status, body = get(client, "/api/v1/facets", who, status="unhealthy,progressing,unknown")
        assert status == 200
        assert body["total"] == len(expected)
        assert sum(body["clusters"].values()) == len(expected)
        assert set(body["clusters"]) == {r["cluster"] for r in expected}


def test_repeated_facets_follow_writes(client, seeded) -> None:
    """The encoded counts are reused only while the reader's result is: a row written or
    deleted between two identical requests shows in the second."""
    _, before = get(client, "/api/v1/facets", "admin")
    _, again = get(client, "/api/v1/facets", "admin")
    assert again == before
    row = make_row("c01", "team-a", "Kustomization", "added", "unhealthy")
    write_rows(seeded.r, [row])
    _, after = get(client, "/api/v1/facets", "admin")
    assert after["total"] == before["total"] + 1
    assert after["clusters"]["c01"] == before["clusters"]["c01"] + 1
    assert after["statuses"]["unhealthy"] == before["statuses"].get("unhealthy", 0) + 1
    delete_row(seeded.r, row)
    _, last = get(client, "/api/v1/facets", "admin")
    assert last == before


def test_status_and_clusters_name_only_clusters_in_scope(client, seeded) -> None:
    _, body = get(client, "/api/v1/status", "alice")
    assert body["state"] == "ready" and body["total"] == 4 and body["collected"] == 4
    assert [c["cluster"] for c in body["clusters"]] == ["c02"]
    _, body = get(client, "/api/v1/clusters", "nobody")
    assert body["clusters"] == []
    _, body = get(client, "/api/v1/clusters", "admin")
    assert [c["cluster"] for c in body["clusters"]] == ["c00", "c01", "c02", "c03"]


def test_stale_rbac_hides_rows_and_says_so(client, seeded) -> None:
    mark_synced(seeded.r, "c02", rbac_synced_at=1.0)
    _, body = get(client, "/api/v1/objects", "alice")
    assert body["items"] == []
    fresh = body["freshness"]
    assert fresh["degraded"] and fresh["state"] == "degraded"
    assert [c["cluster"] for c in fresh["hiddenStaleRbac"]] == ["c02"]
    _, body = get(client, "/api/v1/objects", "team")
    assert body["freshness"]["hiddenStaleRbac"] == []  # c02 is not in tina's scope


def test_rebuilding_lists_uncollected_clusters_in_scope(client, seeded) -> None:
    seeded.r.hset(keys.sync("c03"), mapping={"last_success": "", "state": "syncing"})
    seeded.r.hset(keys.sync("c02"), mapping={"state": "error", "last_success": "100"})
    _, body = get(client, "/api/v1/objects", "team", limit=1)
    fresh = body["freshness"]
    assert fresh["state"] == "rebuilding" and fresh["collected"] == 3 and fresh["total"] == 4
    assert fresh["notCollected"] == [{"cluster": "c03", "state": "syncing"}]
    assert fresh["stale"] == []  # c02 is stale but not tina's
    _, body = get(client, "/api/v1/objects", "alice", limit=1)
    assert body["freshness"]["stale"][0]["cluster"] == "c02"


def test_access_explains_the_callers_grants(client) -> None:
    _, body = get(client, "/api/v1/access", "sa")
    assert body["user"]["name"] == "system:serviceaccount:ci:deployer"
    [c01] = body["clusters"]
    assert c01["cluster"] == "c01" and c01["clusterWide"] == []
    assert c01["namespaces"] == {"ns0": ["Kustomization"]}
    assert c01["grants"] and all(g["namespace"] == "ns0" for g in c01["grants"])


def test_health_ready_metrics_and_openapi(client) -> None:
    assert get(client, "/healthz", None) == (200, {"status": "ok"})
    assert get(client, "/readyz", None) == (200, {"status": "ready"})
    get(client, "/api/v1/objects", "admin")
    text = client.get("/metrics").get_data(as_text=True)
    objects = '{route="/api/v1/objects",status="200"}'
    assert f"fleetscope_query_request_duration_seconds_count{objects}" in text
    assert "fleetscope_query_rbac_cache_total" in text
    doc = client.get("/api/v1/openapi.json").get_json()
    assert set(doc["paths"]) >= {"/api/v1/objects", "/api/v1/facets", "/api/v1/status"}


def test_redis_down_is_503_json(seeded, redis_url) -> None:
    from common.settings import Settings
    from tests.support.http import make_app

    app = make_app(Settings(redis_url="redis://127.0.0.1:1/0", auth_mode="anonymous"))
    resp = app.test_client().get("/api/v1/objects")
    assert resp.status_code == 503 and resp.get_json()["error"] == "unavailable"
    assert app.test_client().get("/readyz").status_code == 503


def test_docs_api_md_is_generated_from_the_document() -> None:
    from query.openapi import markdown
    from tests.support.schema import DOC

    assert (REPO / "docs/api.md").read_text() == markdown(DOC)


def test_http_walk_is_exactly_once_while_rows_change(client, seeded) -> None:
    from tests.support.index_fleet import delete_row, make_row, write_rows

    untouched = {order(r) for r in seeded.rows[1::2]}
    seen, token, step = [], None, 0
    while True:
        extra = {"continue": token} if token else {}
        _, body = get(client, "/api/v1/objects", "admin", limit=6, **extra)
        seen += [order(r) for r in body["items"]]
        token = body["continue"]
        if token is None:
            break
        step += 1
        delete_row(seeded.r, seeded.rows[(2 * step) % len(seeded.rows)])
        write_rows(seeded.r, [make_row(f"c0{step % 4}", "team-04", "Gateway", f"late-{step}")])
    assert len(seen) == len(set(seen))
    assert untouched <= set(seen)
