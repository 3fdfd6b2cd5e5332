"""The one place fleetscope builds its Redis index client: every process connects through
`connect`, so every client has connect and read timeouts (a stalled Redis fails a request or a
sync instead of hanging it) and checks idle connections before use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import redis
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
    if redis_urls.check(url) == "sentinel":
        return _sentinel_primary(redis_urls.parse_sentinel(url), timeouts)
    return redis.Redis.from_url(url, health_check_interval=HEALTH_CHECK_INTERVAL_S, **timeouts)


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
    Clients other than a plain `redis.Redis` take their own pipeline."""
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


def text(v: str | bytes | None) -> str:
    """A Redis reply as text ("" for a missing value), whichever `decode_responses` is set."""
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v
