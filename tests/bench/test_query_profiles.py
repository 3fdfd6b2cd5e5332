"""bench.query's group walk profile: its continue token is taken right before it is measured.

A token taken once at the start of a run is as old as the run when the third-page profile
comes; under writes every page after the first looks up and skips the groups that transitioned
since the walk began, so its cost grew with the profiles measured before it (0.02x one-GET under
the storm model at L, 934 Redis commands a request) instead of measuring a user's next page."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import query


class _Groups(BaseHTTPRequestHandler):
    """`/api/v1/groups`: each answer's continue token is new (the walk it belongs to began at
    that answer's first page), and every request is recorded."""

    asked: list[tuple[str, str, str]] = []
    walks = 0

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        cont = params.get("continue", [""])[0]
        _Groups.asked.append((url.path, cont, self.headers.get("X-Remote-User", "")))
        if not cont:
            _Groups.walks += 1
            token = f"walk{_Groups.walks}-page1"
        else:
            walk, page = cont.split("-page")
            token = f"{walk}-page{int(page) + 1}"
        body = json.dumps({"items": [], "continue": token}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base() -> Iterator[str]:
    _Groups.asked, _Groups.walks = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Groups)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _third(profiles: list[query.Profile]) -> query.Profile:
    return next(p for p in profiles if p.name == "groups by object, third page (admin)")


def test_the_third_page_is_walked_to_again_before_each_measurement(base: str) -> None:
    token = query.groups_token(base)
    assert token == "walk1-page2"
    third = _third(query.profiles("deep", groups_token=token))
    first = third.renewed(base)
    second = third.renewed(base)
    # each measurement walks two pages of a new walk as the admin, and asks the third of it
    assert first.query == "limit=50&continue=walk2-page2"
    assert second.query == "limit=50&continue=walk3-page2"
    assert first.name == third.name and first.path == query.GROUPS
    walked = [a for a in _Groups.asked if a[0] == query.GROUPS]
    assert len(walked) == 6 and {a[2] for a in walked} == {query.ADMIN[0]}


def test_profiles_without_a_walk_are_measured_as_given(base: str) -> None:
    for p in query.profiles("deep", groups_token="t"):
        if p.walk:
            continue
        assert p.renewed(base) is p
    assert _Groups.asked == []
