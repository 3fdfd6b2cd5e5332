"""`GET /api/v1/watch` through the real gunicorn (`fleetscope serve`'s command, its worker
class handing each stream's socket to the watch hub) on a real Redis: list then watch with no
gap and no duplicate under concurrent writes, across a disconnect (resume by `Last-Event-ID`);
a row leaving the filter is DELETED as it was; 410 Expired past the feed's retention; streams
hold no request thread (more streams than threads, lists still answered); a cluster leaving
the registry sends its rows' DELETED."""

from __future__ import annotations

import base64
import json
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from common.index import feed, history, keys, rows
from common.index.write import store, store_events
from common.rbac.grants import compile_grants, store_grants
from tests.support import topology
from tests.support.gunicorn import watch_server
from tests.support.http import raw_get as get
from tests.support.query_fleet import REG, mark_synced
from tests.support.sse import Stream
from tests.support.team_cluster import C, change, rbac, seed

TOPOLOGIES = ("standalone", "cluster")
TOPOLOGIES = ("standalone", "cluster")
ADMIN = {"X-Remote-User": "root", "X-Remote-Group": "admins"}
TEAM = {"X-Remote-User": "tina", "X-Remote-Group": "team-a"}


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    seed(client)
    yield client
    client.close()


@pytest.fixture
def server(r: Any, redis_url: str, tmp_path: Path) -> Iterator[str]:
    with watch_server(redis_url, tmp_path / "gunicorn.log") as host:
        yield host


def test_list_then_watch_then_resume_has_no_gap_and_no_duplicate(r: Any, server: str) -> None:
    status, page = get(server, "/api/v1/objects", ADMIN)
    assert status == 200 and len(page["items"]) == 2
    stream = Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    assert stream.status == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    names = [f"obj-{i:03d}" for i in range(40)]
    writer = threading.Thread(target=lambda: [change(r, "team-a", n) for n in names])
    writer.start()
    first = stream.rows(15)
    stream.close()  # a disconnect in the middle of the writes
    last_id = first[-1][1]
    again = Stream(server, "/api/v1/watch", {**ADMIN, "Last-Event-ID": last_id})
    rest = again.rows(25)
    writer.join()
    got = [data["object"]["name"] for _, _, data in first + rest]
    assert got == names  # in order, each once
    assert {kind for kind, _, _ in first + rest} == {"ADDED"}
    # nothing more than the 40 writes: the next event is a bookmark, not a repeat
    change(r, "team-a", "app", ready=False)
    kind, _, data = again.rows(1)[0]
    assert (kind, data["object"]["name"], data["object"]["status"]) == (
        "MODIFIED",
        "app",
        "unhealthy",
    )
    again.close()


