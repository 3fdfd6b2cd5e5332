"""`GET /api/v1/facets?by=object|namespace` (the counts of groups) end to end with real parts: a
kubesim fleet collected by the real collector into Redis, asked over HTTP by the fleet's
generated users. Every answer is compared with counts made here from the rows the same user
lists on `/api/v1/objects` under the same filters (so they are RBAC-filtered exactly as lists
are), and with the groups `/api/v1/groups` lists; after writes, only the written clusters are
read again."""

from __future__ import annotations

from typing import Any

import pytest

from common.kinds.registry import builtin_registry
from common.kinds.status import STATUSES
from common.settings import Settings
from kubesim.gen.users import ALL
from kubesim.server import KubeSim
from tests.support import e2e_fleet
from tests.support.e2e_fleet import FLEET, USERS, collect, flux_objects, group_walk, headers, walk

sim, settings, client = e2e_fleet.sim, e2e_fleet.settings, e2e_fleet.client


def counted(client: Any, user: str, by: str, **query: str) -> dict[str, Any]:
    """The facets of groups, made from every row `user` may list under the same filters: per
    value, the groups that value's filter would return."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in walk(client, user, 500, **query):
        k = (row["namespace"], row["kind"], row["name"]) if by == "object" else (row["namespace"],)
        groups.setdefault(k, []).append(row)

    def count(field: str, value: Any = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for rs in groups.values():
            for v in {str(r[field]).lower() if value else r[field] for r in rs}:
                out[v] = out.get(v, 0) + 1
        return out

    suspended = count("suspended", value=True)
    return {
        "total": len(groups),
        "clusters": count("cluster"),
        "kinds": count("kind"),
        "statuses": count("status"),
        "suspended": {f: suspended.get(f, 0) for f in ("true", "false")},
    }


def group_facets(client: Any, user: str, by: str, **query: str) -> dict[str, Any]:
    resp = client.get("/api/v1/facets", query_string={"by": by, **query}, headers=headers(user))
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert body.pop("freshness")
    return dict(body)


@pytest.mark.parametrize("by", ["object", "namespace"])
@pytest.mark.parametrize("user", ["admin-0", "dev-team-00", "solo", "nobody"])
def test_group_facets_count_the_groups_each_user_may_list(client: Any, user: str, by: str) -> None:
    want = counted(client, user, by)
    assert group_facets(client, user, by) == want
    assert want["total"] == len(group_walk(client, user, 50, by=by))
    assert bool(want["total"]) is (user != "nobody")
    if user == "admin-0":  # groups, not rows: the fleet's clusters share objects
        rows = client.get("/api/v1/facets", headers=headers(user)).get_json()
        assert 0 < want["total"] < rows["total"]


@pytest.mark.parametrize(
    "query",
    [
        {"status": "unhealthy"},
        {"status": "healthy,progressing"},
        {"kind": "HelmRelease,Kustomization"},
        {"suspended": "true"},
        {"name": "a"},
        {"namespace": FLEET.namespace_names()[1]},
        {"cluster": FLEET.cluster_names[0], "status": "unhealthy,progressing"},
    ],
)
@pytest.mark.parametrize("by", ["object", "namespace"])
def test_filters_apply_to_group_facets(client: Any, query: dict[str, str], by: str) -> None:
    for user in ("admin-0", "dev-team-00"):
        assert group_facets(client, user, by, **query) == counted(client, user, by, **query), (
            user,
            query,
        )


def test_each_status_counts_the_groups_a_status_filter_returns(client: Any) -> None:
    """The group list's own filter agrees: `statuses[s]` groups come back for `status=s`."""
    got = group_facets(client, "admin-0", "object")
    for s in STATUSES:
        listed = group_walk(client, "admin-0", 50, status=s)
        assert got["statuses"].get(s, 0) == len(listed), s


