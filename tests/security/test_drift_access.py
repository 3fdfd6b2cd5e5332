"""Attack tests on version drift (`revisions` on groups, `drift=true`, `revision=` on one group):
a team member never sees, counts or filters by a revision running where they may not list the
object (another team owns the namespace on that cluster), and a leaf's revision text reaches
neither a terminal as control sequences (`fleetscope groups --drift`) nor a spreadsheet as a
formula (the CSV `revisions` column)."""

from __future__ import annotations

from typing import Any

from common.settings import Settings
from fleetscope.client.groups import revision_cell
from kubesim.server import KubeSim
from query import export
from tests.support import e2e_fleet
from tests.support.e2e_fleet import USERS, collect, group_walk, headers, set_revision

sim, settings, client = e2e_fleet.sim, e2e_fleet.settings, e2e_fleet.client

SECRET = "main@sha1:another-teams-commit"
TEAM = "dev-team-00"


def test_a_team_member_never_sees_a_revision_of_another_teams_cluster(
    sim: KubeSim, settings: Settings, client: Any
) -> None:
    access = USERS[TEAM].access
    # app-0007 is team-00's on two clusters, another team's on the third
    ns = next(
        n
        for n in ("app-0007", "app-0005", "app-0006")
        if 0 < sum(n in v for v in access.values()) < 3
    )
    foreign = next(c for c in sorted(access) if ns not in access[c])
    set_revision(sim, foreign, "Kustomization", ns, "apps", SECRET)
    collect(settings, foreign)
    key = (ns, "Kustomization", "apps")

    def find(user: str, **q: str) -> dict[str, Any] | None:
        return next(
            (
                g
                for g in group_walk(client, user, 50, **q)
                if (g["namespace"], g["kind"], g["name"]) == key
            ),
            None,
        )

    admin = find("admin-0", drift="true")
    assert admin is not None and SECRET in {r["revision"] for r in admin["revisions"]}
    for q in ({}, {"drift": "true"}, {"kind": "Kustomization"}):
        mine = find(TEAM, **q)
        if mine is not None:
            assert SECRET not in str(mine), q
            assert foreign not in {m["cluster"] for m in mine["clusters"]}, q
            assert sum(r["clusters"] for r in mine["revisions"]) <= mine["total"]
    path = f"/api/v1/groups/{ns}/Kustomization/apps"
    resp = client.get(path, query_string={"revision": SECRET}, headers=headers(TEAM))
    assert resp.status_code in (200, 404)
    if resp.status_code == 200:
        body = resp.get_json()
        assert body["items"] == [] and SECRET not in str(body)
    # the cluster filter naming the foreign cluster shows nothing either
    assert find(TEAM, cluster=foreign) is None


def test_a_leafs_revision_reaches_no_terminal_and_no_formula() -> None:
    g = {
        "revisions": [
            {"revision": "\x1b]0;pwned\x07\x1b[2J1.0", "clusters": 3},
            {"revision": '=HYPERLINK("http://x")', "clusters": 1},
        ],
        "otherRevisions": {"revisions": 0, "clusters": 0},
    }
    shown = revision_cell(g)
    assert "\x1b" not in shown and "\x07" not in shown
    formula = {"revisions": [g["revisions"][1]], "otherRevisions": g["otherRevisions"]}
    assert export.cell(export._revisions_text(formula)).startswith("'=")
