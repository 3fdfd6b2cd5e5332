"""Through a real gunicorn (the exact `fleetscope serve` command line, 2 workers): pages walk
correctly over real HTTP, /metrics adds up the requests of every worker, and the optional
access log (text or JSON) records requests without their credentials."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.gunicorn import header_mode, serving
from tests.support.index_fleet import order
from tests.support.query_fleet import USERS, headers, oracle


@pytest.fixture
def access_log() -> str:
    return "json"


@pytest.fixture
def server(seeded, redis_url: str, tmp_path: Path, access_log: str) -> Iterator[str]:
    settings = header_mode(
        redis_url,
        query_workers="2",
        metrics_dir=str(tmp_path / "metrics"),
        access_log=access_log,
    )
    with serving(settings, tmp_path / "gunicorn.log", stdout=tmp_path / "access.log") as host:
        yield f"http://{host}"


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


SECRET = "Bearer eyJ-SECRET-access-log-token"


def _logged_requests(server: str, tmp_path: Path, wait_s: float = 10.0) -> list[str]:
    """Send a request with credentials, wait until the access log has it, return the lines."""
    requests.get(
        server + "/api/v1/objects?limit=2",
        headers={**headers(USERS["admin"]), "Authorization": SECRET, "Cookie": "s=SECRET"},
        timeout=10,
    )
    log = tmp_path / "access.log"
    deadline = time.monotonic() + wait_s
    while "/api/v1/objects" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)  # the worker flushes its line after answering
    return [line for line in log.read_text().splitlines() if "/api/v1/objects" in line]


def test_json_access_log_has_requests_not_credentials(server: str, tmp_path: Path) -> None:
    [line] = _logged_requests(server, tmp_path)
    record = json.loads(line)
    assert record["method"] == "GET" and record["path"] == "/api/v1/objects"
    assert record["query"] == "limit=2" and record["status"] == 200
    assert record["bytes"] > 0 and record["durationMs"] >= 0 and record["remote"] == "127.0.0.1"
    assert 0 < record["cpuMs"] <= record["durationMs"]  # the request's own CPU, in the app
    assert "SECRET" not in line and "root" not in line  # no Authorization, cookie or user header


@pytest.mark.parametrize("access_log", ["text"])
def test_text_access_log_has_requests_not_credentials(server: str, tmp_path: Path) -> None:
    [line] = _logged_requests(server, tmp_path)
    assert '"GET /api/v1/objects?limit=2 HTTP/1.1" 200' in line
    assert "SECRET" not in line


@pytest.mark.parametrize("access_log", ["off"])
def test_no_access_log_by_default(server: str, tmp_path: Path) -> None:
    # A line would come within milliseconds; waiting longer can only make this pass wrongly.
    assert _logged_requests(server, tmp_path, wait_s=2.0) == []


def test_worker_freezes_its_start_up_objects_out_of_the_collector() -> None:
    import gc

    from query import gunicorn_conf

    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        gunicorn_conf.post_worker_init(None)
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()


def test_the_memo_gauge_comes_from_the_workers_sweeps(
    seeded, redis_url: str, tmp_path: Path
) -> None:
    """`fleetscope_query_memo_bytes` is set by each worker's idle sweep and, in gunicorn's
    multiprocess mode, answered once (the largest live worker's), not once per worker."""
    settings = header_mode(
        redis_url,
        query_workers="2",
        metrics_dir=str(tmp_path / "metrics"),
        query_memo_mib="64",
        query_memo_idle_s="0.4",  # a sweep every 0.2 s
    )
    with serving(settings, tmp_path / "gunicorn.log") as host:
        h = headers(USERS["team"])
        for _ in range(4):  # memos filled in whichever worker answers
            requests.get(f"http://{host}/api/v1/facets", headers=h, timeout=10).raise_for_status()
        deadline = time.monotonic() + 20
        found: list[str] = []
        while not found and time.monotonic() < deadline:
            text = requests.get(f"http://{host}/metrics", timeout=10).text
            found = re.findall(r"^fleetscope_query_memo_bytes(\{[^}]*\})? (\S+)$", text, re.M)
            time.sleep(0.1)  # polling the workers' next sweep
    assert len(found) == 1, found
    assert float(found[0][1]) >= 0


def test_a_worker_sharing_the_metrics_directory_keeps_its_files(
    seeded, redis_url: str, tmp_path: Path
) -> None:
    """On one host a Celery worker and the query service may share FLEETSCOPE_METRICS_DIR:
    gunicorn empties only its own directory at start. Until 2026-11-28 it emptied the shared
    one, and a worker child started after that failed every sync (its metrics' files could
    not be created: the soak's worker-child kill)."""
    shared = tmp_path / "metrics"
    worker = shared / "fleetscope-collector-4242"
    worker.mkdir(parents=True)
    (worker / "counter_4243.db").write_bytes(b"kept")
    settings = header_mode(redis_url, query_workers="1", metrics_dir=str(shared))
    with serving(settings, tmp_path / "gunicorn.log") as host:
        base = f"http://{host}"
        assert requests.get(
            base + "/api/v1/objects?limit=1", headers=headers(USERS["admin"]), timeout=10
        ).ok
        text = requests.get(base + "/metrics", timeout=10).text
    assert (worker / "counter_4243.db").read_bytes() == b"kept"
    [own] = [p for p in shared.iterdir() if p.name.startswith("fleetscope-query-")]
    assert any(own.glob("*.db"))  # the query's workers write there, and /metrics reads it
    assert 'route="/api/v1/objects"' in text
