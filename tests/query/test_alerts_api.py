"""`GET /api/v1/alerts`: firing alerts RBAC-filtered as rows are (each user sees exactly the
alerts on rows they may list), cross-cluster alerts narrowed to the caller's clusters without
the text that could name the others, a refused rules file reported, the OpenAPI schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.alert_index import Harness, rules_file
from tests.support.index_fleet import make_row, write_rows
from tests.support.query_fleet import USERS, headers, oracle
from tests.support.schema import check_response

RULES = """
rules:
  - name: Unhealthy
    match: {status: unhealthy}
    annotations: {summary: "{{ .name }}: {{ .message }}"}
  - name: SharedFailing
    match: {name: shared-app, status: unhealthy}
    minClusters: 2
    labels: {where: "{{ .clusterNames }}"}
    annotations: {summary: "on {{ .clusterNames }}"}
"""


def alerts(client, user: str) -> dict:
    resp = client.get("/api/v1/alerts", headers=headers(USERS[user]))
    assert resp.status_code == 200, resp.get_json()
    check_response("/api/v1/alerts", 200, resp.get_json())
    return resp.get_json()


def key(a: dict) -> tuple[str, str, str, str]:
    return a["cluster"], a["namespace"], a["kind"], a["name"]


@pytest.mark.parametrize("who", sorted(USERS))
def test_each_user_sees_the_alerts_of_rows_they_may_list(client, seeded, rb, tmp_path: Path, who):
    Harness(rb, rules_file(tmp_path, RULES)).run()
    unhealthy = [r for r in seeded.rows if r["status"] == "unhealthy"]
    want = sorted(key(r) for r in oracle(unhealthy, USERS[who]))  # type: ignore[arg-type]
    got = alerts(client, who)
    assert sorted(key(a) for a in got["items"] if a["rule"] == "Unhealthy") == want
    assert got["rules"]["count"] == 2 and got["rules"]["error"] is None
    if who == "admin":
        assert len(want) > 10  # the oracle compares something


def test_cross_cluster_alerts_name_only_the_callers_clusters(client, seeded, rb, tmp_path: Path):
    write_rows(
        rb,
        [
            make_row(c, "team-07", "Kustomization", "shared-app", "unhealthy")
            for c in ("c01", "c02")
        ],
    )
    Harness(rb, rules_file(tmp_path, RULES)).run()
    (admin,) = (a for a in alerts(client, "admin")["items"] if a["rule"] == "SharedFailing")
    assert admin["clusters"] == ["c01", "c02"] and admin["annotations"] == {"summary": "on c01,c02"}
    (alice,) = (a for a in alerts(client, "alice")["items"] if a["rule"] == "SharedFailing")
    assert alice["clusters"] == ["c02"]  # alice may list team-07 on c02 only
    assert "c01" not in str(alice) and alice["annotations"] == {}
    assert not [a for a in alerts(client, "nobody")["items"] if a["rule"] == "SharedFailing"]


def test_a_refused_rules_file_is_reported(client, seeded, rb, tmp_path: Path):
    path = rules_file(tmp_path, RULES)
    h = Harness(rb, path)
    h.run()
    path.write_text("rules:\n  - name: Bad\n    match: {kind: Nope}\n")
    h.run()
    got = alerts(client, "admin")
    assert got["rules"]["error"].startswith("rules.yaml: rules[0] (Bad): match.kind: unknown kind")
    assert got["rules"]["count"] == 2 and got["items"]  # the previous rules keep running


def test_unknown_parameters_are_refused(client, seeded):
    resp = client.get("/api/v1/alerts?foo=1", headers=headers(USERS["admin"]))
    assert resp.status_code == 400 and resp.get_json()["error"] == "invalid_parameter"
