"""`GET /api/v1/groups` and one group's routes end to end with real parts: a kubesim fleet
collected by the real collector into Redis, asked over HTTP by the fleet's generated users.
Every group page is compared with an oracle grouped from the rows the same user lists on
`/api/v1/objects` (so counts are RBAC-filtered exactly as lists are), and walks under concurrent
transitions must show every unchanged group exactly once and no group twice."""

from __future__ import annotations

from typing import Any

import pytest

from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import e2e_fleet
from tests.support.e2e_fleet import (
    FLEET,
    collect,
    flux_objects,
    gkey,
    group_pages,
    group_walk,
    headers,
    normal,
    oracle,
    walk,
)

# The kubesim fleet, its collector settings and the app over them: the time-sort tests' own.
sim, settings, client = e2e_fleet.sim, e2e_fleet.settings, e2e_fleet.client

USERS = ["admin-0", "dev-team-00", "solo", "nobody"]


@pytest.mark.parametrize("by", ["object", "namespace"])
@pytest.mark.parametrize("user", USERS)
def test_groups_hold_exactly_what_each_user_may_list(client: Any, user: str, by: str) -> None:
    want = oracle(client, user, by)
    got = group_walk(client, user, 3, by=by)
    assert normal(got) == normal(want)
    assert bool(want) is (user != "nobody")
    if user == "admin-0":  # both parts of the order: groups with unhealthy clusters, the rest
        assert any(g["statuses"]["unhealthy"] for g in want) and want[-1]["statuses"]["healthy"]


def test_group_counts_are_over_the_callers_clusters_only(client: Any) -> None:
    """A team member's counts are over the rows they may list: never more than an admin's,
    and fewer where the admin sees more (the oracle per user checks the numbers)."""
    admin = {gkey(g): g for g in group_walk(client, "admin-0", 50)}
    team = {gkey(g): g for g in group_walk(client, "dev-team-00", 50)}
    assert team and set(team) < set(admin)
    for k, g in team.items():
        assert g["total"] <= admin[k]["total"]
        seen = {m["cluster"] for m in g["clusters"]}
        assert seen <= {m["cluster"] for m in admin[k]["clusters"]}


@pytest.mark.parametrize(
    "query",
    [
        {"status": "unhealthy"},
        {"status": "healthy,progressing"},
        {"kind": "HelmRelease"},
        {"suspended": "false"},
        {"name": "a"},
        {"namespace": FLEET.namespace_names()[1]},
        {"cluster": FLEET.cluster_names[0], "status": "unhealthy,progressing"},
    ],
)
@pytest.mark.parametrize("by", ["object", "namespace"])
def test_filters_apply_to_groups(client: Any, query: dict[str, str], by: str) -> None:
    for user in ("admin-0", "dev-team-00"):
        want = oracle(client, user, by, **query)
        assert normal(group_walk(client, user, 4, by=by, **query)) == normal(want), (user, query)


def test_a_list_shows_the_first_clusters_worst_first(client: Any) -> None:
    full = group_walk(client, "admin-0", 20)
    short = group_walk(client, "admin-0", 20, clusterLimit=1)
    assert [gkey(g) for g in short] == [gkey(g) for g in full]
    for s, f in zip(short, full, strict=True):
        assert s["clusters"] == f["clusters"][:1] and s["total"] == f["total"]


def test_one_group_lists_its_rows_and_pages_them(client: Any) -> None:
    h = headers("admin-0")
    g = next(g for g in group_walk(client, "admin-0", 50) if g["total"] > 1)
    ns = g["namespace"] or "_"
    path = f"/api/v1/groups/{ns}/{g['kind']}/{g['name']}"
    seen, token = [], None
    while True:
        q = {"limit": 1, **({"continue": token} if token else {})}
        resp = client.get(path, query_string=q, headers=h)
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        assert body["total"] == g["total"] and body["statuses"] == g["statuses"]
        assert len(body["items"]) == 1
        seen += body["items"]
        token = body["continue"]
        if token is None:
            break
    assert [r["cluster"] for r in seen] == [m["cluster"] for m in g["clusters"]]
    rows = {
        r["cluster"]: r
        for r in walk(client, "admin-0", 500)
        if (r["namespace"], r["kind"], r["name"]) == gkey(g)
    }
    assert {r["cluster"]: r for r in seen} == rows
    n = next(n for n in group_walk(client, "admin-0", 50, by="namespace") if n["total"] > 1)
    resp = client.get(f"/api/v1/groups/{n['namespace'] or '_'}", headers=h)
    body = resp.get_json()
    assert (
        resp.status_code == 200 and body["items"] == n["clusters"] and body["total"] == n["total"]
    )


