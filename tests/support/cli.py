"""The command-line client in tests: a caller (`User`, as flags or as the headers the API trusts),
the CLI tests' stack (a kubesim fleet collected once, the query app on a real HTTP server in
`header` mode) with the rows the API itself gives a user, and `python -m fleetscope ARGS` run as
a subprocess with only the environment given (the `cli` fixture in tests/conftest.py)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.paths import REPO

LISTER = "lister"  # may list Kustomizations in one namespace, but not get them


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    def flags(self) -> list[str]:
        return ["--as", self.name, *(f for g in self.groups for f in ("--as-group", g))]

    def headers(self) -> dict[str, str]:
        h = {"X-Remote-User": self.name}
        if self.groups:
            h["X-Remote-Group"] = ",".join(self.groups)
        return h


@dataclass
class Stack:
    base: str
    sim: KubeSim
    settings: Settings
    users: dict[str, User]

    def api_rows(self, user: User, **params: str) -> list[dict[str, Any]]:
        """Every row `user` sees under `params`, walked through the API's pages directly."""
        rows: list[dict[str, Any]] = []
        token = ""
        while True:
            query = {**params, "limit": "500", **({"continue": token} if token else {})}
            resp = requests.get(
                self.base + "/api/v1/objects", params=query, headers=user.headers(), timeout=10
            )
            resp.raise_for_status()
            body = resp.json()
            rows += body["items"]
            token = body["continue"]
            if not token:
                return rows


def who(stack: Stack, name: str) -> list[str]:
    """The flags that point the CLI at the stack as the fleet's user `name`."""
    return ["--server", stack.base, *stack.users[name].flags()]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def clean_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI child: no FLEETSCOPE_* of ours, an empty HOME, this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), **(extra or {}))
    return env


def run(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    """`python -m fleetscope ARGS` with only the environment given (plus PATH, HOME)."""
    done = subprocess.run(
        [sys.executable, "-m", "fleetscope", *args],
        capture_output=True,
        text=True,
        env=clean_env(home, env),
        timeout=timeout,
        cwd=REPO,
    )
    return Result(done.returncode, done.stdout, done.stderr)


AS_IN_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'fleetscope'; runpy.run_module('fleetscope', run_name='__main__')"
)
"""`python -m fleetscope ARGS` with Ctrl-C (SIGINT) raising KeyboardInterrupt, as in a terminal:
a process started in the background by a non-interactive shell (CI run as `.ci/run &`)
inherits SIGINT ignored, and Python then installs no handler of its own."""


class Running:
    """The CLI as a process whose output lines are read with a deadline."""

    def __init__(self, home: Path, *args: str) -> None:
        env = clean_env(home, {"PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", AS_IN_A_TERMINAL, *args],
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
            self.proc.wait(20)
            err = self.proc.stderr.read() if self.proc.stderr is not None else ""
            pytest.fail(f"no output in 20 s after {self.seen[-5:]}; stderr: {err[-6000:]}")
        self.seen.append(line)
        return line

    def interrupt(self) -> int:
        """Ctrl-C, then the exit status; a process still running after 20 s is killed (and the
        test fails on its status) so that no process or pipe outlives the test."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(20)
        finally:
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
        return code
