"""Attack tests on the history endpoint (`.../{name}/history`): a team member probing another
team's objects, live or deleted, learns nothing (the same 404 as for an object that never
existed, whatever the history holds); malformed or hostile path segments (hash-tag braces,
globs, NUL, traversal, control characters, overlong names) are a 400 and reach no Redis key."""

from __future__ import annotations

import json
import time
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
from tests.support.team_cluster import member, rbac

C = "c1"
TEAM = UserInfo("tina", ("team-a",))  # lists everything in team-a, nothing else
ADMIN = UserInfo("root", ("admins",))


@pytest.fixture
def client(redis_url: str) -> Any:
    r = topology.client(redis_url)
    store.replace_rows(r, C, [member(ns, "app") for ns in ("team-a", "team-b")])
    r.hset(keys.CLUSTERS, C, json.dumps({"source": "dir"}))
    store_grants(r, C, compile_grants(rbac(), REG), time.time())
    mark_synced(r, C, objects=2)
    for ready in (False, True, False):  # team-b's app flaps, then is deleted
        store_events.apply_changes(r, C, [store_events.Change.of(member("team-b", "app", ready))])
    store_events.apply_changes(r, C, [store_events.Change.of(member("team-b", "gone", False))])
    gone = rows.sort_key("team-b", "Kustomization", "gone")
    store_events.apply_changes(r, C, [store_events.Change(gone, None)])
    r.close()
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    return make_app(settings).test_client()


def history(client: Any, user: UserInfo, path: str) -> Any:
    return client.get(f"/api/v1/objects/{path}/history", headers=headers(user))


def test_another_teams_history_is_indistinguishable_from_nothing(client: Any) -> None:
    never = history(client, TEAM, f"{C}/team-b/Kustomization/never-was").get_json()
    for name in ("app", "gone"):  # live with history; deleted with history
        assert history(client, ADMIN, f"{C}/team-b/Kustomization/{name}").status_code == 200
        resp = history(client, TEAM, f"{C}/team-b/Kustomization/{name}")
        assert resp.status_code == 404
        assert resp.get_json() == {
            "error": never["error"],
            "message": never["message"].replace("never-was", name),
        }
    # and the team's own object answers, so the 404s above are RBAC, not a broken route
    assert history(client, TEAM, f"{C}/team-a/Kustomization/app").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "{c:c1}/team-b/Kustomization/app",  # a hash tag of its own
        f"{C}/team-*/Kustomization/app",  # a glob
        f"{C}/team-b/Kustomization/a%00pp",  # NUL: would splice another identity
        f"{C}/team-b/Kustomization/app%1b[2J",  # terminal control sequence
        f"{C}/team-b/Kustomization/..",  # traversal
        f"{C}/team-b/Kustomization/" + "a" * 300,  # overlong
        f"{C}/team-b/Kustomization/App",  # not a DNS subdomain
    ],
)
def test_hostile_segments_are_400_and_reach_no_redis_key(
    client: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    history(client, ADMIN, f"{C}/team-a/Kustomization/app")  # warm: grants cached
    trips = count_round_trips(monkeypatch)
    resp = history(client, ADMIN, path)
    assert resp.status_code == 400, resp.get_json()
    assert resp.get_json()["error"] == "invalid_parameter"
    assert "pipeline" not in trips  # the object's keys were never read
