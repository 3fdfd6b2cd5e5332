"""`fleetscope get -w` against the real query service under gunicorn (its watch hub): the list,
then each change as it comes (`--output-watch-events` adds the EVENT column, or wraps JSON
objects as `{type, object}`), a row leaving the status filter printed as DELETED as it was,
and Ctrl-C ending it with exit status 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import topology
from tests.support.cli import Running
from tests.support.gunicorn import watch_server
from tests.support.team_cluster import change, seed

ADMIN = ["--as", "root", "--as-group", "admins"]


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    seed(client)
    yield client
    client.close()


@pytest.fixture
def server(r: Any, redis_url: str, tmp_path: Path) -> Iterator[str]:
    with watch_server(redis_url, tmp_path / "gunicorn.log") as host:
        yield f"http://{host}"


def test_list_then_changes_with_event_column_and_ctrl_c_exits_0(
    r: Any, server: str, home: Path
) -> None:
    run = Running(home, "get", "-w", "--output-watch-events", "--server", server, *ADMIN)
    try:
        header = run.line().split()
        assert header[:5] == ["EVENT", "CLUSTER", "NAMESPACE", "KIND", "NAME"]
        listed = sorted(run.line().split()[2] for _ in range(2))
        assert listed == ["team-a", "team-b"]
        change(r, "team-a", "app", ready=False)
        cells = run.line().split()
        assert cells[0] == "MODIFIED" and cells[2:5] == ["team-a", "Kustomization", "app"]
        assert "unhealthy" in cells
    finally:
        assert run.interrupt() == 0


def test_json_events_and_a_row_leaving_the_filter(r: Any, server: str, home: Path) -> None:
    change(r, "team-a", "app", ready=False)  # the list holds this one
    run = Running(
        home, "get", "-w", "--status", "unhealthy", "-o", "json", "--output-watch-events",
        "--server", server, *ADMIN,
    )  # fmt: skip
    try:

        def document() -> Any:
            lines = [run.line()]
            while lines[-1] != "}":
                lines.append(run.line())
            return json.loads("\n".join(lines))

        listed = document()
        assert (listed["type"], listed["object"]["namespace"]) == ("ADDED", "team-a")
        change(r, "team-b", "app", ready=False)
        change(r, "team-b", "app", ready=True)
        got = [document(), document()]
        assert [(d["type"], d["object"]["namespace"], d["object"]["status"]) for d in got] == [
            ("ADDED", "team-b", "unhealthy"),
            ("DELETED", "team-b", "unhealthy"),  # as it was when it left the filter
        ]
    finally:
        assert run.interrupt() == 0
