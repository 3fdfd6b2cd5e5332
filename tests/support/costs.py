"""What a request costs in Redis, as the count guards measure it: round trips through redis-py
and commands by name (INFO commandstats)."""

from __future__ import annotations

from collections import Counter

import pytest
import redis

from common import redis_client


def count_round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Redis round trips made through redis-py: one per command, one per pipeline execute (ours,
    `common.redis_client.pipelined`, or redis-py's)."""
    trips: list[str] = []
    real_cmd, real_pipe = redis.Redis.execute_command, redis.client.Pipeline.execute
    real_pipelined = redis_client.pipelined

    def command(self, *args, **kw):
        trips.append(str(args[0]))
        return real_cmd(self, *args, **kw)

    def pipeline(self, *args, **kw):
        trips.append("pipeline")
        return real_pipe(self, *args, **kw)

    def pipelined(r, commands):
        trips.append("pipeline")
        return real_pipelined(r, commands)

    monkeypatch.setattr(redis.Redis, "execute_command", command)
    monkeypatch.setattr(redis_client, "pipelined", pipelined)
    monkeypatch.setattr(redis.client.Pipeline, "execute", pipeline)
    return trips


def commands(r: redis.Redis) -> Counter[str]:
    stats = r.info("commandstats")
    out = Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})
    out.pop("config|resetstat", None)
    return out
