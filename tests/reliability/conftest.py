"""Fixtures for the reliability tests: a small kubesim fleet, the real collector over HTTPS into
the test Redis, and the query app in `header` mode (callers chosen with X-Remote-User/Group)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from collector.clusters import ClusterSource
from collector.jobs import Collector
from common.kinds.registry import builtin_registry
from common.redis_client import connect
from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.query.conftest import make_app
from tests.reliability.stack import ADMIN

REG = builtin_registry()


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    """Three clusters x four app namespaces; kubeconfigs in tmp_path/clusters."""
    s = KubeSim.start(
        generate_fleet(clusters=3, namespaces=4, seed=5, teams=2),
        kubeconfig_dir=tmp_path / "clusters",
        bookmark_interval_s=0.2,
    )
    s.warm()  # generated up front, so first requests are not slowed by generation
    yield s
    s.stop()


def reliability_settings(redis_url: str, clusters_dir: Path | str, **changes: Any) -> Settings:
    """Short leaf timeouts (a latency fault of 3 s is "too slow") and small pages (so lists take several pages and continue tokens)."""
    base = Settings(
        redis_url=redis_url,
        clusters_dir=str(clusters_dir),
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        leaf_timeout_s=1.5,
        leaf_page_size=3,
    )
    return base.replace(**changes) if changes else base


@pytest.fixture
def settings(redis_url: str, sim: KubeSim) -> Settings:
    assert sim.kubeconfig_dir is not None
    return reliability_settings(redis_url, sim.kubeconfig_dir)


@pytest.fixture
def collector(settings: Settings, r: redis.Redis) -> Iterator[Collector]:
    c = Collector(settings, connect(settings.redis_url), REG, ClusterSource(settings))
    c.reconcile()
    yield c
    c.source.close()
    c.r.close()


@pytest.fixture
def api(settings: Settings):
    """The query app's test client (sync status re-read on every request)."""
    return make_app(settings).test_client()


def get_json(client: Any, path: str, headers: dict[str, str] | None = None, **params: Any):
    resp = client.get(path, query_string=params, headers=ADMIN if headers is None else headers)
    return resp.status_code, resp.get_json()


def rows_of(r: redis.Redis, cluster: str) -> set[str]:
    from common.index import keys

    return set(r.zrange(keys.rows(cluster), 0, -1))
