"""The one place fleetscope builds its Redis index client: every process connects through
`connect`, so every client has connect and read timeouts (a stalled Redis fails a request or a
sync instead of hanging it) and checks idle connections before use.

On Redis Cluster the client is redis-py's `RedisCluster`: every per-cluster multi-key operation
(MULTI/EXEC under WATCH, Lua) names keys of one hash tag `{c:<cluster>}` (common.index.keys), so
one slot; reads that span clusters go through `pipelined` and `mget`, which split them by slot
and send each shard its part in one write, every shard at once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisClusterException
from redis.sentinel import Sentinel

from common import redis_urls

QUERY_TIMEOUT_S = 5.0
"""Query processes: a request waits at most this long for one Redis reply."""
WRITER_TIMEOUT_S = 60.0
"""Collector and watcher: a full sync's transaction can carry many thousand rows."""
CONNECT_TIMEOUT_S = 5.0
HEALTH_CHECK_INTERVAL_S = 30
MAX_CONNECTIONS = 4096
"""Connections a client may open (one per thread using it at once). redis-py 8 lowered its
default to 100, fewer than a watcher replica's threads (a writer per cluster): past it, every
command failed with "Too many connections"."""


def connect(url: str, timeout_s: float = WRITER_TIMEOUT_S) -> redis.Redis:
    """A client of the index at `url` (nothing is connected until the first command): a
    standalone server, or the primary a set of Sentinels names (`redis+sentinel://`, see
    common.redis_urls), whose connections find the new primary after a failover."""
    timeouts: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": min(timeout_s, CONNECT_TIMEOUT_S),
        "max_connections": MAX_CONNECTIONS,
    }
    topology = redis_urls.check(url)
    if topology == "sentinel":
        return _sentinel_primary(redis_urls.parse_sentinel(url), timeouts)
    if topology == "cluster":
        return _cluster(redis_urls.parse_cluster(url), timeouts)
    return redis.Redis.from_url(url, health_check_interval=HEALTH_CHECK_INTERVAL_S, **timeouts)


ERRORS: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)
"""What a Redis call may raise when Redis is not answering right: redis-py's errors, and its
cluster client's own (a slot no node serves mid-failover), which are not `RedisError`s."""


def is_cluster(r: Any) -> bool:
    """Whether `r` is a Redis Cluster client (whose multi-slot reads must be split)."""
    return isinstance(r, RedisCluster)


def _cluster(u: redis_urls.ClusterURL, timeouts: dict[str, Any]) -> redis.Redis:
    tls: dict[str, Any] = {}
    if u.tls:
        tls = {"ssl": True, "ssl_cert_reqs": u.ssl_cert_reqs, "ssl_ca_certs": u.ssl_ca_certs}
    client = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in u.nodes],  # type: ignore[no-untyped-call]
        username=u.username,
        password=u.password,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        **timeouts,
        **tls,
    )
    # Typed as the standalone client every caller takes: the commands fleetscope sends are the
    # same, and the few that differ on a cluster (cross-slot reads) go through this module.
    return client  # type: ignore[return-value]


