"""A real Alertmanager (Debian's `prometheus-alertmanager`) for the alert tests: one process on
a free loopback port with its own storage directory and clustering off; `restart()` stops it
and starts a fresh one on the same port (Alertmanager keeps no alerts across a restart: only
what fleetscope re-sends comes back)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.redis_server import free_port
from tests.support.waiting import wait_for

BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
CONFIG = """
route:
  receiver: blackhole
  group_wait: 1h
receivers:
  - name: blackhole
"""


class Alertmanager:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fleetscope-am-"))
        (self.dir / "am.yml").write_text(CONFIG)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Alertmanager:
        assert BINARY, "prometheus-alertmanager is not installed (.ci/run installs it)"
        storage = self.dir / f"data-{time.monotonic_ns()}"
        with (self.dir / "am.log").open("ab") as log:  # the child keeps its own descriptor
            self.proc = self._spawn(storage, log)
        self._wait_ready()
        return self

    def _spawn(self, storage: Path, log: Any) -> subprocess.Popen[bytes]:
        assert BINARY is not None
        return subprocess.Popen(
            [
                BINARY,
                f"--config.file={self.dir / 'am.yml'}",
                f"--storage.path={storage}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            stdout=log,
            stderr=log,
        )

    def _wait_ready(self) -> None:
        def ready() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log()
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).read()
            except OSError:
                return False
            return True

        wait_for(ready, 30, lambda: f"Alertmanager to get ready: {self.log()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def clear(self) -> None:
        """Forget every alert (a restart: the API has no delete)."""
        self.restart()

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts (`GET /api/v2/alerts`; resolved ones are not listed)."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as resp:
            out: list[dict[str, Any]] = json.loads(resp.read())
            return out

    def log(self) -> str:
        path = self.dir / "am.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def alertmanager_server() -> Iterator[Alertmanager]:
    """The session's Alertmanager (registered for every test by tests/conftest.py)."""
    if BINARY is None:  # the house rule for missing tools: skip and say so (.ci/run has it)
        pytest.skip("prometheus-alertmanager is not installed (apt: prometheus-alertmanager)")
    am = Alertmanager().start()
    yield am
    am.close()


@pytest.fixture
def alertmanager(alertmanager_server: Alertmanager) -> Alertmanager:
    """The session's Alertmanager with no alerts."""
    if alertmanager_server.alerts():
        alertmanager_server.clear()
    return alertmanager_server
