"""bench.query's group walk profile: its continue token is taken right before it is measured.

A token taken once at the start of a run is as old as the run when the third-page profile
comes; under writes every page after the first looks up and skips the groups that transitioned
since the walk began, so its cost grew with the profiles measured before it (0.02x one-GET under
the storm model at L, 934 Redis commands a request) instead of measuring a user's next page."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from bench import query
from tests.support.http import serve


class _Groups:
    """A WSGI app answering `/api/v1/groups`: each answer's continue token is new (the walk it
    belongs to began at that answer's first page), and every request is recorded."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.walks = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        params = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
        cont = params.get("continue", [""])[0]
        self.asked.append((environ["PATH_INFO"], cont, environ.get("HTTP_X_REMOTE_USER", "")))
        if not cont:
            self.walks += 1
            token = f"walk{self.walks}-page1"
        else:
            walk, page = cont.split("-page")
            token = f"{walk}-page{int(page) + 1}"
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"items": [], "continue": token}).encode()]


@pytest.fixture
def groups() -> _Groups:
    return _Groups()


@pytest.fixture
def base(groups: _Groups) -> Iterator[str]:
    with serve(groups) as host:
        yield f"http://{host}"


def _third(profiles: list[query.Profile]) -> query.Profile:
    return next(p for p in profiles if p.name == "groups by object, third page (admin)")


def test_the_third_page_is_walked_to_again_before_each_measurement(
    base: str, groups: _Groups
) -> None:
    token = query.groups_token(base)
    assert token == "walk1-page2"
    third = _third(query.profiles("deep", groups_token=token))
    first = third.renewed(base)
    second = third.renewed(base)
    # each measurement walks two pages of a new walk as the admin, and asks the third of it
    assert first.query == "limit=50&continue=walk2-page2"
    assert second.query == "limit=50&continue=walk3-page2"
    assert first.name == third.name and first.path == query.GROUPS
    walked = [a for a in groups.asked if a[0] == query.GROUPS]
    assert len(walked) == 6 and {a[2] for a in walked} == {query.ADMIN[0]}


def test_profiles_without_a_walk_are_measured_as_given(base: str, groups: _Groups) -> None:
    for p in query.profiles("deep", groups_token="t"):
        if p.walk:
            continue
        assert p.renewed(base) is p
    assert groups.asked == []
