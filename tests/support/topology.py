"""The index's topologies in tests: a module that sets `TOPOLOGIES = ("standalone", "cluster")`
runs each test using `redis_url` once per topology (tests/conftest.py), the cluster being a real
Redis Cluster of 3 primaries and 3 replicas on loopback, started once per session when first
asked for. These helpers build the client a URL asks for and read per-command counts summed over
the primaries.

`FLEETSCOPE_TEST_TOPOLOGY=cluster ./dev test` runs every test using `redis_url` on the cluster
instead (a development aid, not run by CI), Celery's broker (`broker_url`) staying on a
standalone server. The count guards that patch the standalone client's classes or read one
server's INFO are marked `standalone_only` and skipped there."""

from __future__ import annotations

from collections import Counter
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from common import redis_urls


def client(url: str, **kw: Any) -> redis.Redis:
    """A client of `url` (standalone or `redis+cluster://`) with redis-py's own options `kw`."""
    if redis_urls.check(url) == "cluster":
        nodes = [ClusterNode(h, p) for h, p in redis_urls.parse_cluster(url).nodes]
        return RedisCluster(startup_nodes=nodes, **kw)  # type: ignore[return-value]
    return redis.Redis.from_url(url, **kw)


def commandstats(r: Any) -> Counter[str]:
    """Calls per command (lower-case names) since the last reset, summed over every primary;
    without `replconf` (a replica's acknowledgements, once a second: not the client's calls)."""
    if isinstance(r, RedisCluster):
        per_node = r.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        stats = list(per_node.values())
    else:
        stats = [r.info("commandstats")]
    out: Counter[str] = Counter()
    for s in stats:
        for k, v in s.items():
            out[k.removeprefix("cmdstat_")] += int(v["calls"])
    out.pop("replconf", None)
    return out


def reset_stats(r: Any) -> None:
    if isinstance(r, RedisCluster):
        r.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
    else:
        r.config_resetstat()


def flushall(r: Any) -> None:
    """Empty the index: every primary of a cluster."""
    if isinstance(r, RedisCluster):
        r.flushall(target_nodes=RedisCluster.PRIMARIES)
    else:
        r.flushall()