def test_rows_as_the_list_shows_them_and_leaving_the_filter_is_deleted(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects?status=unhealthy", ADMIN)
    stream = Stream(
        server, f"/api/v1/watch?status=unhealthy&resourceVersion={page['resourceVersion']}", ADMIN
    )
    change(r, "team-a", "app", ready=False)
    change(r, "team-a", "app", ready=True)
    entered, left = stream.rows(2)
    assert entered[0] == "ADDED" and entered[2]["object"]["status"] == "unhealthy"
    assert left[0] == "DELETED" and left[2]["object"]["status"] == "unhealthy"  # as it was
    _, listed = get(server, "/api/v1/objects", ADMIN)
    shown = next(i for i in listed["items"] if i["namespace"] == "team-a")
    change(r, "team-a", "app", ready=False)
    ((kind, _, data),) = stream.rows(1)
    assert kind == "ADDED"
    _, listed = get(server, "/api/v1/objects", ADMIN)
    shown = next(i for i in listed["items"] if i["namespace"] == "team-a")
    assert data["object"] == shown  # the same JSON as the list's
    stream.close()


def test_a_position_past_retention_answers_410_expired(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects", ADMIN)
    short = history.Retention(feed_max=3)
    for i in range(5):
        change(r, "team-a", f"churn-{i}", retention=short)
    stream = Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    kind, _, data = stream.rows(1)[0]
    assert kind == "ERROR"
    assert data["object"]["code"] == 410 and data["object"]["reason"] == "Expired"
    with pytest.raises(EOFError):
        stream.next()  # and the stream ends: the client lists again
    # a fresh list's position is within retention again
    _, page = get(server, "/api/v1/objects", ADMIN)
    again = Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    change(r, "team-a", "after")
    assert again.rows(1)[0][2]["object"]["name"] == "after"
    again.close()


def test_streams_hold_no_request_thread(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects", ADMIN)
    streams = [
        Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
        for _ in range(8)  # four times the worker's threads
    ]
    status, listed = get(server, "/api/v1/objects", ADMIN)
    assert status == 200 and len(listed["items"]) == 2
    change(r, "team-b", "new")
    for s in streams:
        assert s.rows(1)[0][2]["object"]["name"] == "new"
        s.close()


def test_bad_input_is_a_json_400(server: str) -> None:
    for path in ("/api/v1/watch?resourceVersion=forged.token", "/api/v1/watch?bogus=1"):
        status, body = get(server, path, ADMIN)
        assert status == 400 and body["error"] == "invalid_parameter", body


def test_a_cluster_leaving_the_registry_sends_its_rows_deleted(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects", ADMIN)
    stream = Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    r.hdel(keys.CLUSTERS, C)
    store.delete_cluster(r, C)
    got = stream.rows(2)
    assert {(k, d["object"]["namespace"]) for k, _, d in got} == {
        ("DELETED", "team-a"),
        ("DELETED", "team-b"),
    }
    assert feed.last(r, C).gen == int(r.get(keys.generation(C)))  # both outlive the cluster
    stream.close()


def test_a_stream_ends_at_its_timeout_and_resumes(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects", ADMIN)
    rv = page["resourceVersion"]
    change(r, "team-a", "during")  # before the stream: its catch-up comes before any timeout
    stream = Stream(server, f"/api/v1/watch?timeoutSeconds=1&resourceVersion={rv}", ADMIN)
    _, eid, data = stream.rows(1)[0]
    assert data["object"]["name"] == "during"
    with pytest.raises(EOFError):  # the server ends it (bookmarks come until then)
        while True:
            stream.next()
    change(r, "team-a", "after")  # the client comes back (authenticated again), misses nothing
    again = Stream(server, "/api/v1/watch", {**ADMIN, "Last-Event-ID": eid or ""})
    assert again.rows(1)[0][2]["object"]["name"] == "after"
    again.close()
    status, body = get(server, "/api/v1/watch?timeoutSeconds=0", ADMIN)
    assert status == 400 and body["error"] == "invalid_parameter"


def labelled(ns: str, name: str, labels: dict[str, str], ready: bool = True) -> str:
    kind = REG.get("Kustomization")
    assert kind is not None
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "R", "message": "m"}
    obj = {
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "status": {"conditions": [cond], "lastAppliedRevision": "main@sha1:1"},
    }
    return rows.member(C, kind, kind.api_version(), obj)


def test_a_label_selector_keeps_the_stream_to_matching_rows(r: Any, server: str) -> None:
    _, page = get(server, "/api/v1/objects?labelSelector=tier%3Dweb", ADMIN)
    assert page["items"] == []
    position = page["resourceVersion"]
    stream = Stream(
        server, f"/api/v1/watch?labelSelector=tier%3Dweb&resourceVersion={position}", ADMIN
    )
    db = labelled("team-a", "db", {"tier": "db"})
    web = labelled("team-a", "web", {"tier": "web"})
    store_events.apply_changes(r, C, [store_events.Change.of(db)])  # written first, not shown
    store_events.apply_changes(r, C, [store_events.Change.of(web)])
    ((kind, _, data),) = stream.rows(1)
    assert (kind, data["object"]["name"]) == ("ADDED", "web")
    assert data["object"]["labels"] == {"tier": "web"}
    moved = labelled("team-a", "web", {"tier": "db"})  # its label changes: it leaves
    store_events.apply_changes(r, C, [store_events.Change.of(moved)])
    ((kind, _, data),) = stream.rows(1)
    assert (kind, data["object"]["name"]) == ("DELETED", "web")
    stream.close()


def test_a_stream_listed_while_a_cluster_is_out_of_the_registry_is_not_expired(
    r: Any, server: str
) -> None:
    """While a cluster is gone from the registry every list lacks it: a stream from such a list
    starts at the feed's present for it (no rows are owed), not at its start, trimmed long ago,
    which answered 410 to every stream and had clients list and watch again in a loop. When
    the cluster comes back, its rows come as ADDED (once the stream process has re-read the
    caller's access: rows written before that are a new grant's, which a watch does not
    replay)."""
    _, page = get(server, "/api/v1/objects", ADMIN)
    first = Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    change(r, "team-a", "seen")  # the hub reads the cluster's feed
    assert first.rows(1)[0][2]["object"]["name"] == "seen"
    r.hdel(keys.CLUSTERS, C)
    store.delete_cluster(r, C, feed_max=1)  # the feed keeps only its last entry
    first.close()
    deadline = time.monotonic() + 15
    while True:  # until a list's position lacks the cluster (each worker's fleet view: 1 s)
        _, page = get(server, "/api/v1/objects", ADMIN)
        if C not in token_clusters(page["resourceVersion"]):
            break
        assert time.monotonic() < deadline, "the cluster stayed in the list's position"
    assert page["items"] == []
    stream = Stream(server, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    assert stream.status == 200
    r.hset(keys.CLUSTERS, C, json.dumps({"source": "dir"}))  # back, with its grants
    store_grants(r, C, compile_grants(rbac(), REG), time.time())
    mark_synced(r, C, objects=0)
    deadline, i = time.monotonic() + 15, 0
    while True:  # a row written once the stream process saw the cluster come back arrives
        change(r, "team-a", f"back-{i}")
        kind, _, data = stream.next()  # a bookmark a second at least
        if kind not in ("BOOKMARK", "STATUS"):
            break
        assert time.monotonic() < deadline, "no row of the cluster back in the registry"
        i += 1
    assert kind == "ADDED" and data["object"]["name"].startswith("back-"), (kind, data)
    stream.close()


def token_clusters(token: str) -> set[str]:
    """The clusters a position token holds (read, not verified: query.positions' format)."""
    text = token.split(".")[0]
    raw = zlib.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    return {c for c, *_ in orjson.loads(raw)["p"]}
