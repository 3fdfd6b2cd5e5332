"""common.redis_client.pipelined against a real redis-server: replies in order, error replies
raised only after every reply was read, connection errors retried like redis-py's pipelines."""

from __future__ import annotations

import socket
from typing import Any

import fakeredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from common import redis_client
from common.index import keys
from common.redis_client import connect, packed, pipelined
from common.redis_server import free_port, start_redis_cluster
from tests.support import topology


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return connect(redis_url, timeout_s=5)


def test_replies_come_raw_and_in_order(client: redis.Redis) -> None:
    client.set("a", "1")
    client.zadd("z", {"x": 0, "y": 0, "w": 0})
    got = pipelined(
        client, [("GET", "a"), ("ZRANGEBYLEX", "z", "-", "+", "LIMIT", 0, 2), ("MGET", "a", "b")]
    )
    assert got == [b"1", [b"w", b"x"], [b"1", None]]
    assert pipelined(client, []) == []


@pytest.mark.standalone_only
def test_packed_commands_go_as_sent_beside_others(client: redis.Redis) -> None:
    client.mset({"g:a": 3, "g:b": "ünï"})
    mget = packed("MGET", "g:a", b"g:b", "g:none")
    conn = client.connection_pool.make_connection()
    assert mget == b"".join(conn.pack_commands([("MGET", "g:a", b"g:b", "g:none")]))
    got = pipelined(client, [("GET", "g:a"), mget, ("STRLEN", "g:b")])
    assert got == [b"3", [b"3", "ünï".encode(), None], 5]
    assert pipelined(fakeredis.FakeRedis(), [packed("MGET", "x")]) == [[None]]


@pytest.mark.parametrize(
    "command",
    [
        ("ZRANGEBYLEX", "fs:{c:a}:rows", b"[ns\x00", b"(ns\x01", "LIMIT", 0, 51),
        ("SET", "ünï", -3),
        ("SET", b"k", 2.5),
        ("SET", "k", 10**20),
        ("SET", "k", memoryview(b"mv")),
        ("SET", "k", ""),
    ],
)
@pytest.mark.standalone_only
def test_commands_are_packed_as_redis_py_packs_them(client: redis.Redis, command: tuple) -> None:
    conn = client.connection_pool.make_connection()
    assert packed(*command) == b"".join(conn.pack_commands([command]))
    both = [command, packed("GET", "k")]
    assert redis_client._pack(both) == b"".join(conn.pack_commands([command, ("GET", "k")]))
    assert pipelined(client, [command, ("EXISTS", "k")])[1] in (0, 1)


@pytest.mark.parametrize("bad", [True, None, ["a"], {"a": 1}])
def test_arguments_redis_py_rejects_are_rejected(client: redis.Redis, bad: object) -> None:
    with pytest.raises(redis.DataError):
        pipelined(client, [("SET", "k", bad)])
    assert client.ping()  # nothing half-sent: the connection is still in step


@pytest.mark.standalone_only
def test_an_error_reply_raises_after_all_replies_are_read(client: redis.Redis) -> None:
    client.set("a", "1")
    with pytest.raises(redis.exceptions.NoScriptError):
        pipelined(client, [("EVALSHA", "0" * 40, 0), ("GET", "a"), ("INCR", "a")])
    # the INCR after the error ran and its reply was read: the pooled connection is in step
    assert pipelined(client, [("GET", "a")]) == [b"2"]
    assert len(client.connection_pool._available_connections) == 1  # released, not leaked


