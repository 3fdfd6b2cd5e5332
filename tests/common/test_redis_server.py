"""The private redis-server of the demo, tests and benchmarks: it starts while thousands of
ephemeral ports are held, retries with a fresh port when the one it picked is taken before
redis-server binds it (never mistaking another server on that port for its own), and an
explicit port in use fails with a message naming it."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import redis

from common import redis_server as rs
from common.errors import ConfigError
from common.redis_server import RedisServer, start_redis_server
from tests.support.portpressure import ephemeral_ports_held


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _check(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        assert client.info("server")["process_id"] == server.process.pid
    finally:
        client.close()
        server.stop()


def test_starts_while_thousands_of_ports_are_held() -> None:
    with ephemeral_ports_held(3000):
        _check(start_redis_server())


def _picks(monkeypatch: pytest.MonkeyPatch, *ports: int) -> None:
    """free_port() returns `ports` first (as if they were free when picked), then real ones."""
    queue, real = list(ports), rs.free_port
    monkeypatch.setattr(rs, "free_port", lambda: queue.pop(0) if queue else real())


def test_a_port_taken_before_redis_binds_it_is_replaced(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _picks(monkeypatch, taken_port, taken_port)
    server = start_redis_server()
    assert server.port != taken_port
    _check(server)


def test_another_redis_on_the_picked_port_is_not_taken_for_ours(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _picks(monkeypatch, redis_server.port)
    server = start_redis_server()
    assert server.port != redis_server.port
    _check(server)


def test_an_explicit_port_in_use_is_named(taken_port: int) -> None:
    with pytest.raises(ConfigError, match=f"on port {taken_port}"):
        start_redis_server(port=taken_port)


def test_a_cluster_node_gets_a_port_whose_bus_port_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux hands out ephemeral ports up to 60,999; Redis refuses a cluster node above 55,535
    (its bus is the port + 10,000). A CI run once lost its Redis Cluster to that."""
    offered = iter([60_999, 57_295])
    real = rs.free_port
    monkeypatch.setattr(rs, "free_port", lambda host="127.0.0.1": next(offered, None) or real(host))
    port = rs.free_cluster_port()
    assert port <= 65_535 - rs.CLUSTER_BUS_OFFSET
