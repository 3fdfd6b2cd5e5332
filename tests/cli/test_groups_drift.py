"""`fleetscope groups --drift` as a subprocess against a real query service on a kubesim fleet:
the table holds the API's drifting groups in its order with a REVISIONS column
(`rev (clusters), ...`), `-o json|yaml` are the API's items exactly, and without `--drift`
the table keeps its columns."""

from __future__ import annotations

from typing import Any

import pytest
import requests
import yaml

from tests.support.cli import Stack, who


def api_groups(stack: Stack, user: str, **params: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        q = {**params, "limit": "500", **({"continue": token} if token else {})}
        resp = requests.get(
            stack.base + "/api/v1/groups", params=q, headers=stack.users[user].headers(), timeout=10
        )
        resp.raise_for_status()
        items += resp.json()["items"]
        token = resp.json()["continue"]
        if not token:
            return items


def revisions_text(g: dict[str, Any]) -> str:
    parts = [f"{r['revision']} ({r['clusters']})" for r in g["revisions"]]
    if g["otherRevisions"]["revisions"]:
        o = g["otherRevisions"]
        parts.append(f"+{o['revisions']} more ({o['clusters']})")
    return ", ".join(parts)


@pytest.mark.parametrize("user", ["admin-0", "dev-team-00"])
def test_drift_table_is_the_apis_drifting_groups(stack: Stack, cli, user: str) -> None:
    want = api_groups(stack, user, drift="true")
    assert all(len(g["revisions"]) >= 2 for g in want)
    assert want or user != "admin-0"  # a team member's own clusters may agree
    res = cli("groups", "--drift", "--chunk-size", "3", *who(stack, user))
    assert res.code == 0, res.err
    header, *lines = res.out.splitlines()
    assert header.split() == ["NAMESPACE", "KIND", "NAME", "CLUSTERS", "STATUSES", "REVISIONS"]
    assert len(lines) == len(want)  # none: the header alone, as groups prints it
    for line, g in zip(lines, want, strict=True):
        assert line.split()[:4] == [
            g["namespace"] or "<none>",
            g["kind"],
            g["name"],
            str(g["total"]),
        ]
        assert line.split(maxsplit=5)[5] == revisions_text(g)  # no spaces in the others


def test_drift_json_and_yaml_are_the_api_items(stack: Stack, cli) -> None:
    want = api_groups(stack, "admin-0", drift="true", kind="Kustomization")
    assert want
    for out in ("json", "yaml"):
        res = cli("groups", "Kustomization", "--drift", "-o", out, *who(stack, "admin-0"))
        assert res.code == 0, res.err
        doc = yaml.safe_load(res.out)
        assert doc["kind"] == "List" and doc["items"] == want, out


def test_without_drift_the_table_keeps_its_columns(stack: Stack, cli) -> None:
    res = cli("groups", "--limit", "2", *who(stack, "admin-0"))
    assert res.code == 0, res.err
    assert res.out.splitlines()[0].split() == ["NAMESPACE", "KIND", "NAME", "CLUSTERS", "STATUSES"]
