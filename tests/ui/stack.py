"""The web view tests' stack (kubesim, one collection into the session's real Redis, the query
app on a real HTTP server in demo mode), the browser they drive, and what they share: the
admin's headers, the rows of the list, the demo user switcher, the API's groups and
screenshots under artifacts/ui/."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import requests

from collector.clusters import ClusterSource
from collector.jobs import ClusterOutcome, Collector, collect_once
from common.kinds.registry import builtin_registry
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.paths import REPO

ARTIFACTS = REPO / "artifacts" / "ui"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RBAC = "rbac.authorization.k8s.io/v1"
EXTERNAL_URL = "https://flux.example/ui/podinfo"
LISTER = "lister"  # may list Kustomizations in one namespace, but not get them


def chromium_path() -> str | None:
    found = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium")
    return found if found and Path(found).exists() else None


@dataclass
class Stack:
    base: str
    sim: KubeSim
    r: redis.Redis
    settings: Settings
    unhealthy: list[tuple[str, str, str]]  # (cluster, namespace, name) of Kustomizations
    lister_namespace: str

    def collect(self, only: list[str] | None = None) -> list[ClusterOutcome]:
        source = ClusterSource(self.settings)
        try:
            c = Collector(self.settings, self.r, builtin_registry(), source)
            return collect_once(c, only, parallel=2)
        finally:
            source.close()


ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
ROWS = "#rows tbody tr"


def view_as(page: Any, user: str) -> None:
    """Switch the demo identity and, on the list page, wait for the reload it starts: a click
    on a row drawn before it can land on a row the reload replaces (mousedown on the old
    button, mouseup on the new one: no click event at all)."""
    page.select_option("#demo-user", user)
    if page.locator("#rows").count():
        page.wait_for_selector("#rows:not([aria-busy])")


def api_groups(stack: Stack, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    resp = requests.get(f"{stack.base}/api/v1/groups", params=params, headers=headers, timeout=10)
    resp.raise_for_status()
    items: list[dict[str, Any]] = resp.json()["items"]
    return items


def shot(page: Any, name: str, full_page: bool = True) -> None:
    """Save a screenshot of the page's current state under artifacts/ui/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)