@pytest.mark.standalone_only
def test_a_connection_lost_mid_request_is_retried_by_the_clients_policy(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = topology.client(redis_url, retry=Retry(NoBackoff(), 1))
    client.set("a", "1")
    real, lost = redis.connection.AbstractConnection.send_packed_command, []

    def send_once_lost(self, *args, **kw):  # the first write finds the socket gone
        if not lost:
            lost.append(self)
            self._sock.shutdown(socket.SHUT_RDWR)
            raise redis.exceptions.ConnectionError("connection lost")
        return real(self, *args, **kw)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", send_once_lost)
    assert pipelined(client, [("GET", "a")]) == [b"1"]
    assert lost
    lost.clear()
    once = topology.client(redis_url, retry=Retry(NoBackoff(), 0))  # connect()'s default
    with pytest.raises(redis.exceptions.ConnectionError):
        pipelined(once, [("GET", "a")])


def test_a_redis_that_is_gone_raises_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens on it once closed
    gone = connect(f"redis://127.0.0.1:{port}/0", timeout_s=1)
    with pytest.raises(redis.exceptions.ConnectionError):
        pipelined(gone, [("GET", "a")])


def test_other_clients_take_their_own_pipeline() -> None:
    fake = fakeredis.FakeRedis()
    fake.set("a", "1")
    assert pipelined(fake, [("GET", "a"), ("MGET", "a", "b")]) == [b"1", [b"1", None]]


def test_a_cluster_client_connects_at_first_use_and_again_after_a_failure() -> None:
    """Built while no node answers: no error until a command, which fails with one of ERRORS
    (a 503 in the query service), and the next command tries again."""
    r = redis_client.connect(f"redis+cluster://127.0.0.1:{free_port()}", 1)
    for _ in range(2):
        with pytest.raises(redis_client.ERRORS):
            r.get("fs:version")
    r.close()


def test_a_password_protected_cluster_is_reached_with_the_urls_password() -> None:
    cluster = start_redis_cluster(masters=3, replicas=0, password="s3cret")
    try:
        r = redis_client.connect(cluster.url)
        assert cluster.url.startswith("redis+cluster://:s3cret@")
        r.set(keys.generation("a"), 1)
        r.set(keys.generation("b"), 2)
        gens = [keys.generation(c) for c in ("a", "b", "zz")]
        assert redis_client.mget(r, gens) == [b"1", b"2", None]
        r.close()
        anonymous = redis_client.connect(cluster.url.replace(":s3cret@", ""))
        with pytest.raises(redis_client.ERRORS):
            anonymous.get(keys.generation("a"))
        anonymous.close()
    finally:
        cluster.stop()


_PACKED_ALIKE = [
    ("ZADD", "fs:{c:a}:rows", 0, "ns\x00Kustomization\x00ünï", 0, b"raw\xff"),
    ("SET", "k", 2.5),
    ("SET", "k", 0.1 + 0.2),
    ("SET", "k", -(10**20)),
    ("SET", "k", memoryview(b"mv")),
    ("SET", "k", bytearray(b"ba")),
    ("SET", "k", ""),
    ("CONFIG RESETSTAT",),
    (b"CLIENT SETNAME", "n"),
]


@pytest.mark.parametrize("command", _PACKED_ALIKE)
def test_the_packer_writes_what_redis_pys_own_packer_writes(command: tuple) -> None:
    """common.redis_client.PACKER (hiredis without redis-py's per-argument pass) against the
    packer a plain redis-py connection builds: the same bytes for every argument type."""
    assert redis_client.PACKER is not None  # hiredis is a dependency (redis[hiredis])
    theirs = redis.Connection()._command_packer  # type: ignore[attr-defined]

    def outcome(pack: Any) -> object:  # the bytes, or the error (redis-py 6.1 rejects bytearray)
        try:
            return b"".join(pack(*command))
        except redis.DataError:
            return redis.DataError

    mine = outcome(redis_client.PACKER.pack)
    assert mine == outcome(theirs.pack)
    assert mine is not redis.DataError or isinstance(command[-1], bytearray)


@pytest.mark.parametrize("bad", [True, None, ["a"], {"a": 1}, object()])
def test_the_packer_rejects_what_redis_py_rejects(bad: object) -> None:
    assert redis_client.PACKER is not None
    with pytest.raises(redis.DataError):
        redis_client.PACKER.pack("SET", "k", bad)


def test_every_topologys_connections_use_the_packer(client: redis.Redis) -> None:
    """Standalone and Sentinel clients pass it to their connections; a cluster's nodes get it
    through their connection class. A write and a read through it come back as written."""
    sentinel = redis_client.connect(f"redis+sentinel://127.0.0.1:{free_port()}/mymaster")
    assert sentinel.connection_pool.connection_kwargs["command_packer"] is redis_client.PACKER
    cluster = redis_client.connect(f"redis+cluster://127.0.0.1:{free_port()}")
    kwargs = cluster._lazy_kwargs  # type: ignore[attr-defined]
    if redis_client.CLUSTER_NODES_TAKE_CONNECTION_CLASS:
        assert kwargs["connection_class"]("127.0.0.1")._command_packer is redis_client.PACKER
    else:  # redis-py before 8.2: the cluster keeps redis-py's packer (the lowest-versions run)
        assert "connection_class" not in kwargs
    if not redis_client.is_cluster(client):
        conn = client.connection_pool.make_connection()
        assert conn._command_packer is redis_client.PACKER  # type: ignore[attr-defined]
    client.zadd("{p}z", {"ünï": 1.5, b"\xff": 2})
    client.set("{p}s", -(10**20))
    assert client.zrange("{p}z", 0, -1, withscores=True) == [("ünï".encode(), 1.5), (b"\xff", 2)]
    assert client.get("{p}s") == b"-100000000000000000000"
