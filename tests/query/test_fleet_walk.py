"""End to end with real parts: a kubesim fleet, collected by the real collector into Redis, then
every page walked over HTTP for generated users (admin, team member, single-namespace user,
service account, nobody) and compared with the visible set computed from the generated RBAC
(kubesim.gen.users), not from fleetscope's grants. Also the detail proxy against the leaf."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from common.kinds.registry import builtin_registry
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import ALL, fleet_users
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.http import make_app

REG = builtin_registry()
FLEET = generate_fleet(clusters=3, namespaces=8, seed=5, teams=3)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(FLEET, tmp_path)


@pytest.fixture
def app(sim: KubeSim, tmp_path: Path, redis_url: str):
    settings = sims.settings_for(tmp_path, redis_url)
    sims.collect(settings)
    return make_app(settings)


def all_objects(sim: KubeSim) -> list[tuple[str, str, str, str]]:
    out = []
    for c in sim.clusters:
        for kind in REG:
            for obj in sim.list(c, kind.resource):
                ns = obj["metadata"].get("namespace", "")
                out.append((c, ns, kind.key, obj["metadata"]["name"]))
    return out


def walk(client, user, limit: int) -> list[tuple[str, str, str, str]]:
    h = {"X-Remote-User": user.name, "X-Remote-Group": ",".join(user.groups)}
    got, token = [], None
    while True:
        q = {"limit": limit, **({"continue": token} if token else {})}
        body = client.get("/api/v1/objects", query_string=q, headers=h).get_json()
        got += [(r["cluster"], r["namespace"], r["kind"], r["name"]) for r in body["items"]]
        token = body["continue"]
        if token is None:
            assert body["freshness"]["state"] == "ready"
            return got
        assert len(body["items"]) == limit


def test_generated_users_see_exactly_their_generated_access(sim: KubeSim, app) -> None:
    objects = all_objects(sim)
    users = {u.name: u for u in fleet_users(FLEET)}
    chosen = [
        "admin-0",
        "dev-team-00",
        "solo",
        f"system:serviceaccount:{FLEET.namespace_names()[0]}:deployer",
        "nobody",
    ]
    client = app.test_client()
    for name in chosen:
        u = users[name]
        expected = sorted(
            o for o in objects if u.namespaces(o[0]) == ALL or o[1] in u.namespaces(o[0])
        )
        got = walk(client, u, limit=13)
        assert len(got) == len(set(got)), name
        assert got == sorted(
            got, key=lambda o: (o[0], o[1].encode() + b"\0" + o[2].encode() + b"\0" + o[3].encode())
        ), name
        assert sorted(got) == expected, name
        if name != "nobody":
            assert expected, f"{name} should see something in this fleet"


def test_detail_proxy_reads_the_leaf_as_the_caller(sim: KubeSim, app) -> None:
    client = app.test_client()
    c, ns, kind, name = all_objects(sim)[0]
    path = f"/api/v1/objects/{c}/{ns}/{kind}/{name}"
    admin = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
    sim.clear_request_log(c)
    resp = client.get(path, headers=admin)
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert body["object"]["metadata"]["name"] == name
    assert "managedFields" not in body["object"]["metadata"]
    [req] = sim.request_log(c)
    assert name in req.path  # exactly one leaf request, for that object

    # A caller who can list nothing on the cluster learns nothing about it (not even that it
    # exists): the same 404 as an unregistered cluster, and no request reaches the leaf.
    sim.clear_request_log(c)
    resp = client.get(path, headers={"X-Remote-User": "nobody"})
    unknown = client.get(f"/api/v1/objects/nope/{ns}/{kind}/{name}", headers=admin)
    assert resp.status_code == 404 and resp.get_json()["error"] == "not_found"
    assert resp.get_json()["message"] == unknown.get_json()["message"].replace("nope", c)
    assert sim.request_log(c) == []

    # A caller in scope on the cluster but without `get` on that object: the leaf decides (403).
    solo = next(u for u in fleet_users(FLEET) if u.name == "solo")
    [(solo_cluster, [solo_ns])] = solo.access.items()
    other = next(o for o in all_objects(sim) if o[0] == solo_cluster and o[1] != solo_ns)
    resp = client.get("/api/v1/objects/" + "/".join(other), headers={"X-Remote-User": "solo"})
    assert resp.status_code == 403 and resp.get_json()["error"] == "forbidden"
    resp = client.get(f"/api/v1/objects/{c}/{ns}/{kind}/does-not-exist", headers=admin)
    assert resp.status_code == 404 and resp.get_json()["error"] == "not_found"

    sim.clear_request_log(c)
    for bad, status in [
        (f"/api/v1/objects/nope/{ns}/{kind}/{name}", 404),
        (f"/api/v1/objects/{c}/{ns}/Pod/{name}", 404),
        (f"/api/v1/objects/{c}/{ns}/{kind}/Bad_Name", 400),
        (f"/api/v1/objects/{c}/NS!/{kind}/{name}", 400),
        (f"/api/v1/objects/{c}/{ns}/{kind}/{name}/status", 404),
    ]:
        resp = client.get(bad, headers=admin)
        assert resp.status_code == status, bad
        assert resp.get_json()["error"]
    assert sim.request_log(c) == [], "invalid requests never reach the leaf"

    sim.set_fault(c, latency_s=3.0)
    resp = client.get(path, headers=admin)
    assert resp.status_code == 504 and resp.get_json()["error"] == "upstream_timeout"