def _sentinel_primary(u: redis_urls.SentinelURL, timeouts: dict[str, Any]) -> redis.Redis:
    tls: dict[str, Any] = {}
    if u.tls:
        tls = {"ssl": True, "ssl_cert_reqs": u.ssl_cert_reqs, "ssl_ca_certs": u.ssl_ca_certs}
    sentinel_kwargs = {**timeouts, **tls}
    if u.sentinel_password:
        sentinel_kwargs["password"] = u.sentinel_password
    sentinel = Sentinel(list(u.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        u.master,
        db=u.db,
        username=u.username,
        password=u.password,
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        **timeouts,
        **tls,
    )
    return client


class Packed(bytes):
    """A command already in the Redis protocol (`packed`): callers that send the same long
    command on every request (an MGET of 200 keys) pack it once."""

    args: tuple[Any, ...]


def packed(*args: str | bytes | int) -> Packed:
    """`args` as one RESP command, as redis-py would send them."""
    out = Packed(_pack([args]))
    out.args = args
    return out


def _pack(commands: Iterable[Sequence[Any]]) -> bytes:
    """Commands in the Redis protocol, as redis-py packs them (str as UTF-8, int and float as
    their decimal text), in a third less time than its packer for the short commands a page
    sends by the dozen; a `Packed` one as it is."""
    out: list[bytes] = []
    for c in commands:
        if isinstance(c, Packed):
            out.append(c)
            continue
        out.append(b"*%d\r\n" % len(c))
        for a in c:
            if a.__class__ is not bytes:
                a = _arg(a)
            out.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(out)


def _arg(a: Any) -> bytes:
    if isinstance(a, str):
        return a.encode()
    if isinstance(a, bytes | memoryview):
        return bytes(a)
    if isinstance(a, int | float) and not isinstance(a, bool):
        return repr(a).encode()  # redis-py: str() of an int, repr() of a float
    raise redis.DataError(f"invalid input of type {type(a).__name__!r} for a Redis command")


def pipelined(r: redis.Redis, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """`commands` sent in one write, their raw replies in order: a non-transactional pipeline
    without the pipeline object's bookkeeping (a third of a list page's client-side Redis time).

    Replies get no response callbacks (bytes, lists, integers as Redis sends them). An error
    reply raises, once every reply was read (the connection stays in step), the first error
    (`NoScriptError`, ...). Connection errors are retried by the client's `retry` policy, as
    its pipelines are, the connection dropped before each retry. A command may come `packed`.
    On Redis Cluster commands are grouped by the shard holding their key (an MGET is split by
    slot and its reply put back together), every shard is sent its part before any reply is
    read (one round trip per shard touched, side by side), and a moved slot re-reads the
    cluster's slot map and sends everything once more (these are reads).
    Clients other than a plain `redis.Redis` take their own pipeline."""
    if isinstance(r, RedisCluster):
        return _pipelined_cluster(r, commands)
    if type(r) is not redis.Redis:
        pipe = r.pipeline(transaction=False)
        for command in commands:
            args = command.args if isinstance(command, Packed) else command
            pipe.execute_command(*args)  # type: ignore[no-untyped-call,unused-ignore]
        return pipe.execute()
    wire = _pack(commands)
    pool = r.connection_pool
    conn = pool.get_connection()

    def send() -> list[Any]:
        conn.send_packed_command([wire])  # type: ignore[no-untyped-call,unused-ignore]
        replies: list[Any] = []
        error: redis.ResponseError | None = None
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as e:
                replies.append(e)
                error = error or e
        if error is not None:
            raise error
        return replies

    try:
        return conn.retry.call_with_retry(send, lambda _error: conn.disconnect())  # type: ignore[no-untyped-call,unused-ignore]
    finally:
        pool.release(conn)


def mget(r: redis.Redis, names: Sequence[str]) -> list[Any]:
    """MGET of `names` (of any clusters) in one round trip per shard touched."""
    if not names:
        return []
    if isinstance(r, RedisCluster):
        return _pipelined_cluster(r, [("MGET", *names)])[0]
    return r.mget(names)


def _slot(key: Any) -> int:
    return key_slot(key if isinstance(key, bytes) else _arg(key))


_CLUSTER_RETRIED = (
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.ConnectionError,
    redis.TimeoutError,
)


def _pipelined_cluster(r: RedisCluster, commands: Sequence[Sequence[Any]]) -> list[Any]:
    # Per command: the (slot, args) parts it is sent as; an MGET gets one part per slot.
    parts: list[list[tuple[int, Sequence[Any]]]] = []
    for command in commands:
        args = command.args if isinstance(command, Packed) else command
        name = str(args[0]).upper()
        if name == "MGET":
            by_slot: dict[int, list[Any]] = {}
            for k in args[1:]:
                by_slot.setdefault(_slot(k), []).append(k)
            parts.append([(slot, ("MGET", *ks)) for slot, ks in by_slot.items()])
        elif name in ("EVALSHA", "EVAL"):
            numkeys = int(args[2])
            slots = {_slot(k) for k in args[3 : 3 + numkeys]}
            if len(slots) != 1:
                raise redis.DataError(f"{name} must name keys of one slot, got {len(slots)}")
            parts.append([(slots.pop(), args)])
        else:
            parts.append([(_slot(args[1]), args)])
    for attempt in (0, 1):
        try:
            return _send_to_shards(r, commands, parts)
        except _CLUSTER_RETRIED:
            if attempt:
                raise
            r.nodes_manager.initialize()  # the slot map moved (failover, resharding)
    raise AssertionError("unreachable")


def _send_to_shards(
    r: RedisCluster,
    commands: Sequence[Sequence[Any]],
    parts: list[list[tuple[int, Sequence[Any]]]],
) -> list[Any]:
    by_node: dict[str, tuple[Any, list[tuple[int, int]], list[Sequence[Any]]]] = {}
    for i, command_parts in enumerate(parts):
        for j, (slot, args) in enumerate(command_parts):
            node = r.nodes_manager.get_node_from_slot(slot)
            entry = by_node.get(node.name)
            if entry is None:
                entry = by_node[node.name] = (node, [], [])
            entry[1].append((i, j))
            entry[2].append(args)
    sent: list[tuple[Any, Any, list[tuple[int, int]]]] = []
    try:
        for node, where, node_commands in by_node.values():
            pool = r.get_redis_connection(node).connection_pool
            conn = pool.get_connection()
            sent.append((pool, conn, where))
            conn.send_packed_command([_pack(node_commands)])  # type: ignore[no-untyped-call,unused-ignore]
        got: list[list[Any]] = [[None] * len(p) for p in parts]
        error: Exception | None = None
        for _pool, conn, where in sent:
            for i, j in where:
                try:
                    got[i][j] = conn.read_response()
                except redis.ResponseError as e:
                    got[i][j] = e
                    error = error or e
    except BaseException:
        for _pool, conn, _where in sent:
            conn.disconnect()  # replies may be left unread: never reuse it
        raise
    finally:
        for pool, conn, _where in sent:
            pool.release(conn)
    if error is not None:
        raise error
    out: list[Any] = []
    for command, command_parts, replies in zip(commands, parts, got, strict=True):
        args = command.args if isinstance(command, Packed) else command
        if len(command_parts) == 1 and str(args[0]).upper() != "MGET":
            out.append(replies[0])
            continue
        values: dict[
            Any, Any
        ] = {}  # an MGET's parts: each key's value, put back in the order asked
        for (_, part_args), reply in zip(command_parts, replies, strict=True):
            values.update(zip(part_args[1:], reply, strict=True))
        out.append([values[k] for k in args[1:]])
    return out


def text(v: str | bytes | None) -> str:
    """A Redis reply as text ("" for a missing value), whichever `decode_responses` is set."""
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v
