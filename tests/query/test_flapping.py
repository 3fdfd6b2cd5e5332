"""`flapping=true` on lists and facets over rows written by the real writer into a real Redis:
the rows with at least FLEETSCOPE_FLAPPING_THRESHOLD transitions in the last 24 hours, against
an oracle (the unfiltered list's own `transitions24h`), per caller (RBAC-exact), paginated with
every row once; rows stop flapping as time passes without any write; what the filter does not
support yet is a 400; a page reads the small flapping index, not the rows."""

from __future__ import annotations

import calendar
import time
import types
from typing import Any

import pytest

from common.index.read import reader
from tests.support import flapping_fleet
from tests.support.costs import commands
from tests.support.flapping_fleet import CLUSTERS, walk
from tests.support.query_fleet import headers
from tests.support.team_cluster import ADMIN, NOBODY, TEAM

r, client = flapping_fleet.r, flapping_fleet.client


def key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["cluster"], row["namespace"], row["name"]


@pytest.mark.parametrize("user", [ADMIN, TEAM, NOBODY], ids=["admin", "team", "nobody"])
def test_flapping_rows_against_the_oracle(client: Any, user: Any) -> None:
    everything = walk(client, user, 500)
    oracle = [key(row) for row in everything if row["transitions24h"] >= 4]
    got = walk(client, user, 2, flapping="true")
    assert [key(row) for row in got] == oracle  # in list order, each once
    assert all(row["transitions24h"] >= 4 for row in got)
    if user is TEAM:
        assert {ns for _c, ns, _n in oracle} == {"team-a"}
    facets = client.get(
        "/api/v1/facets", headers=headers(user), query_string={"flapping": "true"}
    ).get_json()
    assert facets["total"] == len(oracle)
    assert sum(facets["clusters"].values()) == len(oracle)
    unhealthy = walk(client, user, 50, flapping="true", status="unhealthy")
    assert [key(row) for row in unhealthy] == [
        key(row)
        for row in everything
        if row["transitions24h"] >= 4 and row["status"] == "unhealthy"
    ]


def test_rows_stop_flapping_as_time_passes(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert walk(client, ADMIN, 50, flapping="true")
    later = time.time() + 86400 + 60  # a day later, and nothing written meanwhile
    fake = types.SimpleNamespace(time=lambda: later, monotonic=time.monotonic)
    monkeypatch.setattr(reader, "time", fake)
    assert walk(client, ADMIN, 50, flapping="true") == []
    facets = client.get(
        "/api/v1/facets", headers=headers(ADMIN), query_string={"flapping": "true"}
    ).get_json()
    assert facets["total"] == 0


@pytest.mark.parametrize("user", [ADMIN, TEAM, NOBODY], ids=["admin", "team", "nobody"])
@pytest.mark.parametrize("sort", ["lastTransitionTime", "-lastTransitionTime"])
def test_flapping_in_time_order_against_the_oracle(client: Any, user: Any, sort: str) -> None:
    def at(row: dict[str, Any]) -> int:
        ltt = row["lastTransitionTime"]
        if not ltt:
            return -1
        return int(calendar.timegm(time.strptime(ltt, "%Y-%m-%dT%H:%M:%SZ"))) * 1000

    everything = walk(client, user, 500)
    flapping = [row for row in everything if row["transitions24h"] >= 4]
    oracle = sorted(
        flapping, key=lambda r: (at(r), r["cluster"], r["namespace"], r["kind"], r["name"])
    )
    if sort.startswith("-"):
        oracle.reverse()
    got = walk(client, user, 2, flapping="true", sort=sort)  # pages of 2: every cut walked
    assert [key(row) for row in got] == [key(row) for row in oracle]  # in order, each once


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/objects", {"flapping": "false"}),
        ("/api/v1/objects", {"flapping": "yes"}),
        ("/api/v1/groups", {"flapping": "yes"}),
    ],
)
def test_what_is_not_supported_is_a_400(client: Any, path: str, params: dict[str, str]) -> None:
    resp = client.get(path, headers=headers(ADMIN), query_string=params)
    assert resp.status_code == 400, resp.get_json()
    assert "flapping" in resp.get_json()["message"]


def test_a_token_of_the_unfiltered_list_is_refused(client: Any) -> None:
    resp = client.get("/api/v1/objects", headers=headers(ADMIN), query_string={"limit": "1"})
    token = resp.get_json()["continue"]
    resp = client.get(
        "/api/v1/objects",
        headers=headers(ADMIN),
        query_string={"limit": "1", "flapping": "true", "continue": token},
    )
    assert resp.status_code == 400


def test_a_page_reads_the_flapping_index_not_the_rows(client: Any, r: Any) -> None:
    walk(client, ADMIN, 50, flapping="true")  # warm: scripts loaded, grants cached
    r.config_resetstat()
    got = walk(client, ADMIN, 50, flapping="true")
    used = commands(r)
    # every row of the fleet is 64 a cluster; the index holds the 3 that flapped there
    scanned_rows = used.get("zrangebylex", 0) + used.get("evalsha", 0)
    assert len(got) == 3 * len(CLUSTERS)
    assert scanned_rows <= 2 * len(CLUSTERS)  # one read of each cluster's index
    assert used.get("zrange", 0) == 0 and used.get("hgetall", 0) <= len(CLUSTERS)


@pytest.mark.parametrize("user", [ADMIN, TEAM, NOBODY], ids=["admin", "team", "nobody"])
@pytest.mark.parametrize("by", ["object", "namespace"])
def test_flapping_groups_and_their_facets_against_the_oracle(
    client: Any, user: Any, by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    flapping = [row for row in walk(client, user, 500) if row["transitions24h"] >= 4]

    def gkey(row: dict[str, Any]) -> tuple[str, ...]:
        return (
            (row["namespace"], row["kind"], row["name"]) if by == "object" else (row["namespace"],)
        )

    want = {gkey(row): {r["cluster"] for r in flapping if gkey(r) == gkey(row)} for row in flapping}
    got: dict[tuple[str, ...], set[str]] = {}
    token = None
    while True:  # pages of one group: every cut walked, each group once
        query = {"flapping": "true", "by": by, "limit": "1", "clusterLimit": "50"}
        resp = client.get(
            "/api/v1/groups",
            headers=headers(user),
            query_string={**query, **({"continue": token} if token else {})},
        )
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        for g in body["items"]:
            k = (g["namespace"], g["kind"], g["name"]) if by == "object" else (g["namespace"],)
            assert k not in got
            got[k] = {m["cluster"] for m in g["clusters"]}
        token = body["continue"]
        if not token:
            break
    assert got == want
    facets = client.get(
        "/api/v1/facets", headers=headers(user), query_string={"flapping": "true", "by": by}
    ).get_json()
    assert facets["total"] == len(want)
    for cluster in CLUSTERS:
        assert facets["clusters"].get(cluster, 0) == sum(1 for cs in want.values() if cluster in cs)
    # A day on, with nothing written, nothing flaps: no page remembers the groups.
    later = time.time() + 86400 + 60
    monkeypatch.setattr(
        reader, "time", types.SimpleNamespace(time=lambda: later, monotonic=time.monotonic)
    )
    resp = client.get(
        "/api/v1/groups", headers=headers(user), query_string={"flapping": "true", "by": by}
    )
    assert resp.get_json()["items"] == []
