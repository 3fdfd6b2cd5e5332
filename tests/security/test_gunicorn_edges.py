"""Through a real gunicorn started as `fleetscope serve` does, on a kubesim fleet: an
over-long URL is a 414 and too many or too large headers a 431, each as the API's JSON error
(not gunicorn's HTML page); repeated X-Remote-Group headers are separate groups while one
header's commas stay in its group, and so they reach the leaf (kubesim's request log); a
foreign Host is refused there too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesim.server import KubeSim
from tests.support.gunicorn import header_mode, serving
from tests.support.http import Answer, Headers, request


@pytest.fixture
def gunicorn(collected: KubeSim, settings, tmp_path: Path) -> Iterator[str]:
    more = {"clusters_dir": settings.clusters_dir}
    with serving(header_mode(settings.redis_url, **more), tmp_path / "gunicorn.log") as host:
        yield host


ADMIN: Headers = [("X-Remote-User", "admin-0"), ("X-Remote-Group", "fleet-admins")]


def json_error(answer: Answer, status: int, code: str) -> None:
    assert answer.status == status, (answer.status, answer.body)
    assert answer.headers["content-type"] == "application/json"
    assert answer.body == {"error": code, "message": answer.body["message"]}
    assert answer.body["message"]


def test_an_over_long_url_is_a_json_414(gunicorn: str) -> None:
    target = "/api/v1/objects?name=" + "a" * 9000
    json_error(request(gunicorn, target, ADMIN), 414, "uri_too_long")


def test_over_large_headers_are_a_json_431(gunicorn: str) -> None:
    json_error(
        request(gunicorn, "/api/v1/objects", [*ADMIN, ("X-Big", "b" * 9000)]),
        431,
        "request_header_fields_too_large",
    )
    many: Headers = [*ADMIN, *((f"X-Many-{i}", "x") for i in range(120))]
    json_error(request(gunicorn, "/api/v1/objects", many), 431, "request_header_fields_too_large")
    # The service still answers normally afterwards.
    assert request(gunicorn, "/api/v1/objects?limit=1", ADMIN).status == 200


def test_repeated_group_headers_are_separate_groups(collected: KubeSim, gunicorn: str) -> None:
    h: Headers = [
        ("X-Remote-User", "mallory"),
        ("X-Remote-Group", "cn=devs,system:masters"),
        ("X-Remote-Group", "fleet-admins"),
        ("X-Remote-Group", "cn=devs,system:masters"),
    ]
    answer = request(gunicorn, "/api/v1/access", h)
    assert answer.status == 200, answer.body
    assert answer.body["user"]["groups"] == [
        "cn=devs,system:masters",
        "fleet-admins",
        "system:authenticated",
    ]
    meta = collected.list("cluster-000", "Kustomization")[0]["metadata"]
    target = f"/api/v1/objects/cluster-000/{meta['namespace']}/Kustomization/{meta['name']}"
    assert request(gunicorn, target, h).status == 200
    [rec] = collected.request_log("cluster-000")
    assert rec.impersonate_user == "mallory"
    assert "system:masters" not in rec.impersonate_groups
    assert set(rec.impersonate_groups) == {
        "cn=devs,system:masters",
        "fleet-admins",
        "system:authenticated",
    }


def test_a_repeated_user_header_is_refused(gunicorn: str) -> None:
    h: Headers = [("X-Remote-User", "dana"), ("X-Remote-User", "admin-0")]
    json_error(request(gunicorn, "/api/v1/objects", h), 401, "unauthenticated")


def test_a_foreign_host_is_refused_by_the_served_app(gunicorn: str) -> None:
    answer = request(gunicorn, "/api/v1/objects", ADMIN, http_host="rebind.evil.example:8080")
    json_error(answer, 400, "invalid_host")
    assert answer.headers["cache-control"] == "no-store"
