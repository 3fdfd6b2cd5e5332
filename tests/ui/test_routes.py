"""The web view's server side without a browser: the page shells, their security headers and
embedded configuration, static assets, the demo user list (only in demo mode) and how it is
found, and kind URL templates from the kinds file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from common.settings import Settings
from query.app import create_app
from query.ui import CSP, demo_users, demo_users_path
from tests.support.paths import REPO

USERS = {
    "seed": 1,
    "users": [
        {"name": "admin-0", "groups": ["fleet-admins"], "description": "admin", "access": {}},
        {"name": "solo", "groups": [], "description": "one namespace", "access": {}},
    ],
}


def page_config(html: str) -> dict:
    found = re.search(r'<script id="fs-config" type="application/json">(.*?)</script>', html)
    assert found, "the page embeds its configuration"
    return json.loads(found.group(1))


def oidc(redis_url: str, **kw: object) -> Settings:
    return Settings(
        redis_url=redis_url,
        oidc_issuer_url="https://issuer.example",
        oidc_client_id="fleetscope",
        **kw,  # type: ignore[arg-type]
    )


def client(settings: Settings):
    return create_app(settings).test_client()


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    path = tmp_path / "kubesim-users.json"
    path.write_text(json.dumps(USERS))
    return path


def test_list_page_is_a_shell_with_security_headers(redis_url: str) -> None:
    resp = client(oidc(redis_url)).get("/")
    assert resp.status_code == 200
    assert resp.mimetype == "text/html"
    assert resp.headers["Content-Security-Policy"] == CSP
    assert resp.headers["Referrer-Policy"] == "no-referrer"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    html = resp.get_data(as_text=True)
    assert '<script type="module" src="/ui/list.js">' in html
    assert 'id="demo-user"' not in html  # no switcher outside demo mode
    cfg = page_config(html)
    assert cfg["demoUsers"] is None
    assert cfg["authMode"] == "oidc"
    assert cfg["statuses"] == ["healthy", "unhealthy", "progressing", "unknown"]
    assert "Kustomization" in cfg["kinds"]
    assert (cfg["defaultLimit"], cfg["maxLimit"]) == (50, 500)


def test_demo_users_not_served_outside_demo_mode(redis_url: str, users_file: Path) -> None:
    settings = oidc(redis_url, ui_demo_users_file=str(users_file))
    for path in ("/", "/status"):
        html = client(settings).get(path).get_data(as_text=True)
        assert "admin-0" not in html and "demo-user" not in html


def test_demo_mode_lists_users_without_their_access(redis_url: str, users_file: Path) -> None:
    settings = oidc(redis_url, ui_demo_mode=True, ui_demo_users_file=str(users_file))
    html = client(settings).get("/").get_data(as_text=True)
    assert '<select id="demo-user">' in html
    cfg = page_config(html)
    assert cfg["demoUsers"] == [
        {"name": "admin-0", "groups": ["fleet-admins"], "description": "admin"},
        {"name": "solo", "groups": [], "description": "one namespace"},
    ]
    assert (cfg["userHeader"], cfg["groupHeader"]) == ("X-Remote-User", "X-Remote-Group")


def test_demo_users_file_defaults_next_to_the_clusters_dir(tmp_path: Path, users_file: Path):
    settings = Settings(clusters_dir=str(tmp_path / "clusters"), ui_demo_mode=True)
    assert demo_users_path(settings) == users_file
    assert [u["name"] for u in demo_users(settings)] == ["admin-0", "solo"]
    assert demo_users_path(Settings()) is None  # nothing to look for
    assert demo_users(Settings(ui_demo_users_file=str(tmp_path / "missing.json"))) == []
    users_file.write_text("{not json")
    assert demo_users(settings) == []


def test_status_page_and_assets(redis_url: str) -> None:
    c = client(oidc(redis_url))
    html = c.get("/status").get_data(as_text=True)
    assert '<script type="module" src="/ui/status.js">' in html
    assert 'aria-current="page">Status' in html.replace("\n", "").replace("  ", "")
    for name, mimetype in [
        ("list.js", "text/javascript"),
        ("api.js", "text/javascript"),
        ("ui.css", "text/css"),
    ]:
        resp = c.get(f"/ui/{name}")
        assert resp.status_code == 200, name
        assert resp.mimetype == mimetype
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        resp.close()
    assert c.get("/ui/missing.js").status_code == 404


def test_assets_load_nothing_from_elsewhere() -> None:
    root = REPO / "query"
    for path in [*(root / "static").iterdir(), *(root / "templates" / "ui").iterdir()]:
        text = path.read_text()
        assert not re.search(r"(src|href)=\"https?:", text), path
        assert "//cdn" not in text and 'import("http' not in text, path


def test_kind_url_templates_come_from_the_kinds_file(redis_url: str, tmp_path: Path) -> None:
    kinds = tmp_path / "kinds.yaml"
    kinds.write_text(
        "- group: example.io\n"
        "  versions: [v1]\n"
        "  kind: Widget\n"
        "  plural: widgets\n"
        '  ui_url_template: "https://argo.example/{cluster}/{namespace}/{name}"\n'
    )
    settings = oidc(redis_url, kinds_file=str(kinds))
    cfg = page_config(client(settings).get("/").get_data(as_text=True))
    assert cfg["uiUrlTemplates"] == {"Widget": "https://argo.example/{cluster}/{namespace}/{name}"}
    assert cfg["kinds"][-1] == "Widget"


def test_alerts_page_and_the_header_count(redis_url: str) -> None:
    """Every page's header links to /alerts with a count its header.js fills from the API."""
    c = client(oidc(redis_url))
    for path in ("/", "/status", "/alerts"):
        html = c.get(path).get_data(as_text=True)
        assert '<script type="module" src="/ui/header.js">' in html, path
        assert 'href="/alerts" id="alerts-nav"' in html and 'id="alerts-count"' in html, path
    html = c.get("/alerts").get_data(as_text=True)
    assert '<script type="module" src="/ui/alerts.js">' in html
    for name in ("header.js", "alerts.js"):
        resp = c.get(f"/ui/{name}")
        assert resp.status_code == 200 and resp.mimetype == "text/javascript", name
        resp.close()
