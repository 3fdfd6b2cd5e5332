"""The reliability and attack tests' fleet: three kubesim clusters of four app namespaces, the
real collector over HTTPS into the test Redis, and the query app in `header` mode (callers
chosen with X-Remote-User/Group). The fixtures `sim`, `settings`, `collector` and `api` are
offered by the conftests of tests/reliability and tests/security."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from collector.clusters import ClusterSource
from collector.jobs import Collector
from common.index import keys
from common.kinds.registry import builtin_registry
from common.redis_client import connect
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.http import make_app

REG = builtin_registry()
ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    """Three clusters x four app namespaces; kubeconfigs in tmp_path/clusters."""
    fleet = generate_fleet(clusters=3, namespaces=4, seed=5, teams=2)
    with sims.start(fleet, tmp_path, bookmark_interval_s=0.2) as s:
        s.warm()  # generated up front, so first requests are not slowed by generation
        yield s


@pytest.fixture
def settings(redis_url: str, sim: KubeSim) -> Settings:
    """Short leaf timeouts (a latency fault of 3 s is "too slow") and small pages (so lists
    take several pages and continue tokens)."""
    assert sim.kubeconfig_dir is not None
    return Settings(
        redis_url=redis_url,
        clusters_dir=str(sim.kubeconfig_dir),
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        leaf_timeout_s=1.5,
        leaf_page_size=3,
    )


@pytest.fixture
def collector(settings: Settings, r: redis.Redis) -> Iterator[Collector]:
    c = Collector(settings, connect(settings.redis_url), REG, ClusterSource(settings))
    c.reconcile()
    yield c
    c.source.close()
    c.r.close()


@pytest.fixture
def api(settings: Settings) -> Any:
    """The query app's test client (sync status re-read on every request)."""
    return make_app(settings).test_client()


def get_json(client: Any, path: str, headers: dict[str, str] | None = None, **params: Any):
    resp = client.get(path, query_string=params, headers=ADMIN if headers is None else headers)
    return resp.status_code, resp.get_json()


def rows_of(r: redis.Redis, cluster: str) -> set[str]:
    return set(r.zrange(keys.rows(cluster), 0, -1))


def leaf_requests(fleet: KubeSim) -> int:
    """Requests the simulated leaves received (all clusters)."""
    return sum(len(fleet.request_log(c)) for c in fleet.clusters)
