"""The one place fleetscope builds its Redis index client: every process connects through
`connect`, so every client has connect and read timeouts (a stalled Redis fails a request or a
sync instead of hanging it) and checks idle connections before use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

QUERY_TIMEOUT_S = 5.0
"""Query processes: a request waits at most this long for one Redis reply."""
WRITER_TIMEOUT_S = 60.0
"""Collector and watcher: a full sync's transaction can carry many thousand rows."""
CONNECT_TIMEOUT_S = 5.0
HEALTH_CHECK_INTERVAL_S = 30


def connect(url: str, timeout_s: float = WRITER_TIMEOUT_S) -> redis.Redis:
    """A client of the index at `url` (nothing is connected until the first command)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=min(timeout_s, CONNECT_TIMEOUT_S),
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
    )


def pipelined(r: redis.Redis, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """`commands` sent in one write, their raw replies in order: a non-transactional pipeline
    without the pipeline object's bookkeeping (a third of a list page's client-side Redis time).

    Replies get no response callbacks (bytes, lists, integers as Redis sends them). An error
    reply raises, once every reply was read (the connection stays in step), the first error
    (`NoScriptError`, ...). Connection errors are retried by the client's `retry` policy, as
    its pipelines are, the connection dropped before each retry. Clients other than a plain
    `redis.Redis` take their own pipeline."""
    if type(r) is not redis.Redis:
        pipe = r.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)  # type: ignore[no-untyped-call,unused-ignore]
        return pipe.execute()
    pool = r.connection_pool
    conn = pool.get_connection()

    def send() -> list[Any]:
        packed = conn.pack_commands(commands)  # type: ignore[no-untyped-call,unused-ignore]
        conn.send_packed_command(packed)  # type: ignore[no-untyped-call,unused-ignore]
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
