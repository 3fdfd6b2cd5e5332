"""`header` mode as kube-apiserver's request-header authenticator reads it: each X-Remote-Group
value is one group, commas included (`cn=devs,system:masters` is one group, not a way into
`system:masters`), repeated headers are separate groups, and FLEETSCOPE_HEADER_GROUP_SEPARATOR
opts in to splitting. Header bytes are read as UTF-8, and a name that could not reach the leaf
unchanged is a 401 JSON answer. What the leaf receives is read from kubesim's request log.
Repeated headers need the real gunicorn (WSGI joins them): tests/security/test_gunicorn_edges.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim.server import KubeSim
from tests.support.fakeapi import FakeApi
from tests.support.http import Headers, make_app, request, serve
from tests.support.small_fleet import leaf_requests

ACCESS = "/api/v1/access"


def detail_path(sim: KubeSim) -> str:
    meta = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    return f"/api/v1/objects/cluster-000/{meta['namespace']}/Kustomization/{meta['name']}"


def identity(host: str, headers: Headers) -> tuple[str, list[str]]:
    answer = request(host, ACCESS, headers)
    assert answer.status == 200, answer.body
    return answer.body["user"]["name"], answer.body["user"]["groups"]


def test_a_comma_is_part_of_the_group_name(collected: KubeSim, host: str) -> None:
    h: Headers = [("X-Remote-User", "mallory"), ("X-Remote-Group", "cn=devs,system:masters")]
    name, groups = identity(host, h)
    assert (name, groups) == ("mallory", ["cn=devs,system:masters", "system:authenticated"])

    # Nothing grants that group: no cluster is visible, and no request reaches a leaf.
    answer = request(host, detail_path(collected), h)
    assert answer.status == 404
    assert leaf_requests(collected) == 0


@pytest.fixture
def splitting(collected: KubeSim, settings) -> Iterator[str]:
    with serve(make_app(settings.replace(header_group_separator=","))) as h:
        yield h


def test_the_separator_setting_splits_joined_groups(splitting: str) -> None:
    h: Headers = [("X-Remote-User", "dana"), ("X-Remote-Group", "cn=devs, sre")]
    assert identity(splitting, h) == ("dana", ["cn=devs", "sre", "system:authenticated"])


def test_utf8_names_reach_the_leaf_unchanged(collected: KubeSim, host: str) -> None:
    h: Headers = [("X-Remote-User", "josé".encode()), ("X-Remote-Group", "fleet-admins")]
    assert identity(host, h) == ("josé", ["fleet-admins", "system:authenticated"])
    assert request(host, detail_path(collected), h).status == 200
    [rec] = collected.request_log("cluster-000")
    assert rec.impersonate_user == "josé"


@pytest.mark.parametrize(
    "headers",
    [
        [("X-Remote-User", "ユーザー".encode())],  # beyond Latin-1
        [("X-Remote-User", b"jos\xe9")],  # not UTF-8: a Go server would see other bytes
        [("X-Remote-User", "mallory\x1b[2K")],
        [("X-Remote-User", "mallory\x7f")],
        [("X-Remote-User", "mallory\u0085".encode())],  # C1 control (NEL), as UTF-8
        [("X-Remote-User", "mallory"), ("X-Remote-Group", "devs\x00")],
        [("X-Remote-User", "mallory"), ("X-Remote-Group", "開発".encode())],
    ],
)
def test_identities_that_are_not_header_safe_are_401(
    collected: KubeSim, host: str, headers: Headers
) -> None:
    h = headers if len(headers) > 1 else [*headers, ("X-Remote-Group", "fleet-admins")]
    for target in (ACCESS, detail_path(collected)):
        answer = request(host, target, h)
        assert answer.status == 401, answer.body
        assert answer.body["error"] == "unauthenticated" and answer.body["message"]
    assert leaf_requests(collected) == 0


def test_the_cli_sends_each_group_as_its_own_field(cli) -> None:
    """`--as-group` twice is two X-Remote-Group fields (a comma stays inside its group), so
    the header mode above reads the groups the user gave."""
    status = {"state": "ready", "collected": 0, "total": 0, "clusters": []}
    api = FakeApi({"/api/v1/status": (200, status)})
    try:
        res = cli(
            "status",
            "--server",
            api.url,
            "--as",
            "dana",
            "--as-group",
            "cn=devs,ou=x",
            "--as-group",
            "sre",
        )
        assert res.code == 0, res.err
        [fields] = api.fields
    finally:
        api.close()
    groups = [v for k, v in fields if k.lower() == "x-remote-group"]
    assert groups == ["cn=devs,ou=x", "sre"]
    assert [v for k, v in fields if k.lower() == "x-remote-user"] == ["dana"]
