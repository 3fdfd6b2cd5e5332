"""Fixtures for the command-line client: a real stack (tests.support.cli: a kubesim fleet, one
collection into the session's redis-server, the query app on a real HTTP server in `header`
mode). The CLI itself runs through the `cli` fixture of tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.redis_server import RedisServer
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.cli import LISTER, Stack, User
from tests.support.http import make_app, serve

RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="package")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("cli")
    fleet = generate_fleet(clusters=3, namespaces=8, seed=3, teams=2)
    sim = sims.start(fleet, tmp)
    r = redis.Redis.from_url(redis_server.url)
    r.flushall()
    try:
        _prepare_leaves(sim)
        settings = sims.settings_for(tmp, redis_server.url, leaf_timeout_s=3.0)
        sims.collect(settings)
        users = {u.name: User(u.name, u.groups) for u in fleet_users(fleet)}
        users[LISTER] = User(LISTER, ())
        with serve(make_app(settings)) as host:
            yield Stack(f"http://{host}", sim, settings, users)
    finally:
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
