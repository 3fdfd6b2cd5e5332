"""Attack tests on `GET /api/v1/watch` through the real gunicorn: a team member never receives
another team's events (live, on resume from an old position, or with the admin's own
resourceVersion), a forged or tampered resourceVersion is a 400, and a grant revoked while the
stream is open stops that namespace's events from the next write on (the hub re-resolves the
caller's access when the grants version moves, as lists do)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.index import keys
from common.index.write import store
from common.rbac.authorizer import RbacObjects
from common.rbac.grants import compile_grants, store_grants
from tests.support import topology
from tests.support.gunicorn import watch_server
from tests.support.http import raw_get as get
from tests.support.query_fleet import REG, mark_synced
from tests.support.sse import Stream
from tests.support.team_cluster import C, change, member

ADMIN = {"X-Remote-User": "root", "X-Remote-Group": "admins"}
TINA = {"X-Remote-User": "tina", "X-Remote-Group": "team-a"}


def grants(team_namespaces: tuple[str, ...]) -> RbacObjects:
    viewer = {
        "metadata": {"name": "viewer"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}],
    }
    admins = {
        "metadata": {"name": "admins"},
        "roleRef": {"kind": "ClusterRole", "name": "viewer"},
        "subjects": [{"kind": "Group", "name": "admins"}],
    }
    bindings = [
        {
            "metadata": {"name": "team-a", "namespace": ns},
            "roleRef": {"kind": "ClusterRole", "name": "viewer"},
            "subjects": [{"kind": "Group", "name": "team-a"}],
        }
        for ns in team_namespaces
    ]
    return RbacObjects([], [viewer], bindings, [admins])


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    store.replace_rows(client, C, [member(ns, "app") for ns in ("team-a", "team-b", "team-c")])
    client.hset(keys.CLUSTERS, C, json.dumps({"source": "dir"}))
    store_grants(client, C, compile_grants(grants(("team-a", "team-c")), REG), time.time())
    mark_synced(client, C, objects=3)
    yield client
    client.close()


@pytest.fixture
def server(r: Any, redis_url: str, tmp_path: Path) -> Iterator[str]:
    with watch_server(redis_url, tmp_path / "gunicorn.log") as host:
        yield host


def namespaces(events: list[Any]) -> list[str]:
    return [data["object"]["namespace"] for _, _, data in events]


def test_a_team_member_never_receives_another_teams_events(r: Any, server: str) -> None:
    _, admin_page = get(server, "/api/v1/objects", ADMIN)
    old = admin_page["resourceVersion"]  # the admin's position, before every write below
    live = Stream(server, "/api/v1/watch?resourceVersion=" + old, TINA)
    for ns in ("team-b", "team-a", "team-b", "team-c"):
        change(r, ns, "x", ready=False)
        change(r, ns, "x", ready=True)
    got = live.rows(4)
    assert namespaces(got) == ["team-a", "team-a", "team-c", "team-c"]
    live.close()
    # resuming from the old position replays the same, and only that, as the team sees it
    again = Stream(server, "/api/v1/watch", {**TINA, "Last-Event-ID": old})
    assert namespaces(again.rows(4)) == ["team-a", "team-a", "team-c", "team-c"]
    change(r, "team-b", "y")  # the next thing it receives is team-c's, never team-b's
    change(r, "team-c", "y")
    assert namespaces(again.rows(1)) == ["team-c"]
    again.close()
    # the initial state of a watch without a position holds only the team's rows
    fresh = Stream(server, "/api/v1/watch", TINA)
    initial = [d["object"]["namespace"] for _, _, d in fresh.rows(3)]
    assert set(initial) <= {"team-a", "team-c"}
    fresh.close()


def test_a_forged_or_tampered_resource_version_is_a_400(server: str) -> None:
    _, page = get(server, "/api/v1/objects", TINA)
    rv = page["resourceVersion"]
    body, mac = rv.split(".")
    for bad in (body + "." + mac[::-1], body[::-1] + "." + mac, "0-0", "9999999999"):
        status, answer = get(server, "/api/v1/watch?resourceVersion=" + bad, TINA)
        assert status == 400 and answer["error"] == "invalid_parameter", answer


def test_a_grant_revoked_mid_stream_stops_its_events(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects", TINA)
    stream = Stream(server, "/api/v1/watch?resourceVersion=" + page["resourceVersion"], TINA)
    change(r, "team-a", "before", ready=False)
    assert namespaces(stream.rows(1)) == ["team-a"]
    # team-a's RoleBinding is deleted (an RBAC sync stores the grants, then the version moves)
    store_grants(r, C, compile_grants(grants(("team-c",)), REG), time.time())
    change(r, "team-a", "after", ready=False)
    change(r, "team-c", "after", ready=False)
    assert namespaces(stream.rows(1)) == ["team-c"]  # team-a's write never came
    stream.close()
