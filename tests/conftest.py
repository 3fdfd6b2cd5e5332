"""Shared fixtures: one real redis-server per test session, a clean database per test; in
modules that set `TOPOLOGIES` (tests/support/topology.py), `redis_url` is also a real Redis
Cluster. Also the fixtures more than one test directory uses: the seeded index of the reader
and query tests (tests.support.query_fleet), a real Alertmanager, and the command line run as a
subprocess with a clean environment (tests.support.cli)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import settings as hypothesis_settings

from common import redis_urls
from common.redis_server import (
    RedisClusterSet,
    RedisServer,
    start_redis_cluster,
    start_redis_server,
)
from common.settings import Settings
from tests.support import cli as cli_support
from tests.support import query_fleet, topology
from tests.support.alertmanager import alertmanager, alertmanager_server  # noqa: F401  (fixtures)

# Property tests judge outcomes, not speed: on a loaded 2-core CI machine an example may take
# longer than hypothesis' default 200 ms deadline, which is not a failure of the property.
hypothesis_settings.register_profile("fleetscope", deadline=None)
hypothesis_settings.load_profile("fleetscope")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wanted = getattr(metafunc.module, "TOPOLOGIES", None)
    if wanted and "redis_url" in metafunc.fixturenames:
        metafunc.parametrize("redis_url", wanted, indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On `FLEETSCOPE_TEST_TOPOLOGY=cluster`, skip the tests marked `standalone_only`."""
    if os.environ.get("FLEETSCOPE_TEST_TOPOLOGY", "standalone") != "cluster":
        return
    skip = pytest.mark.skip(reason="standalone_only: counts one server's commands")
    for item in items:
        if item.get_closest_marker("standalone_only"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterSet]:
    cluster = start_redis_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of a flushed index: the session's private redis-server, or (parameter `cluster`) the
    session's Redis Cluster."""
    default = os.environ.get("FLEETSCOPE_TEST_TOPOLOGY", "standalone")  # the whole suite on one
    if getattr(request, "param", default) == "cluster":
        cluster: RedisClusterSet = request.getfixturevalue("redis_cluster")
        cluster.flush()
        yield cluster.url
        return
    yield _flushed_server(request)


@pytest.fixture
def broker_url(redis_url: str, request: pytest.FixtureRequest) -> str:
    """Celery's broker beside the index at `redis_url`: that URL for one server, the session's
    own (flushed) server for a Redis Cluster index, which Celery cannot use."""
    if redis_urls.check(redis_url) != "cluster":
        return redis_url
    return _flushed_server(request)


def _flushed_server(request: pytest.FixtureRequest) -> str:
    """The URL of the session's private redis-server, emptied."""
    server: RedisServer = request.getfixturevalue("redis_server")
    client = redis.Redis.from_url(server.url)
    client.flushall()
    client.close()
    return server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = topology.client(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings(redis_url=redis_url)


@pytest.fixture
def rb(redis_url: str) -> Iterator[redis.Redis]:
    """A client returning bytes (the reader compares members as bytes)."""
    client = topology.client(redis_url)
    yield client
    client.close()


@pytest.fixture
def seeded(redis_url: str) -> Iterator[query_fleet.Seeded]:
    r = topology.client(redis_url)
    yield query_fleet.Seeded(r, query_fleet.seed(r))
    r.close()


@pytest.fixture
def wide(redis_url: str) -> Iterator[redis.Redis]:
    """40 clusters of 30 rows each, grants and sync status as the collector leaves them."""
    r = topology.client(redis_url)
    query_fleet.seed_wide(r)
    yield r
    r.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME, so no config file of the machine's user is read."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def cli(home: Path) -> Callable[..., cli_support.Result]:
    """Run `python -m fleetscope ARGS` with only the environment given (plus PATH, HOME)."""

    def run(
        *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> cli_support.Result:
        return cli_support.run(home, *args, env=env, timeout=timeout)

    return run
