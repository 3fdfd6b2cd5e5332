"""The stream process behind a real gunicorn (`fleetscope serve`'s command): a watch answered on
a request thread is served by the stream process (the client's connection is held by it and by
no worker) and delivers an event after a write; killing it closes every stream, the master
starts it again and a client resuming with `Last-Event-ID` gets every change once; a stream
process that does not answer makes a watch a JSON 503, never a hang; with one request thread,
lists are answered while streams are open; STATUS comes first and again when the fleet changes;
the Flask test client (no socket to hand over) is served by the in-thread hub; `fleetscope get
-w` goes on through a killed stream process (it retries the 503s) with every change once."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.index import keys
from common.settings import Settings
from query.app import create_app
from tests.support import topology
from tests.support.cli import Running
from tests.support.gunicorn import watch_master
from tests.support.http import raw_get as get
from tests.support.sse import Stream
from tests.support.stream_process import client_port, holders, stream_process
from tests.support.team_cluster import change, seed

ADMIN = {"X-Remote-User": "root", "X-Remote-Group": "admins"}


@pytest.fixture
def served(r: Any, redis_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    threads = getattr(request, "param", 2)
    with watch_master(redis_url, tmp_path / "gunicorn.log", threads=threads) as served:
        yield served


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    seed(client)
    yield client
    client.close()


def test_a_stream_is_served_by_the_stream_process(r: Any, served: Any) -> None:
    proc, host = served
    streams = stream_process(proc.pid)
    _, page = get(host, "/api/v1/objects", ADMIN)
    stream = Stream(host, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    assert stream.status == 200
    change(r, "team-a", "written")
    assert stream.rows(1)[0][2]["object"]["name"] == "written"
    # the connection is the stream process's alone: no worker (nor the master) holds it
    assert holders(int(host.split(":")[1]), client_port(stream)) == {streams}
    stream.close()


def test_killed_stream_process_closes_streams_and_comes_back_without_a_gap(
    r: Any, served: Any
) -> None:
    proc, host = served
    first = stream_process(proc.pid)
    _, page = get(host, "/api/v1/objects", ADMIN)
    streams = [
        Stream(host, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
        for _ in range(3)
    ]
    change(r, "team-a", "before")
    last = [s.rows(1)[0] for s in streams]
    assert {data["object"]["name"] for _, _, data in last} == {"before"}
    os.kill(first, signal.SIGKILL)
    for s in streams:
        with pytest.raises(EOFError):  # the client sees its connection close
            while True:
                s.next()
        s.close()
    names = [f"during-{i}" for i in range(5)]
    for n in names:
        change(r, "team-a", n)
    assert stream_process(proc.pid, not_pid=first) != first  # the master started another
    again = resumed(host, last[0][1] or "")
    change(r, "team-a", "after")
    got = [data["object"]["name"] for _, _, data in again.rows(len(names) + 1)]
    assert got == [*names, "after"]  # each once, in order: no gap, no duplicate
    again.close()


def resumed(host: str, last_id: str, wait_s: float = 30.0) -> Stream:
    """A stream resumed from `last_id`, retried while the stream process restarts (503)."""
    deadline = time.monotonic() + wait_s
    while True:
        s = Stream(host, "/api/v1/watch", {**ADMIN, "Last-Event-ID": last_id})
        if s.status == 200:
            return s
        assert s.status == 503, s.status
        assert s.resp.read() and s.headers["Content-Type"] == "application/json"
        s.close()
        assert time.monotonic() < deadline, "the stream process did not come back"
        time.sleep(0.1)  # a client's retry pause, not fixing a race


def test_a_stream_process_that_does_not_answer_is_a_json_503(r: Any, served: Any) -> None:
    proc, host = served
    streams = stream_process(proc.pid)
    os.kill(streams, signal.SIGSTOP)  # alive (not restarted) but answering nothing
    try:
        status, body = get(host, "/api/v1/watch", ADMIN)
    finally:
        os.kill(streams, signal.SIGCONT)
    assert status == 503 and body["error"] == "unavailable", body
    assert "stream" in body["message"]
    status, page = get(host, "/api/v1/objects", ADMIN)  # the request thread was let go
    assert status == 200 and len(page["items"]) == 2


@pytest.mark.parametrize("served", [1], indirect=True)
def test_with_one_request_thread_lists_are_answered_while_streams_are_open(
    r: Any, served: Any
) -> None:
    _, host = served
    _, page = get(host, "/api/v1/objects", ADMIN)
    streams = [
        Stream(host, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
        for _ in range(5)
    ]
    assert [s.status for s in streams] == [200] * 5
    for _ in range(3):
        status, listed = get(host, "/api/v1/objects", ADMIN)
        assert status == 200 and len(listed["items"]) == 2
    change(r, "team-b", "new")
    for s in streams:
        assert s.rows(1)[0][2]["object"]["name"] == "new"
        s.close()


def test_without_a_stream_process_the_in_thread_hub_serves(r: Any, redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    client = create_app(settings).test_client()  # no gunicorn worker: no socket to hand over
    rv = client.get("/api/v1/objects", headers=ADMIN).get_json()["resourceVersion"]
    resp = client.get(f"/api/v1/watch?resourceVersion={rv}", headers=ADMIN, buffered=False)
    assert resp.status_code == 200 and resp.mimetype == "text/event-stream"
    change(r, "team-a", "in-thread")
    deadline = time.monotonic() + 15
    try:
        for chunk in resp.response:  # a keepalive every 5 s at the latest
            if b'"name":"in-thread"' in chunk:
                break
            assert time.monotonic() < deadline, "no event in 15 s"
    finally:
        resp.close()


def test_status_on_open_and_when_the_fleet_changes(r: Any, served: Any) -> None:
    _, host = served
    _, page = get(host, "/api/v1/objects", ADMIN)
    stream = Stream(host, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    kind, _, status = stream.rows(1, skip=("BOOKMARK",))[0]
    assert kind == "STATUS" and status["object"]["total"] == 1
    assert status["object"]["state"] == "ready"
    r.hset(keys.CLUSTERS, "c2", json.dumps({"source": "dir"}))  # registered, not collected yet
    kind, _, status = stream.rows(1, skip=("BOOKMARK",))[0]
    assert kind == "STATUS" and status["object"]["total"] == 2
    assert status["object"]["state"] == "rebuilding"
    stream.close()


def test_get_w_survives_a_killed_stream_process(r: Any, served: Any, tmp_path: Path) -> None:
    proc, host = served
    first = stream_process(proc.pid)
    (tmp_path / "home").mkdir()
    args = ["get", "-w", "-o", "name", "--server", f"http://{host}"]
    run = Running(tmp_path / "home", *args, "--as", "root", "--as-group", "admins")
    try:
        assert [run.line().rsplit("/", 1)[1] for _ in range(2)] == ["app", "app"]  # the list
        change(r, "team-a", "before")
        assert run.line().endswith("/before")
        os.kill(first, signal.SIGKILL)  # the CLI sees its stream close, reconnects (503s)
        for n in ("during-1", "during-2"):
            change(r, "team-a", n)
        stream_process(proc.pid, not_pid=first)
        change(r, "team-a", "after")
        assert [run.line().rsplit("/", 1)[1] for _ in range(3)] == ["during-1", "during-2", "after"]
    finally:
        assert run.interrupt() == 0
