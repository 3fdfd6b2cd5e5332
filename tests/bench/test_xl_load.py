"""bench.xl_load, the fleet-XL loader: fleet S loaded through it into a real Redis Cluster holds
the same rows, indexes, counts, grants and feed as the real collector (`fleetscope collect
--once` against kubesim serving the same fleet) writes; only what says where and when a sync
ran (registry records, sync status, the grants version) may differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

from bench import xl_load
from common.index import keys
from common.redis_client import text
from common.redis_server import RedisClusterSet
from kubesim.gen.fleet import preset_fleet
from tests.support import sims, topology

TOPOLOGIES = ("cluster",)
WHEN_AND_WHERE = (keys.CLUSTERS, keys.VERSION)


def index(r: redis.Redis) -> dict[str, Any]:
    """Every key and its value, but for the sync status hashes and the registry (when and
    where a sync ran) and the time index's write times; streams by their entries' values (their ids' order within a write
    follows set iteration, which differs between processes)."""
    out: dict[str, Any] = {}
    for raw in r.scan_iter("*", count=1000):
        key = text(raw)
        kind = text(r.type(key))
        if key in WHEN_AND_WHERE or (key.startswith("fs:{c:") and key.endswith("}:sync")):
            continue
        if kind == "zset":  # the time index's untimed entries score when they were written
            out[key] = r.zrange(key, 0, -1, withscores=":tt:" not in key)
        elif kind == "hash":
            out[key] = r.hgetall(key)
        elif kind == "set":
            out[key] = sorted(r.smembers(key))
        elif kind == "stream":
            out[key] = sorted(sorted(f.items()) for _, f in r.xrange(key))
        else:
            out[key] = r.get(key)
    return out


def test_loaded_fleet_equals_the_collected_one(
    redis_url: str, redis_cluster: RedisClusterSet, tmp_path: Path
) -> None:
    r = topology.client(redis_url)
    with sims.start(preset_fleet("S"), tmp_path):
        sims.collect(sims.settings_for(tmp_path, redis_url))
    collected = index(r)
    statuses = {c: r.hget(keys.sync(c), "state") for c in preset_fleet("S").cluster_names}
    redis_cluster.flush()

    loaded = xl_load.load(redis_url, "S", processes=2)

    rows = sum(int(r.zcard(keys.rows(c))) for c in preset_fleet("S").cluster_names)
    assert loaded["clusters"] == 10 and loaded["rows"] == rows > 3000
    again = index(r)
    assert len(collected) > 500 and sorted(again) == sorted(collected)
    assert [k for k in collected if again[k] != collected[k]] == []
    assert {c: r.hget(keys.sync(c), "state") for c in statuses} == statuses
    r.close()
