"""Fixtures for web view tests: a running stack (tests/ui/stack.py: kubesim, one collection into
the session's real Redis, the query app on a real HTTP server in demo mode) and headless
Chromium.

The stack is module-scoped (one per test module), built only when a browser is there. Browser
tests skip, saying how to enable them, when Debian's chromium is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from common.redis_server import RedisServer
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import write_users
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.http import make_app, serve
from tests.ui.stack import CHROMIUM_ARGS, EXTERNAL_URL, LISTER, RBAC, Stack, chromium_path


def _prepare_leaves(sim: KubeSim) -> tuple[list[tuple[str, str, str]], str]:
    """Make a few rows unhealthy, annotate external links, and add the list-only user."""
    unhealthy = []
    for cluster in sim.clusters:
        for obj in sim.list(cluster, "Kustomization")[:2]:
            meta = obj["metadata"]
            sim.set_ready(
                cluster,
                "Kustomization",
                meta["namespace"],
                meta["name"],
                False,
                message="kustomize build failed: missing resource",
            )
            unhealthy.append((cluster, meta["namespace"], meta["name"]))
    first = sim.list(sim.clusters[0], "GitRepository")
    links = {EXTERNAL_URL: first[0], "javascript:alert(1)": first[1]}
    for url, obj in links.items():
        meta = obj["metadata"]
        patch = {"metadata": {"annotations": {"fleetscope.io/ui-url": url}}}
        sim.patch(sim.clusters[0], "GitRepository", meta["namespace"], meta["name"], patch)
    namespace = unhealthy[0][1]
    sim.apply(sim.clusters[0], {
        "apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "kustomization-lister"},
        "rules": [{"apiGroups": ["kustomize.toolkit.fluxcd.io"],
                   "resources": ["kustomizations"], "verbs": ["list"]}],
    })  # fmt: skip
    sim.apply(sim.clusters[0], {
        "apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "lister", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kustomization-lister"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": LISTER}],
    })  # fmt: skip
    return unhealthy, namespace


def _users_file(fleet: Any, path: Path) -> Path:
    write_users(fleet, path)
    doc = json.loads(path.read_text())
    doc["users"].append({"name": LISTER, "groups": [], "description": "list-only, one ns"})
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("ui")
    fleet = generate_fleet(clusters=2, namespaces=5, seed=1)
    sim = sims.start(fleet, tmp)
    r = redis.Redis.from_url(redis_server.url)
    r.flushall()
    try:
        unhealthy, lister_ns = _prepare_leaves(sim)
        settings = Settings(
            redis_url=redis_server.url,
            clusters_dir=str(tmp / "clusters"),
            auth_mode="header",
            trusted_proxy_cidrs=("127.0.0.1/32",),
            ui_demo_mode=True,
            ui_demo_users_file=str(_users_file(fleet, tmp / "users.json")),
            header_group_separator=",",  # as `fleetscope demo`: the switcher joins groups
            leaf_timeout_s=3.0,
        )
        with serve(make_app(settings)) as host:
            st = Stack(f"http://{host}", sim, r, settings, unhealthy, lister_ns)
            assert all(o.ok for o in st.collect())
            yield st
    finally:
        sim.stop()
        r.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = chromium_path()
    if exe is None:
        pytest.skip(
            "browser tests need Chromium: `apt-get install chromium` (Debian), or set "
            "CHROMIUM_BIN=/path/to/chromium; nothing is downloaded"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, stack: Stack) -> Iterator[Any]:
    context = browser.new_context(base_url=stack.base, viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if _js_error(m) else None)
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _js_error(message: Any) -> bool:
    # The browser logs every non-2xx fetch; refusals are expected answers, shown on the page.
    return message.type == "error" and not message.text.startswith("Failed to load resource")
