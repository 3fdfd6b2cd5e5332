"""`fleetscope get -w` against the real query service under gunicorn (its watch hub): the list,
then each change as it comes (`--output-watch-events` adds the EVENT column, or wraps JSON
objects as `{type, object}`), a row leaving the status filter printed as DELETED as it was,
and Ctrl-C ending it with exit status 0."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import topology
from tests.support.cli import clean_env
from tests.support.gunicorn import watch_server
from tests.support.paths import REPO
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


class Running:
    """The CLI as a process whose output lines are read with a deadline."""

    def __init__(self, home: Path, *args: str) -> None:
        env = clean_env(home, {"PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fleetscope", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self) -> str:
        try:
            line = self.lines.get(timeout=20)
        except queue.Empty:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=20)
            pytest.fail(f"no output in 20 s after {self.seen[-5:]}; stderr: {err[-6000:]}")
        self.seen.append(line)
        return line

    def interrupt(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(20)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code


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
