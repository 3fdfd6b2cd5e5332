"""Attack tests on `flapping=true` (lists and facets): a team member asking for flapping rows,
with or without naming another team's namespace, gets and counts only their own; the flapping
index is read per cluster but every member passes the caller's access before it is shown or
counted."""

from __future__ import annotations

from typing import Any

from tests.support import flapping_fleet
from tests.support.flapping_fleet import walk
from tests.support.query_fleet import headers
from tests.support.team_cluster import TEAM

r, client = flapping_fleet.r, flapping_fleet.client  # the flapping tests' fleet


def test_a_team_member_never_sees_nor_counts_another_teams_flapping_rows(client: Any) -> None:
    own = walk(client, TEAM, 1, flapping="true")
    assert own and {row["namespace"] for row in own} == {"team-a"}
    assert walk(client, TEAM, 50, flapping="true", namespace="team-b") == []
    for params in ({}, {"namespace": "team-b"}, {"kind": "Kustomization"}, {"name": "f2"}):
        facets = client.get(
            "/api/v1/facets", headers=headers(TEAM), query_string={"flapping": "true", **params}
        ).get_json()
        expected = (
            0 if params.get("namespace") == "team-b" or params.get("name") == "f2" else len(own)
        )
        assert facets["total"] == expected, params
