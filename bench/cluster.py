"""Benchmark: a fleet (default L) collected into a Redis Cluster of 3 primaries and into one
redis-server in the same run, then the query profiles served from each.

    ./dev bench cluster [--preset L] [--masters 3] [--seconds 6] [--profile PREFIX] [--no-doc]

Starts kubesim (warmed before timing), a private redis-server and a private Redis Cluster on
loopback (`--masters` primaries, no replicas: a replica would only copy the same writes on the
same two cores), and collects the fleet into each in turn with the real collector
(`fleetscope collect --once`, as bench.collection does). Reports per topology the collection's
wall time and objects/s; per shard its memory (INFO used_memory), keys (DBSIZE) and leaf
clusters (whose hash tag's slot it serves). kubesim is then stopped, and every list profile of
bench.query is measured against each topology, each against its own one-GET reference on the same
topology (a GET on a cluster goes through the cluster client): the table puts them side by side.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench import collection, query, report
from common import redis_client
from common.index import keys
from common.redis_server import RedisClusterSet, start_redis_cluster, start_redis_server


def shards(cluster: RedisClusterSet, leaf_clusters: list[str]) -> list[dict[str, Any]]:
    """Per primary: memory, keys and the leaf clusters whose slot it serves."""
    out = []
    for node in cluster.primaries():
        with cluster.client(node) as c:
            served = [
                (lo, hi)
                for lo, hi, by, *_ in c.execute_command("CLUSTER", "SLOTS")
                if int(by[1]) == node.port
            ]
            memory = int(c.info("memory")["used_memory"])
            keys_n = int(c.dbsize())
        slots = [redis.crc.key_slot(keys.rows(x).encode()) for x in leaf_clusters]
        mine = sum(1 for s in slots if any(lo <= s <= hi for lo, hi in served))
        out.append(
            {
                "port": node.port,
                "used_memory_mb": round(memory / 2**20),
                "keys": keys_n,
                "leaf_clusters": mine,
            }
        )
    return out


def collect_into(url: str, kube_dir: str, clusters: list[str], args: Any) -> dict[str, Any]:
    env = {
        **os.environ,
        "FLEETSCOPE_REDIS_URL": url,
        "FLEETSCOPE_CLUSTERS_DIR": kube_dir,
        "FLEETSCOPE_LOG_LEVEL": "WARNING",
    }
    wall = collection.collect(env, clusters, args.processes, args.parallel)
    r = redis_client.connect(url)
    try:
        objects = sum(int(r.zcard(keys.rows(c))) for c in clusters)
    finally:
        r.close()
    return {
        "wall_s": round(wall, 1),
        "objects": objects,
        "objects_per_s": round(objects / wall),
        "load_avg": report.load_average(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="L")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--masters", type=int, default=3)
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--parallel", type=int, default=4, help="threads per collector process")
    ap.add_argument("--seconds", type=float, default=6, help="per profile and topology")
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--slices", type=int, default=6)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--profile", dest="profiles", action="append", help="only these (prefix)")
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    args.churn = 0.0
    started = time.monotonic()
    standalone = start_redis_server()
    cluster = start_redis_cluster(masters=args.masters, replicas=0)
    urls = {"standalone": standalone.url, "cluster": cluster.url}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kube_dir = os.path.join(tmp, "clusters")
            sim = collection.start_kubesim(args.preset, args.seed, kube_dir)
            try:
                leaf = sorted(p.stem for p in Path(kube_dir).glob("*.yaml"))
                collected = {}
                for name, url in urls.items():
                    collected[name] = collect_into(url, kube_dir, leaf, args)
                    print(name, collected[name], flush=True)
            finally:
                sim.terminate()
                sim.wait(30)
        with redis.Redis.from_url(standalone.url) as r:
            standalone_mb = round(int(r.info("memory")["used_memory"]) / 2**20)
        per_shard = shards(cluster, leaf)
        print(per_shard, flush=True)
        results = {name: query.run(args, url) for name, url in urls.items()}
    finally:
        cluster.stop()
        standalone.stop()
    write(args, leaf, collected, standalone_mb, per_shard, results, time.monotonic() - started)


def write(
    args: Any,
    leaf: list[str],
    collected: dict[str, dict[str, Any]],
    standalone_mb: int,
    per_shard: list[dict[str, Any]],
    results: dict[str, list[dict[str, Any]]],
    secs: float,
) -> None:
    s, c = collected["standalone"], collected["cluster"]
    balance = ", ".join(
        f"{x['used_memory_mb']} MB / {x['keys']} keys / {x['leaf_clusters']} clusters"
        for x in per_shard
    )
    rows = [
        ("collection wall s", s["wall_s"], c["wall_s"], round(c["wall_s"] / s["wall_s"], 2)),
        (
            "objects/s",
            s["objects_per_s"],
            c["objects_per_s"],
            round(c["objects_per_s"] / s["objects_per_s"], 2),
        ),
        ("objects", s["objects"], c["objects"], ""),
        (
            "memory (used_memory)",
            f"{standalone_mb} MB",
            f"{sum(x['used_memory_mb'] for x in per_shard)} MB in all",
            "",
        ),
        ("per shard: memory / keys / leaf clusters", "", balance, ""),
    ]
    by_name = {r["profile"]: r for r in results["cluster"]}
    for res in results["standalone"]:
        other = by_name.get(res["profile"])
        if other is None:
            continue
        rows.append(
            (
                res["profile"],
                f"{res['rps']} req/s, p99 {res['p99_ms']} ms, {res.get('ratio_to_one_get', '')}x",
                f"{other['rps']} req/s, p99 {other['p99_ms']} ms, "
                f"{other.get('ratio_to_one_get', '')}x",
                round(other["rps"] / res["rps"], 2) if res["rps"] else "",
            )
        )
    report.record(
        f"cluster: fleet {args.preset} on a {args.masters}-primary Redis Cluster vs one server",
        {
            "benchmark": "cluster",
            "preset": args.preset,
            "masters": args.masters,
            "leaf_clusters": len(leaf),
            "collected": collected,
            "standalone_mb": standalone_mb,
            "shards": per_shard,
            "results": results,
            "run_s": round(secs, 1),
        },
        (
            "measure",
            "standalone",
            f"Redis Cluster ({args.masters} primaries)",
            "cluster / standalone",
        ),
        rows,
        notes=f"Collection: {args.processes} `fleetscope collect --once` processes x "
        f"{args.parallel} threads from kubesim, into each topology in turn. Profiles: "
        f"{args.connections} connections, {args.seconds:g} s each in {args.slices} slices "
        "alternating with the one-GET reference on the same topology (`Nx` = ratio to it); "
        "every Redis node, kubesim and the service share the machine's 2 cores.",
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