def test_group_errors_name_the_parameter(client: Any) -> None:
    h = headers("admin-0")
    for query, param in [
        ({"by": "cluster"}, "by"),
        ({"by": ["object", "namespace"]}, "by"),
        ({"clusterLimit": "-1"}, "clusterLimit"),
        ({"sort": "lastTransitionTime"}, "sort"),
        ({"limit": "0"}, "limit"),
        ({"status": "broken"}, "status"),
    ]:
        resp = client.get("/api/v1/groups", query_string=query, headers=h)
        assert resp.status_code == 400, query
        assert resp.get_json()["message"].startswith(f"{param}:"), query
    first = client.get("/api/v1/groups", query_string={"limit": 1}, headers=h).get_json()
    plain = client.get("/api/v1/objects", query_string={"limit": 1}, headers=h).get_json()
    for token, by in [(first["continue"], "namespace"), (plain["continue"], "object")]:
        q = {"limit": 1, "by": by, "continue": token}
        resp = client.get("/api/v1/groups", query_string=q, headers=h)
        assert resp.status_code == 400 and resp.get_json()["message"].startswith("continue:")
    q = {"limit": 1, "continue": first["continue"]}
    assert client.get("/api/v1/objects", query_string=q, headers=h).status_code == 400
    assert client.get("/api/v1/groups/apps/NoSuchKind/x", headers=h).status_code == 404
    assert client.get("/api/v1/groups/Bad_NS", headers=h).status_code == 400
    assert client.get("/api/v1/groups/nowhere/Kustomization/x", headers=h).status_code == 404
    resp = client.get("/api/v1/groups/apps/Kustomization/x", query_string={"kind": "x"}, headers=h)
    assert resp.status_code == 400 and resp.get_json()["message"].startswith("kind:")


def ready_of(sim: KubeSim, cluster: str, kind: str, ns: str, name: str) -> bool:
    obj = sim.get(cluster, kind, ns, name)
    assert obj is not None
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_group_walks_under_transitions_show_unchanged_groups_once_and_none_twice(
    sim: KubeSim, settings: Settings, client: Any, by: str
) -> None:
    targets = [(c, *t) for c in FLEET.cluster_names for t in flux_objects(sim, c)]
    assert len(targets) >= 12
    failing = targets[::5][:4]  # made to fail first: their groups lead the order
    for cluster, kind, ns, name in failing:
        sim.set_ready(cluster, kind, ns, name, False)
    for cluster in {t[0] for t in failing}:
        collect(settings, cluster)
    before = {gkey(g): g for g in group_walk(client, "admin-0", 50, by=by)}
    seen: list[tuple[str, ...]] = []
    changed: set[tuple[str, ...]] = set()
    moved = 0
    for page in group_pages(client, "admin-0", 2, by=by):
        seen += [gkey(g) for g in page]
        # Between pages, failing objects of groups already shown recover (their groups move
        # later in the order: shown again unless the walk knows they changed) and an object
        # of a group not shown yet fails (its group moves earlier); the collector writes them.
        flips = [t for t in failing if not ready_of(sim, *t) and key_of(t, by) in seen]
        flips += [t for t in targets if ready_of(sim, *t) and key_of(t, by) not in seen][:1]
        for cluster, kind, ns, name in flips:
            sim.set_ready(cluster, kind, ns, name, not ready_of(sim, cluster, kind, ns, name))
            changed.add(key_of((cluster, kind, ns, name), by))
        moved += len(flips)
        for cluster in {t[0] for t in flips}:
            collect(settings, cluster)
    assert len(seen) == len(set(seen)), "a group was shown twice"
    assert set(seen) >= set(before) - changed, "an unchanged group was skipped"
    assert moved >= 6  # the walk crossed pages while groups moved both ways


def key_of(target: tuple[str, str, str, str], by: str) -> tuple[str, ...]:
    _cluster, kind, ns, name = target
    return (ns, kind, name) if by == "object" else (ns,)
