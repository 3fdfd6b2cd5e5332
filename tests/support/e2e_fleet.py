"""The end-to-end query tests' fleet: a kubesim fleet (3 clusters x 8 namespaces, 3 teams)
collected by the real collector into Redis, the app over it in `header` mode, and its generated
users walking lists and groups over HTTP page by page; the oracle of a user's groups, built from
the rows the same user lists. A test module offers the fixtures with
`sim, settings, client = e2e_fleet.sim, e2e_fleet.settings, e2e_fleet.client`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.index.read.groups import RANK
from common.kinds.status import STATUSES
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.http import make_app

FLEET = generate_fleet(clusters=3, namespaces=8, seed=11, teams=3)
USERS = {u.name: u for u in fleet_users(FLEET)}
Key = tuple[str, str, str, str]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(FLEET, tmp_path)


@pytest.fixture
def settings(sim: KubeSim, tmp_path: Path, redis_url: str) -> Settings:
    return sims.settings_for(tmp_path, redis_url)


collect = sims.collect


@pytest.fixture
def client(settings: Settings) -> Any:
    collect(settings)
    return make_app(settings).test_client()


def headers(name: str) -> dict[str, str]:
    u = USERS[name]
    return {"X-Remote-User": u.name, "X-Remote-Group": ",".join(u.groups)}


def key(row: dict[str, Any]) -> Key:
    return (row["cluster"], row["namespace"], row["kind"], row["name"])


def pages(
    client: Any, user: str, limit: int, path: str = "/api/v1/objects", **query: Any
) -> Iterator[list[dict[str, Any]]]:
    """Every page of `path` for `user`, following `continue`."""
    token = None
    while True:
        q = {"limit": limit, **query, **({"continue": token} if token else {})}
        resp = client.get(path, query_string=q, headers=headers(user))
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        yield body["items"]
        token = body["continue"]
        if token is None:
            return


def walk(client: Any, user: str, limit: int, **query: str) -> list[dict[str, Any]]:
    return [row for page in pages(client, user, limit, **query) for row in page]


def flux_objects(sim: KubeSim, cluster: str) -> list[tuple[str, str, str]]:
    return [
        (kind, o["metadata"]["namespace"], o["metadata"]["name"])
        for kind in ("Kustomization", "HelmRelease", "GitRepository")
        for o in sim.list(cluster, kind)
        if any(c.get("type") == "Ready" for c in (o.get("status") or {}).get("conditions", []))
    ]


def group_pages(client: Any, user: str, limit: int, **query: Any) -> Iterator[list[dict]]:
    return pages(client, user, limit, "/api/v1/groups", **{"clusterLimit": 500, **query})


def group_walk(client: Any, user: str, limit: int, **query: Any) -> list[dict[str, Any]]:
    return [g for page in group_pages(client, user, limit, **query) for g in page]


def gkey(g: dict[str, Any]) -> tuple[str, ...]:
    return (g["namespace"], g["kind"], g["name"]) if "kind" in g else (g["namespace"],)


def oracle(client: Any, user: str, by: str, **query: Any) -> list[dict[str, Any]]:
    """The groups, in their order, from every row `user` may list under the same filters."""
    per: dict[tuple[str, ...], dict[str, list[dict[str, Any]]]] = {}
    for row in walk(client, user, 500, **query):
        k = (row["namespace"], row["kind"], row["name"]) if by == "object" else (row["namespace"],)
        per.setdefault(k, {}).setdefault(row["cluster"], []).append(row)
    out = []
    for k, clusters in per.items():
        members = []
        for c, rs in clusters.items():
            statuses = {s: sum(1 for r in rs if r["status"] == s) for s in STATUSES}
            worst = min((s for s, n in statuses.items() if n), key=RANK.__getitem__)
            members.append((c, worst, any(r["suspended"] for r in rs), statuses, len(rs)))
        members.sort(key=lambda m: (RANK[m[1]], m[0]))
        counts = {s: sum(1 for m in members if m[3][s]) for s in STATUSES}
        g: dict[str, Any] = {"namespace": k[0]}
        if by == "object":
            g["kind"], g["name"] = k[1], k[2]
        g["total"] = len(members)
        g["statuses"] = counts
        g["suspended"] = sum(1 for m in members if m[2])
        if by == "namespace":
            g["objects"] = sum(m[4] for m in members)
        else:
            g.update(revisions_oracle([clusters[m[0]][0]["revision"] for m in members]))
        g["clusters"] = [
            {"cluster": m[0], "status": m[1], "suspended": m[2]}
            | (
                {"objects": m[4], "statuses": {s: n for s, n in m[3].items() if n}}
                if by == "namespace"
                else {"revision": clusters[m[0]][0]["revision"]}
            )
            for m in members
        ]
        out.append(g)
    out.sort(key=lambda g: (-g["statuses"]["unhealthy"], gkey(g)))
    return out


def revisions_oracle(revs: list[str]) -> dict[str, Any]:
    """An object group's `revisions` and `otherRevisions` from its clusters' row revisions:
    empty ones are none; most clusters first, then by revision; five listed, the rest summed."""
    counts: dict[str, int] = {}
    for r in revs:
        if r:
            counts[r] = counts.get(r, 0) + 1
    order = sorted(counts.items(), key=lambda p: (-p[1], p[0]))
    return {
        "revisions": [{"revision": r, "clusters": n} for r, n in order[:5]],
        "otherRevisions": {"revisions": len(order[5:]), "clusters": sum(n for _, n in order[5:])},
    }


def normal(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Member status maps compared as sets (their key order is the API's, worst first)."""
    for g in groups:
        for m in g["clusters"]:
            if "statuses" in m:
                m["statuses"] = dict(sorted(m["statuses"].items()))
    return groups


def set_revision(sim: KubeSim, cluster: str, kind: str, ns: str, name: str, rev: str) -> None:
    """What the controller writes after applying `rev` (Ready keeps its transition time)."""
    field = "lastAttemptedRevision" if kind == "HelmRelease" else "lastAppliedRevision"
    obj = sim.get(cluster, kind, ns, name)
    assert obj is not None
    sim.patch_status(cluster, kind, ns, name, {**obj["status"], field: rev})
