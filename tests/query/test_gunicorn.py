"""Through a real gunicorn (the exact `fleetscope serve` command line, 2 workers): pages walk
correctly over real HTTP, and /metrics adds up the requests of every worker."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from query.cli import command, listening_port
from tests.query.conftest import USERS, headers, oracle
from tests.query.fleet import order


@pytest.fixture
def server(seeded, redis_url: str, tmp_path: Path) -> Iterator[str]:
    log = tmp_path / "gunicorn.log"
    env = {
        **os.environ,
        "FLEETSCOPE_REDIS_URL": redis_url,
        "FLEETSCOPE_AUTH_MODE": "header",
        "FLEETSCOPE_TRUSTED_PROXY_CIDRS": "127.0.0.1/32",
        "FLEETSCOPE_QUERY_WORKERS": "2",
        "FLEETSCOPE_QUERY_THREADS": "2",
        "FLEETSCOPE_METRICS_DIR": str(tmp_path / "metrics"),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with log.open("wb") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            command("127.0.0.1:0"),  # the OS picks the port; gunicorn logs it
            env=env,
            cwd=Path(__file__).parents[2],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = ""
    deadline = time.monotonic() + 30
    while True:
        port = listening_port(log.read_text(errors="replace"))
        url = f"http://127.0.0.1:{port}"
        try:
            if port and requests.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"gunicorn did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)  # polling for readiness, not fixing a race
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


def test_pages_and_metrics_through_gunicorn(server: str, seeded) -> None:
    h = headers(USERS["team"])
    got, token, calls = [], None, 0
    with requests.Session() as s:
        while True:
            q = {"limit": 4, **({"continue": token} if token else {})}
            body = s.get(server + "/api/v1/objects", params=q, headers=h, timeout=10).json()
            calls += 1
            got += body["items"]
            token = body["continue"]
            if not token:
                break
    expected = sorted(oracle(seeded.rows, USERS["team"]), key=order)
    assert [order(r) for r in got] == [order(r) for r in expected]
    assert calls > 2
    text = requests.get(server + "/metrics", timeout=10).text
    m = re.search(
        r'fleetscope_query_request_duration_seconds_count\{route="/api/v1/objects",'
        r'status="200"\} (\S+)',
        text,
    )
    assert m and float(m.group(1)) == calls
