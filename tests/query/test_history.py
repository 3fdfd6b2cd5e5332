"""The history endpoint over transitions written by the real writer into a real Redis: newest
first, keyset pages with signed tokens (no duplicate, no gap while writes land), a deleted
object's history with `object: null`, RBAC exactly as for its row (a team member never reads
another team's history, deleted or not, and gets the same 404 as for an unknown object), bad
parameters, and what a request costs in Redis round trips."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from common.index import keys, rows
from common.index.write import store, store_events
from common.rbac.authorizer import UserInfo
from common.rbac.grants import compile_grants, store_grants
from common.settings import Settings
from tests.support import topology
from tests.support.costs import count_round_trips
from tests.support.http import make_app
from tests.support.query_fleet import REG, headers, mark_synced
from tests.support.schema import check_response
from tests.support.team_cluster import ADMIN, NOBODY, TEAM, C, member, rbac


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    store.replace_rows(client, C, [member(ns, n) for ns in ("team-a", "team-b") for n in "xy"])
    client.hset(keys.CLUSTERS, C, json.dumps({"source": "dir"}))
    store_grants(client, C, compile_grants(rbac(), REG), time.time())
    mark_synced(client, C, objects=4)
    yield client
    client.close()


@pytest.fixture
def client(r: Any, redis_url: str) -> Any:
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    return make_app(settings).test_client()


def flip(r: Any, ns: str, name: str, times: int) -> None:
    """`times` status transitions of one object, each its own watch batch."""
    for i in range(times):
        store_events.apply_changes(r, C, [store_events.Change.of(member(ns, name, i % 2 == 1))])


def delete(r: Any, ns: str, name: str) -> None:
    identity = rows.sort_key(ns, "Kustomization", name)
    store_events.apply_changes(r, C, [store_events.Change(identity, None)])


def get(client: Any, user: UserInfo, path: str, **params: Any) -> Any:
    url = f"/api/v1/objects/{C}/{path}/history"
    resp = client.get(url, headers=headers(user), query_string=params)
    check_response(url, resp.status_code, resp.get_json())
    return resp


def ok(client: Any, user: UserInfo, path: str, **params: Any) -> dict[str, Any]:
    resp = get(client, user, path, **params)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_newest_first_with_the_row(client: Any, r: Any) -> None:
    flip(r, "team-a", "x", 3)
    body = ok(client, TEAM, "team-a/Kustomization/x")
    assert body["object"]["name"] == "x" and body["object"]["status"] == "unhealthy"
    assert [e["status"] for e in body["items"]] == ["unhealthy", "healthy", "unhealthy"]
    assert {e["source"] for e in body["items"]} == {"watch"}
    assert body["continue"] is None


def test_an_object_without_transitions_answers_an_empty_history(client: Any) -> None:
    body = ok(client, ADMIN, "team-b/Kustomization/y")
    assert body["items"] == [] and body["object"]["name"] == "y"


def test_pages_walk_every_entry_once_while_writes_land(client: Any, r: Any) -> None:
    flip(r, "team-a", "x", 7)
    seen: list[int] = []
    body = ok(client, ADMIN, "team-a/Kustomization/x", limit=3)
    seen += [e["position"] for e in body["items"]]
    first = set(seen)
    flip(r, "team-a", "x", 2)  # newer entries land in front: the walk goes on behind
    while body["continue"]:
        body = ok(
            client, ADMIN, "team-a/Kustomization/x", limit=3, **{"continue": body["continue"]}
        )
        seen += [e["position"] for e in body["items"]]
    assert len(seen) == 7 and len(set(seen)) == 7
    assert seen == sorted(seen, reverse=True) and first <= set(seen)


def test_a_deleted_objects_history_stays_readable(client: Any, r: Any) -> None:
    flip(r, "team-a", "x", 1)
    delete(r, "team-a", "x")
    body = ok(client, TEAM, "team-a/Kustomization/x")
    assert body["object"] is None
    assert [e["source"] for e in body["items"]] == ["deleted", "watch"]


def test_a_team_member_never_reads_another_teams_history(client: Any, r: Any) -> None:
    flip(r, "team-b", "x", 2)
    delete(r, "team-b", "y")
    unknown = get(client, TEAM, "team-b/Kustomization/nothing-here")
    for path in ("team-b/Kustomization/x", "team-b/Kustomization/y"):
        resp = get(client, TEAM, path)
        assert resp.status_code == 404
        assert resp.get_json()["error"] == unknown.get_json()["error"] == "not_found"
        name = path.rsplit("/", 1)[1]
        same = unknown.get_json()["message"].replace("nothing-here", name)
        assert resp.get_json()["message"] == same  # nothing tells it from an unknown object
        assert get(client, NOBODY, path).status_code == 404
        assert ok(client, ADMIN, path)["items"]


def test_unknown_objects_and_clusters_are_404(client: Any) -> None:
    assert get(client, ADMIN, "team-a/Kustomization/never").status_code == 404
    resp = client.get("/api/v1/objects/nope/team-a/Kustomization/x/history", headers=headers(ADMIN))
    assert resp.status_code == 404


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("team-a/Kustomization/x", {"limit": "0"}),
        ("team-a/Kustomization/x", {"depth": "1"}),
        ("team-a/Kustomization/x", {"continue": "forged.token"}),
        ("Team_A/Kustomization/x", {}),
        ("team-a/Kustomization/x..y", {}),
    ],
)
def test_bad_parameters_are_400(client: Any, path: str, params: dict[str, str]) -> None:
    resp = get(client, ADMIN, path, **params)
    assert resp.status_code == 400, resp.get_json()
    assert resp.get_json()["error"] == "invalid_parameter"


def test_a_token_of_another_object_is_refused(client: Any, r: Any) -> None:
    flip(r, "team-a", "x", 3)
    token = ok(client, ADMIN, "team-a/Kustomization/x", limit=1)["continue"]
    resp = get(client, ADMIN, "team-b/Kustomization/x", **{"continue": token})
    assert resp.status_code == 400


def test_one_round_trip_for_the_row_and_its_history(
    client: Any, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    flip(r, "team-a", "x", 30)
    st = client.application.extensions["fleetscope"]
    st.fleet.cache_s = 3600  # the fleet view's refresh is per period, not per request
    ok(client, ADMIN, "team-a/Kustomization/x")  # warm: grants cached
    trips = count_round_trips(monkeypatch)
    counts = []
    for limit in (1, 5, 50):
        trips.clear()
        body = ok(client, ADMIN, "team-a/Kustomization/x", limit=limit)
        assert len(body["items"]) == min(limit, 30)
        # the row and its history in one pipeline; beside it only the grants version (and
        # the token signer's periodic key check): the same whatever the page or history size
        assert trips.count("pipeline") == 1
        assert set(trips) <= {"pipeline", "GET", "SET"}
        counts.append(trips.count("pipeline"))
    assert counts == [1, 1, 1]


def test_list_rows_carry_failing_since_and_transitions_24h(client: Any, r: Any) -> None:
    flip(r, "team-a", "x", 3)  # unhealthy, healthy, unhealthy
    entries = ok(client, TEAM, "team-a/Kustomization/x")["items"]
    resp = client.get(
        "/api/v1/objects", headers=headers(TEAM), query_string={"namespace": "team-a"}
    )
    check_response("/api/v1/objects", resp.status_code, resp.get_json())
    got = {row["name"]: row for row in resp.get_json()["items"]}
    assert got["x"]["transitions24h"] == 3
    assert got["x"]["failingSince"] == entries[0]["at"]  # the newest run began with the newest
    assert (got["y"]["transitions24h"], got["y"]["failingSince"]) == (0, None)
    # the history answer's row says the same
    assert ok(client, TEAM, "team-a/Kustomization/x")["object"]["transitions24h"] == 3
