"""Fixtures for the command-line client: a real stack (a kubesim fleet, one collection into the
session's redis-server, the query app on a real HTTP server in `header` mode), the CLI run as a
subprocess (`python -m fleetscope ...`) with a clean environment, and the API asked directly
for the rows the CLI should print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import requests
from werkzeug.serving import BaseWSGIServer, make_server

from collector.clusters import ClusterSource
from collector.jobs import Collector, collect_once
from common.kinds.registry import builtin_registry
from common.redis_server import RedisServer
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim
from query.app import create_app

REPO = Path(__file__).resolve().parents[2]
RBAC = "rbac.authorization.k8s.io/v1"
LISTER = "lister"  # may list Kustomizations in one namespace, but not get them


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    def flags(self) -> list[str]:
        return ["--as", self.name, *(f for g in self.groups for f in ("--as-group", g))]

    def headers(self) -> dict[str, str]:
        h = {"X-Remote-User": self.name}
        if self.groups:
            h["X-Remote-Group"] = ",".join(self.groups)
        return h


@dataclass
class Stack:
    base: str
    sim: KubeSim
    settings: Settings
    users: dict[str, User]

    def api_rows(self, user: User, **params: str) -> list[dict[str, Any]]:
        """Every row `user` sees under `params`, walked through the API's pages directly."""
        rows: list[dict[str, Any]] = []
        token = ""
        while True:
            query = {**params, "limit": "500", **({"continue": token} if token else {})}
            resp = requests.get(
                self.base + "/api/v1/objects", params=query, headers=user.headers(), timeout=10
            )
            resp.raise_for_status()
            body = resp.json()
            rows += body["items"]
            token = body["continue"]
            if not token:
                return rows


def serve(settings: Settings, ssl_context: Any = None) -> BaseWSGIServer:
    """The query app on a real HTTP server on a free loopback port (stop with `.shutdown()`)."""
    app = create_app(settings)
    app.extensions["fleetscope"].fleet.cache_s = 0
    server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=ssl_context)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="package")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("cli")
    fleet = generate_fleet(clusters=3, namespaces=8, seed=3, teams=2)
    sim = KubeSim.start(fleet, kubeconfig_dir=tmp / "clusters")
    r = redis.Redis.from_url(redis_server.url)
    r.flushall()
    server = None
    try:
        _prepare_leaves(sim)
        settings = Settings(
            redis_url=redis_server.url,
            clusters_dir=str(tmp / "clusters"),
            auth_mode="header",
            trusted_proxy_cidrs=("127.0.0.1/32",),
            leaf_timeout_s=3.0,
        )
        source = ClusterSource(settings)
        try:
            outcomes = collect_once(Collector(settings, r, builtin_registry(), source), None, 2)
        finally:
            source.close()
        assert all(o.ok for o in outcomes)
        server = serve(settings)
        users = {u.name: User(u.name, u.groups) for u in fleet_users(fleet)}
        users[LISTER] = User(LISTER, ())
        yield Stack(f"http://127.0.0.1:{server.server_port}", sim, settings, users)
    finally:
        if server is not None:
            server.shutdown()
        sim.stop()
        r.close()


def _prepare_leaves(sim: KubeSim) -> None:
    """Some rows unhealthy, one suspended, and a user who may list but not get."""
    first = sim.clusters[0]
    for cluster in sim.clusters[:2]:
        meta = sim.list(cluster, "Kustomization")[0]["metadata"]
        sim.set_ready(
            cluster,
            "Kustomization",
            meta["namespace"],
            meta["name"],
            False,
            message="kustomize build failed: accumulating resources:\n missing ./base",
        )
    meta = sim.list(first, "HelmRelease")[0]["metadata"]
    sim.patch(first, "HelmRelease", meta["namespace"], meta["name"], {"spec": {"suspend": True}})
    namespace = sim.list(first, "Kustomization")[0]["metadata"]["namespace"]
    sim.apply(
        first,
        {
            "apiVersion": RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": "kustomization-lister"},
            "rules": [
                {
                    "apiGroups": ["kustomize.toolkit.fluxcd.io"],
                    "resources": ["kustomizations"],
                    "verbs": ["list"],
                }
            ],
        },
    )
    sim.apply(
        first,
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "lister", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "kustomization-lister",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": LISTER}],
        },
    )


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME, so no config file of the machine's user is read."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def cli(home: Path):
    """Run `python -m fleetscope ARGS` with only the environment given (plus PATH, HOME)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
        base = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
        base.update(HOME=str(home), PYTHONPATH=str(REPO), **(env or {}))
        done = subprocess.run(
            [sys.executable, "-m", "fleetscope", *args],
            capture_output=True,
            text=True,
            env=base,
            timeout=timeout,
            cwd=REPO,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run
