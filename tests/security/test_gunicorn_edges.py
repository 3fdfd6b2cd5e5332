"""Through a real gunicorn started as `fleetscope serve` does, on a kubesim fleet: an
over-long URL is a 414 and too many or too large headers a 431, each as the API's JSON error
(not gunicorn's HTML page); repeated X-Remote-Group headers are separate groups while one
header's commas stay in its group, and so they reach the leaf (kubesim's request log); a
foreign Host is refused there too."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from kubesim.server import KubeSim
from query.cli import command, listening_port
from tests.security.conftest import Answer, Headers, request

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gunicorn(collected: KubeSim, settings, tmp_path: Path) -> Iterator[str]:
    log = tmp_path / "gunicorn.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    env.update(
        FLEETSCOPE_REDIS_URL=settings.redis_url,
        FLEETSCOPE_CLUSTERS_DIR=settings.clusters_dir,
        FLEETSCOPE_AUTH_MODE="header",
        FLEETSCOPE_TRUSTED_PROXY_CIDRS="127.0.0.1/32",
        FLEETSCOPE_QUERY_WORKERS="1",
        FLEETSCOPE_QUERY_THREADS="2",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with log.open("wb") as err:
        proc = subprocess.Popen(
            command("127.0.0.1:0"), env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + 30
    while True:
        port = listening_port(log.read_text(errors="replace"))
        try:
            if port and requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).ok:
                break
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"gunicorn did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)  # polling for readiness, not fixing a race
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)


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
