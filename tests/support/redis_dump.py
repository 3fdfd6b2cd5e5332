"""Every key of a Redis and its values as text, for the tests that search them for secrets."""

from __future__ import annotations

import redis


def redis_dump(r: redis.Redis) -> str:
    """One line per key: its name and its values, whatever its type."""
    out = []
    for key in r.scan_iter("*"):
        kind = r.type(key)
        if kind == "zset":
            values = r.zrange(key, 0, -1)
        elif kind == "hash":
            values = [f"{k}={v}" for k, v in r.hgetall(key).items()]
        elif kind == "list":
            values = r.lrange(key, 0, -1)
        elif kind == "set":
            values = list(r.smembers(key))
        elif kind == "stream":  # a cluster's change feed (common.index.feed): rows too
            values = [f"{i}={f}" for i, f in r.xrange(key)]
        else:
            values = [r.get(key) or ""]
        out.append(f"{key}: {values}")
    return "\n".join(out)
