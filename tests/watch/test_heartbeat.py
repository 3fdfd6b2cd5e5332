"""`fleetscope watch --heartbeat-file`: the file is touched after every round of leases, also
while Redis is unreachable (it says the loop turns, the container's liveness, not that the
fleet is well), and an unwritable path stops the start with a configuration error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import wait_for


def _watch(tmp_path: Path, redis_url: str, heartbeat: Path) -> subprocess.Popen[bytes]:
    (tmp_path / "clusters").mkdir(exist_ok=True)
    env = dict(
        os.environ,
        FLEETSCOPE_REDIS_URL=redis_url,
        FLEETSCOPE_CLUSTERS_DIR=str(tmp_path / "clusters"),
        FLEETSCOPE_WATCH_LEASE_TTL_S="1",  # a round every 0.25 s
        FLEETSCOPE_WATCH_METRICS_PORT="0",
    )
    cmd = [sys.executable, "-m", "fleetscope", "watch", "--heartbeat-file", str(heartbeat)]
    with open(tmp_path / "watch.log", "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("reachable", [True, False], ids=["redis-up", "redis-down"])
def test_heartbeat_is_touched_every_round(tmp_path: Path, redis_url: str, reachable: bool) -> None:
    heartbeat = tmp_path / "alive"
    url = redis_url if reachable else f"redis://127.0.0.1:{_closed_port()}/0"
    proc = _watch(tmp_path, url, heartbeat)
    try:
        wait_for(heartbeat.exists, 30, "the first heartbeat")
        first = heartbeat.stat().st_mtime_ns
        wait_for(lambda: heartbeat.stat().st_mtime_ns > first, 10, "a later heartbeat")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_unwritable_heartbeat_path_is_a_configuration_error(tmp_path: Path, redis_url: str) -> None:
    proc = _watch(tmp_path, redis_url, tmp_path / "missing-dir" / "alive")
    assert proc.wait(30) == 2
    assert b"configuration error: --heartbeat-file" in (tmp_path / "watch.log").read_bytes()
