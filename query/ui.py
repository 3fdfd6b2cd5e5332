"""The web view: `GET /` (the object list), `GET /status` (fleet status), `GET /alerts` (firing
alerts; every page's header counts them), assets under `/ui/`.

Pages are small server-rendered shells; their JavaScript reads everything from the public API
(`/api/v1/...`) with the caller's own identity, so the view shows exactly what the API would.
The demo user switcher, and the list of demo users behind it, exist only in `ui_demo_mode`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, Response, render_template

from common.kinds.status import STATUSES
from common.settings import Settings
from query.params import DEFAULT_LIMIT, MAX_LIMIT
from query.state import state

log = logging.getLogger(__name__)

bp = Blueprint(
    "ui", __name__, static_folder="static", static_url_path="/ui", template_folder="templates"
)

USERS_FILE_NAME = "kubesim-users.json"
MAX_DEMO_USERS = 200
# Nothing but this origin: no inline script, no CDN, no framing; API calls to self only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def register(app: Flask) -> None:
    """Mount the web view (called by query.app.register_blueprints)."""
    app.register_blueprint(bp)


@bp.get("/")
def list_page() -> str:
    return render_template("ui/list.html", page="list", **_context())


@bp.get("/status")
def status_page() -> str:
    return render_template("ui/status.html", page="status", **_context())


@bp.get("/alerts")
def alerts_page() -> str:
    return render_template("ui/alerts.html", page="alerts", **_context())


@bp.after_request
def _security_headers(resp: Response) -> Response:
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    # Continue tokens and filters live in the URL: keep them from external links' servers.
    resp.headers["Referrer-Policy"] = "no-referrer"
    return resp


def _context() -> dict[str, Any]:
    config = page_config(state().settings)
    return {"config": config, "demo": config["demoUsers"] is not None}


def page_config(settings: Settings) -> dict[str, Any]:
    """What the page's JavaScript needs besides the API: no data, no secrets."""
    registry = state().registry
    return {
        "authMode": settings.auth_mode,
        "kinds": registry.keys(),
        "statuses": list(STATUSES),
        "uiUrlTemplates": {k.key: k.ui_url_template for k in registry if k.ui_url_template},
        "defaultLimit": DEFAULT_LIMIT,
        "maxLimit": MAX_LIMIT,
        "demoUsers": demo_users(settings) if settings.ui_demo_mode else None,
        "userHeader": settings.remote_user_header,
        "groupHeader": settings.remote_group_header,
        "historyDays": settings.history_days,
        "flappingThreshold": settings.flapping_threshold,
    }


def demo_users_path(settings: Settings) -> Path | None:
    if settings.ui_demo_users_file:
        return Path(settings.ui_demo_users_file)
    if settings.clusters_dir:
        return Path(settings.clusters_dir).resolve().parent / USERS_FILE_NAME
    return None


def demo_users(settings: Settings) -> list[dict[str, Any]]:
    """The switcher's users from kubesim's users file; [] (and a warning) when unreadable."""
    path = demo_users_path(settings)
    if path is None:
        return []
    try:
        doc = json.loads(path.read_text())
        users = doc["users"] if isinstance(doc, dict) else doc
        return [_demo_user(u) for u in users[:MAX_DEMO_USERS]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.warning("demo users file %s unreadable: %s", path, e)
        return []


def _demo_user(u: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": str(u["name"]),
        "groups": [str(g) for g in u.get("groups") or ()],
        "description": str(u.get("description") or ""),
    }