@pytest.mark.parametrize(
    "user",
    [
        "admin-0",
        "dev-team-00",
        "solo",
        f"system:serviceaccount:{FLEET.namespace_names()[0]}:deployer",
    ],
)
def test_group_counts_follow_the_fleets_generated_access(
    sim: KubeSim, client: Any, user: str
) -> None:
    """The clusters of every group, and the group facets, against the leaves' own objects and
    the access kubesim generated for the user (not fleetscope's grants, nor its lists)."""
    u = USERS[user]
    where: dict[tuple[str, ...], set[str]] = {}
    for c in sim.clusters:
        for kind in builtin_registry():
            for obj in sim.list(c, kind.resource):
                ns = obj["metadata"].get("namespace", "")
                if u.namespaces(c) == ALL or ns in u.namespaces(c):
                    where.setdefault((ns, kind.key, obj["metadata"]["name"]), set()).add(c)
    assert where
    got = {
        (g["namespace"], g["kind"], g["name"]): {m["cluster"] for m in g["clusters"]}
        for g in group_walk(client, user, 7)
    }
    assert got == where
    facets = group_facets(client, user, "object")
    assert facets["total"] == len(where)
    clusters = {c: sum(1 for cs in where.values() if c in cs) for c in sim.clusters}
    assert facets["clusters"] == {c: n for c, n in clusters.items() if n}
    kinds = {k for _ns, k, _n in where}
    assert facets["kinds"] == {k: sum(1 for g in where if g[1] == k) for k in kinds}


def test_after_writes_only_the_written_clusters_are_read_again(
    sim: KubeSim, settings: Settings, client: Any
) -> None:
    """A write costs the next answer the written cluster's change feed since, and the held
    rows' difference from before: a transition (the same rows, a status moved) and a deletion
    (a row gone)."""
    counter = client.application.extensions["fleetscope"].group_facets
    users = ("admin-0", "dev-team-00")
    for user in users:
        for by in ("object", "namespace"):
            assert group_facets(client, user, by) == counted(client, user, by), (user, by)
    read, whole = counter.reads, counter.whole
    assert read == len(FLEET.cluster_names)  # each cluster once, shared by every caller
    one, two = FLEET.cluster_names[1], FLEET.cluster_names[2]
    kind, ns, name = flux_objects(sim, one)[0]
    sim.set_ready(one, kind, ns, name, False)
    kind, ns, name = flux_objects(sim, two)[-1]
    sim.delete(two, kind, ns, name)
    collect(settings, one)
    collect(settings, two)
    for user in users:
        for by in ("object", "namespace"):
            assert group_facets(client, user, by) == counted(client, user, by), (user, by)
    # the written clusters moved by their change feeds, once each: no rows read again
    assert (counter.reads, counter.followed) == (read, 2)
    assert counter.whole == whole  # every caller moved by the differences only


def test_group_facets_refuse_an_unknown_grouping(client: Any) -> None:
    h = headers("admin-0")
    for by in ("cluster", ["object", "namespace"]):
        resp = client.get("/api/v1/facets", query_string={"by": by}, headers=h)
        assert resp.status_code == 400 and resp.get_json()["message"].startswith("by:")
    rows = client.get("/api/v1/facets", headers=h).get_json()
    assert client.get("/api/v1/facets", query_string={"by": ""}, headers=h).get_json() == rows


def test_counts_hold_when_the_interned_identities_are_dropped(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `IDS_MAX` interned identities everything is dropped and read again: the answers
    stay exact (here on every request)."""
    from common.index.read import group_facets as module

    counter = client.application.extensions["fleetscope"].group_facets
    group_facets(client, "admin-0", "object")
    monkeypatch.setattr(module, "IDS_MAX", 5)
    read = counter.reads
    for user in ("admin-0", "dev-team-00"):
        for by in ("object", "namespace"):
            assert group_facets(client, user, by) == counted(client, user, by), (user, by)
    assert counter.reads >= read + 4 * len(FLEET.cluster_names)  # read afresh each time


def test_counts_hold_when_clusters_are_read_a_few_at_a_time_in_small_chunks(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are read `CLUSTERS_PER_READ` clusters a round trip, `CHUNK` rows a cluster at a
    time (fleet XL: all at once overloaded the shards): split finer than the fleet, the
    answers are the same, and every cluster is read."""
    from common.index.read import group_facets as module

    counter = client.application.extensions["fleetscope"].group_facets
    monkeypatch.setattr(module, "IDS_MAX", 5)  # read afresh on every request
    monkeypatch.setattr(module, "CLUSTERS_PER_READ", 2)
    monkeypatch.setattr(module, "CHUNK", 7)
    read = counter.reads
    for by in ("object", "namespace"):
        assert group_facets(client, "admin-0", by) == counted(client, "admin-0", by), by
    assert counter.reads >= read + 2 * len(FLEET.cluster_names)
    assert len(FLEET.cluster_names) > 2
