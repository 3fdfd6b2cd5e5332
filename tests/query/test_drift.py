"""Version drift on `GET /api/v1/groups` end to end with real parts (a kubesim fleet collected by
the real collector into Redis, asked over HTTP by the fleet's users): each object group's
`revisions` and `otherRevisions`, `drift=true` against an oracle built from the rows the same
user lists on `/api/v1/objects` (every demo user), walks while revisions change (no group twice,
converged groups gone, unchanged drifting groups shown once), the one-group route's `revision=`,
and the 400s."""

from __future__ import annotations

from typing import Any

import pytest

from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import e2e_fleet
from tests.support.e2e_fleet import (
    FLEET,
    USERS,
    collect,
    gkey,
    group_pages,
    group_walk,
    headers,
    normal,
    oracle,
    set_revision,
)

sim, settings, client = e2e_fleet.sim, e2e_fleet.settings, e2e_fleet.client


def drifting(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups whose clusters run two or more non-empty revisions (from their members)."""
    return [g for g in groups if len({m["revision"] for m in g["clusters"]} - {""}) > 1]


def releases(sim: KubeSim) -> dict[tuple[str, str], list[str]]:
    """(namespace, name) of each HelmRelease -> the clusters holding it."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in FLEET.cluster_names:
        for o in sim.list(c, "HelmRelease"):
            out.setdefault((o["metadata"]["namespace"], o["metadata"]["name"]), []).append(c)
    return out


@pytest.mark.parametrize("user", list(USERS))
def test_drift_groups_match_the_oracle_for_every_user(client: Any, user: str) -> None:
    selector = {"labelSelector": "app.kubernetes.io/name=apps,fleetscope.io/team!=team-01"}
    for query in ({}, {"kind": "HelmRelease"}, {"status": "healthy"}, selector):
        want = drifting(oracle(client, user, "object", **query))
        got = group_walk(client, user, 2, drift="true", **query)
        assert normal(got) == normal(want), (user, query)
        assert all(len(g["revisions"]) >= 2 for g in got)
    if user == "admin-0":  # Kustomizations apply each cluster's own commit: they drift
        assert drifting(oracle(client, user, "object"))


def test_a_rollout_reads_as_revisions_with_cluster_counts(
    sim: KubeSim, settings: Settings, client: Any
) -> None:
    """The issue's question: which clusters still run the old chart version."""
    (ns, name), held = max(releases(sim).items(), key=lambda p: len(p[1]))
    obj = sim.get(held[0], "HelmRelease", ns, name)
    assert obj is not None
    meta = {k: obj["metadata"][k] for k in ("name", "namespace", "labels") if k in obj["metadata"]}
    clusters = FLEET.cluster_names
    for c in clusters:  # the release on every cluster, as a fleet-wide chart is
        if c not in held:
            sim.apply(c, {**obj, "metadata": meta})
    for c in clusters:
        set_revision(sim, c, "HelmRelease", ns, name, "6.5.0")
    set_revision(sim, clusters[0], "HelmRelease", ns, name, "6.4.1")
    for c in clusters:
        collect(settings, c)
    got = group_walk(client, "admin-0", 50, kind="HelmRelease", drift="true")
    g = next(g for g in got if (g["namespace"], g["name"]) == (ns, name))
    new = len(clusters) - 1
    assert g["revisions"] == [
        {"revision": "6.5.0", "clusters": new},
        {"revision": "6.4.1", "clusters": 1},
    ] or (new == 1 and g["revisions"][0]["revision"] == "6.4.1")  # a tie: by revision
    assert g["otherRevisions"] == {"revisions": 0, "clusters": 0}
    # the expanded group lists the clusters by revision
    path = f"/api/v1/groups/{ns}/HelmRelease/{name}"
    h = headers("admin-0")
    old = client.get(path, query_string={"revision": "6.4.1"}, headers=h).get_json()
    assert [r["cluster"] for r in old["items"]] == [clusters[0]]
    assert old["revisions"] == g["revisions"]  # the counts stay the whole group's
    every = client.get(path, headers=h).get_json()["items"]
    assert {r["cluster"]: r["revision"] for r in every} == {
        c: "6.4.1" if c == clusters[0] else "6.5.0" for c in clusters
    }
    # converged: no longer drifting
    set_revision(sim, clusters[0], "HelmRelease", ns, name, "6.5.0")
    collect(settings, clusters[0])
    got = group_walk(client, "admin-0", 50, kind="HelmRelease", drift="true")
    assert (ns, "HelmRelease", name) not in {gkey(g) for g in got}


def test_a_team_members_revisions_count_their_clusters_only(client: Any) -> None:
    admin = {gkey(g): g for g in group_walk(client, "admin-0", 50)}
    team = group_walk(client, "dev-team-00", 50)
    assert team
    for g in team:
        a = {r["revision"]: r["clusters"] for r in admin[gkey(g)]["revisions"]}
        for r in g["revisions"]:
            assert r["clusters"] <= a[r["revision"]]
        assert sum(r["clusters"] for r in g["revisions"]) <= g["total"]


def test_revisions_of_as_many_clusters_order_by_revision_text(
    sim: KubeSim, settings: Settings, client: Any
) -> None:
    """One revision per cluster: a tie, ordered by revision text (more than five revisions:
    tests/common/index/read/test_drift_costs.py, over eight clusters)."""
    ns, name = "app-0001", "apps"
    held = [c for c in FLEET.cluster_names if sim.get(c, "Kustomization", ns, name)]
    assert len(held) >= 2
    for i, c in enumerate(held):
        set_revision(sim, c, "Kustomization", ns, name, f"main@sha1:{'fedcba'[i]}")
        collect(settings, c)
    got = group_walk(client, "admin-0", 50, drift="true")
    g = next(g for g in got if gkey(g) == (ns, "Kustomization", name))
    revs = [f"main@sha1:{'fedcba'[i]}" for i in range(len(held))]
    assert g["revisions"] == [{"revision": r, "clusters": 1} for r in sorted(revs)]
    assert g["otherRevisions"] == {"revisions": 0, "clusters": 0}


def test_drift_walks_under_revision_changes_show_no_group_twice(
    sim: KubeSim, settings: Settings, client: Any
) -> None:
    """Between pages, a drifting group not shown yet converges (gone: it no longer drifts) and
    a group already shown changes revisions again (a revision never moves a group in the
    order, so it is not shown twice); every other drifting group is shown once."""
    for i, c in enumerate(FLEET.cluster_names):  # every `apps` on a commit of its cluster's
        for o in sim.list(c, "Kustomization"):
            if o["metadata"]["name"] == "apps":
                set_revision(sim, c, "Kustomization", o["metadata"]["namespace"], "apps", f"c{i}")
    collect(settings)
    before = [gkey(g) for g in group_walk(client, "admin-0", 50, drift="true")]
    assert len(before) >= 6
    seen: list[tuple[str, ...]] = []
    converged: set[tuple[str, ...]] = set()
    for page in group_pages(client, "admin-0", 2, drift="true"):
        seen += [gkey(g) for g in page]
        ahead = [k for k in before if k not in seen and k not in converged]
        touched = set()
        if ahead:  # converge the last drifting group not shown yet
            ns, kind, name = ahead[-1]
            for c in FLEET.cluster_names:
                if sim.get(c, kind, ns, name):
                    set_revision(sim, c, kind, ns, name, "main@sha1:converged")
                    touched.add(c)
            converged.add(ahead[-1])
        ns, kind, name = seen[-1]  # one shown: a new revision on one of its clusters
        c = next(c for c in FLEET.cluster_names if sim.get(c, kind, ns, name))
        set_revision(sim, c, kind, ns, name, "main@sha1:again")
        touched.add(c)
        for c in touched:
            collect(settings, c)
    assert len(seen) == len(set(seen)), "a group was shown twice"
    assert not set(seen) & converged, "a group shown after it converged"
    assert set(seen) == set(before) - converged, "an unchanged drifting group was skipped"
    assert converged


def test_drift_errors_name_the_parameter(client: Any) -> None:
    h = headers("admin-0")
    for query in (
        {"drift": "true", "by": "namespace"},
        {"drift": "yes"},
        {"drift": ["true", "true"]},
    ):
        resp = client.get("/api/v1/groups", query_string=query, headers=h)
        assert resp.status_code == 400, query
        assert resp.get_json()["message"].startswith("drift:"), query
    # a token binds drift: one walk's token is refused on the other
    plain = client.get("/api/v1/groups", query_string={"limit": 1}, headers=h).get_json()
    drift = client.get(
        "/api/v1/groups", query_string={"limit": 1, "drift": "true"}, headers=h
    ).get_json()
    for token, q in ((plain["continue"], {"drift": "true"}), (drift["continue"], {})):
        resp = client.get("/api/v1/groups", query_string={**q, "continue": token}, headers=h)
        assert resp.status_code == 400 and resp.get_json()["message"].startswith("continue:")
    assert (
        client.get("/api/v1/groups", query_string={"drift": "false"}, headers=h).get_json()["items"]
        == client.get("/api/v1/groups", headers=h).get_json()["items"]
    )
    ns = FLEET.namespace_names()[0]
    resp = client.get(
        f"/api/v1/groups/{ns}/Kustomization/apps", query_string={"revision": ["a", "b"]}, headers=h
    )
    assert resp.status_code == 400 and resp.get_json()["message"].startswith("revision:")
    resp = client.get(f"/api/v1/groups/{ns}", query_string={"revision": "a"}, headers=h)
    assert resp.status_code == 400 and resp.get_json()["message"].startswith("revision:")
