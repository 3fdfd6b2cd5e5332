"""Watch fixtures: a small kubesim fleet with fast bookmarks, registered in a clean Redis, and
watcher replicas run in threads (real HTTPS watches, real redis-server)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from common.leaf import registry
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims, topology
from tests.watch.harness import Running


@pytest.fixture
def sim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeSim]:
    """The fleet: 2 clusters x 4 namespaces, or a test module's `FLEET` (clusters, namespaces,
    seed)."""
    clusters, namespaces, seed = getattr(request.module, "FLEET", (2, 4, 3))
    fleet = generate_fleet(clusters=clusters, namespaces=namespaces, seed=seed)
    yield from sims.running(fleet, tmp_path, bookmark_interval_s=0.2)


@pytest.fixture
def wsettings(sim: KubeSim, redis_url: str) -> Settings:
    assert sim.kubeconfig_dir is not None
    return Settings(
        redis_url=redis_url,
        clusters_dir=str(sim.kubeconfig_dir),
        watch_lease_ttl_s=2.0,
        watch_idle_timeout_s=30.0,
        watch_rbac_debounce_s=0.05,
    )


@pytest.fixture
def rb(redis_url: str, wsettings: Settings) -> Iterator[redis.Redis]:
    """A bytes-mode client (as production uses), with the fleet registered."""
    client = topology.client(redis_url)
    registry.reconcile(client, registry.load_cluster_configs(wsettings))
    yield client
    client.close()


@pytest.fixture
def start_replica(wsettings: Settings, rb: redis.Redis) -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(name: str = "a", settings: Settings | None = None) -> Running:
        run = Running(settings or wsettings, name)
        started.append(run)
        return run

    yield start
    for run in started:
        run.stop()


@pytest.fixture
def spawn(
    wsettings: Settings, tmp_path: Path
) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    logs = []

    def start(name: str) -> subprocess.Popen[bytes]:
        env = dict(
            os.environ,
            FLEETSCOPE_REDIS_URL=wsettings.redis_url,
            FLEETSCOPE_CLUSTERS_DIR=wsettings.clusters_dir,
            FLEETSCOPE_WATCH_LEASE_TTL_S=str(wsettings.watch_lease_ttl_s),
            FLEETSCOPE_WATCH_METRICS_PORT="0",  # two replicas on one machine
        )
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed at teardown)
        logs.append(log)
        cmd = [sys.executable, "-m", "fleetscope", "watch", "--name", name]
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(10)
    for log in logs:
        log.close()
