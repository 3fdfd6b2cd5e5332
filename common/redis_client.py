"""The one place fleetscope builds its Redis index client: every process connects through
`connect`, so every client has connect and read timeouts (a stalled Redis fails a request or a
sync instead of hanging it) and checks idle connections before use."""

from __future__ import annotations

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


def text(v: str | bytes | None) -> str:
    """A Redis reply as text ("" for a missing value), whichever `decode_responses` is set."""
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else v
