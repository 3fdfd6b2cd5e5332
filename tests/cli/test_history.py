"""`fleetscope history` and the history part of `describe`, against the real query service of
the CLI stack: transitions written by the real writer (newest first, table / json / yaml),
another team's object answered as not found, leaf control characters shown escaped, and
`describe` showing "Failing since" and the last transitions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
import yaml

from common.index import rows
from common.index.write import store_events
from tests.support.cli import Stack
from tests.support.index_fleet import row_of

EVIL = "\x1b[2JBuildFailed"


def who(stack: Stack, name: str) -> list[str]:
    return ["--server", stack.base, *stack.users[name].flags()]


def flipped(member: str, status: str, reason: str) -> str:
    parts = rows.split_member(rows.with_blocked(member, ""))
    parts[3] = rows.status_code(status, False)
    parts[4] = reason
    return "\x00".join(parts)


@pytest.fixture(scope="module")
def transitioned(stack: Stack) -> Iterator[dict[str, Any]]:
    """A team's healthy Kustomization that failed (with a hostile reason), then recovered, and
    failed again: three transitions; put back as it was at the end."""
    row = next(
        r
        for r in stack.api_rows(stack.users["dev-team-00"], kind="Kustomization")
        if r["status"] == "healthy" and not r["suspended"]
    )
    r = redis.Redis.from_url(stack.settings.redis_url)
    c = row["cluster"]
    original = row_of(r, c, row["namespace"], "Kustomization", row["name"])
    assert original is not None
    for status, reason in (("unhealthy", EVIL), ("healthy", "Succeeded"), ("unhealthy", "X")):
        change = store_events.Change.of(flipped(original, status, reason))
        store_events.apply_changes(r, c, [change])
    yield row
    store_events.apply_changes(r, c, [store_events.Change.of(rows.with_blocked(original, ""))])
    r.close()


def ref(row: dict[str, Any], kind: str = "ks") -> str:
    return f"{row['cluster']}/{row['namespace']}/{kind}/{row['name']}"


def test_table_newest_first_with_control_characters_escaped(
    stack: Stack, cli, transitioned: dict[str, Any]
) -> None:
    res = cli("history", ref(transitioned), *who(stack, "dev-team-00"))
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].split() == ["AGE", "AT", "STATUS", "SOURCE", "REASON", "REVISION", "MESSAGE"]
    assert [line.split()[2] for line in lines[1:]] == ["unhealthy", "healthy", "unhealthy"]
    assert "\x1b" not in res.out
    assert "\\x1b[2JBuildFailed" in lines[3]


def test_json_and_yaml_are_the_apis_answer(stack: Stack, cli, transitioned: dict[str, Any]) -> None:
    res = cli("history", ref(transitioned, "Kustomization"), "-o", "json", *who(stack, "admin-0"))
    assert res.code == 0, res.err
    body = res.json()
    assert body["object"]["name"] == transitioned["name"]
    assert [e["reason"] for e in body["items"]] == ["X", "Succeeded", EVIL]
    assert all(e["source"] == "watch" for e in body["items"])
    limited = cli(
        "history", ref(transitioned), "-o", "yaml", "--limit", "1", *who(stack, "admin-0")
    )
    assert limited.code == 0, limited.err
    assert [e["reason"] for e in yaml.safe_load(limited.out)["items"]] == ["X"]


def test_another_team_gets_not_found(stack: Stack, cli, transitioned: dict[str, Any]) -> None:
    other = next(u for u in stack.users if u.startswith("dev-team-") and u != "dev-team-00")
    res = cli("history", ref(transitioned), *who(stack, other))
    assert res.code == 5, res.out
    assert res.err.startswith("error: not found: ")
    assert res.out == ""


def test_describe_shows_failing_since_and_last_transitions(
    stack: Stack, cli, transitioned: dict[str, Any]
) -> None:
    res = cli("describe", ref(transitioned), *who(stack, "admin-0"))
    assert res.code == 0, res.err
    assert yaml.safe_load(res.out)["metadata"]["name"] == transitioned["name"]  # still YAML
    comments = [line for line in res.out.splitlines() if line.startswith("#")]
    since = next(line for line in comments if line.startswith("# Failing since: "))
    assert since.split(": ", 1)[1].endswith("Z")
    assert "# Last transitions:" in comments
    assert "\x1b" not in res.out


def test_describe_of_a_row_failing_since_before_fleetscope_saw_it(stack: Stack, cli) -> None:
    row = next(
        r
        for r in stack.api_rows(stack.users["admin-0"], kind="Kustomization")
        if r["status"] == "unhealthy" and r["lastTransitionTime"] and not r["transitions24h"]
    )
    assert row["failingSince"] == row["lastTransitionTime"]  # the leaf's own record
    res = cli("describe", ref(row), *who(stack, "admin-0"))
    assert res.code == 0, res.err
    assert f"# Failing since: {row['lastTransitionTime']}\n" in res.out
    assert "#   none recorded\n" in res.out
