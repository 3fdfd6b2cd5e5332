"""Benchmark: a fleet (default L) in a Redis Cluster of 3 primaries and in one redis-server in the
same run, then the query profiles served from each; fleet XL on the cluster alone; and how the
profiles grow with the number of leaf clusters (`--presets`).

    ./dev bench cluster [--preset L] [--masters 3] [--seconds 6] [--profile PREFIX] [--no-doc]
    ./dev bench cluster --preset XL          # the cluster only, loaded by bench.xl_load
    ./dev bench cluster --presets M,L,XL [--profile PREFIX]   # growth, on the cluster

Starts a private redis-server and a private Redis Cluster on loopback (`--masters` primaries,
no replicas: a replica would only copy the same writes on the same two cores) and loads the fleet
into each in turn: by default (`--loader collector`) kubesim (warmed before timing) serves it
and the real collector collects it (`fleetscope collect --once`, as bench.collection does);
`--loader store` (the default at XL, where kubesim would not fit in memory beside the rest:
bench/xl_load.py) generates one leaf cluster at a time and runs the collector's own sync on it
without HTTP. Reports per topology the load's wall time and objects/s; per shard its memory
(INFO used_memory), keys (DBSIZE) and leaf clusters (whose hash tag's slot it serves). Every list
profile of bench.query is then measured against each topology, each against its own one-GET
reference on the same topology (a GET on a cluster goes through the cluster client), and the
slowest profile (lowest ratio to its one-GET) is asked once right after each of a few writes
(a row transition through the writer on a random cluster: every memo of that cluster is then
stale): its first page after a write, against the same page asked again.

`--presets M,L,XL` loads each fleet in turn into the same (emptied) cluster with the store loader
and runs the chosen profiles on each: per profile, its ratio to one-GET and Redis commands per
request at each size, and their growth from the first fleet to the last (a profile merging over
every visible cluster grows with their number).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
import requests

from bench import churn, collection, query, report, xl_load
from common import redis_client
from common.index import keys
from common.redis_server import RedisClusterSet, start_redis_cluster, start_redis_server
from kubesim.gen.fleet import preset_fleet


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
    return loaded(url, clusters, wall)


def store_into(url: str, preset: str, args: Any) -> dict[str, Any]:
    """The fleet loaded by bench.xl_load (the collector's sync, no HTTP) into `url`."""
    done = xl_load.load(url, preset, args.seed, args.processes)
    clusters = preset_fleet(preset, args.seed).cluster_names
    return loaded(url, clusters, done["load_s"])


def loaded(url: str, clusters: list[str], wall: float) -> dict[str, Any]:
    r = redis_client.connect(url)
    try:
        objects = sum(int(r.zcard(keys.rows(c))) for c in clusters)
    finally:
        r.close()
    return {
        "wall_s": round(wall, 1),
        "objects": objects,
        "objects_per_s": round(objects / max(wall, 1e-9)),
        "load_avg": report.load_average(),
    }


def load_all(args: Any, urls: dict[str, str]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Load the fleet into every topology in turn; (its leaf clusters, what each load took)."""
    collected: dict[str, dict[str, Any]] = {}
    if args.loader == "store":
        leaf = preset_fleet(args.preset, args.seed).cluster_names
        for name, url in urls.items():
            collected[name] = store_into(url, args.preset, args)
            print(name, collected[name], flush=True)
        return leaf, collected
    with tempfile.TemporaryDirectory() as tmp:
        kube_dir = os.path.join(tmp, "clusters")
        sim = collection.start_kubesim(args.preset, args.seed, kube_dir)
        try:
            leaf = sorted(p.stem for p in Path(kube_dir).glob("*.yaml"))
            for name, url in urls.items():
                collected[name] = collect_into(url, kube_dir, leaf, args)
                print(name, collected[name], flush=True)
        finally:
            sim.terminate()
            sim.wait(30)
    return leaf, collected


def measure(args: Any, url: str) -> dict[str, Any]:
    """Every chosen profile against the one-GET reference (bench.query), then the slowest
    one's first page after a write."""
    with query.served(url) as (r, base, ref):
        token = query.deep_token(base)
        walked = query.profiles(token, query.related_object(base), query.groups_token(base))
        results = query.run_profiles(r, base, ref, walked, args)
        measured = [x for x in results if "ratio_to_one_get" in x]
        if not measured:
            return {"results": results, "after_write": None}
        slowest = min(measured, key=lambda x: x["ratio_to_one_get"])
        profile = next(p for p in walked if p.name == slowest["profile"])
        after = after_write(r, base, profile, args.writes)
    print(after, flush=True)
    return {"results": results, "after_write": after}


def after_write(r: Any, base: str, p: query.Profile, writes: int) -> dict[str, Any]:
    """`p`'s first request right after each of `writes` row transitions (each on a random
    cluster), and the same request asked again at once, in ms."""
    clusters = sorted(redis_client.text(c) for c in r.hkeys(keys.CLUSTERS))
    p = p.renewed(base)  # a group walk's next page: a walk begun now, not at the run's start
    url, headers = p.urls(base)[0], p.headers()
    rnd = random.Random(1)
    first: list[float] = []
    again: list[float] = []
    session = requests.Session()
    try:
        session.get(url, headers=headers, timeout=60).raise_for_status()
        for _ in range(writes):
            churn.transition(r, rnd.choice(clusters))
            for out in (first, again):
                t = time.perf_counter()
                session.get(url, headers=headers, timeout=60).raise_for_status()
                out.append((time.perf_counter() - t) * 1e3)
    except requests.RequestException as e:  # recorded: the run's other results stand
        return {"profile": p.name, "writes": writes, "failed": str(e)[:300]}
    return {
        "profile": p.name,
        "writes": writes,
        "first_page_ms_median": round(statistics.median(first), 1),
        "first_page_ms_max": round(max(first), 1),
        "again_ms_median": round(statistics.median(again), 1),
    }


def _after_cell(aw: dict[str, Any]) -> str:
    if "failed" in aw:
        return f"failed: {aw['failed']}"
    return (
        f"{aw['first_page_ms_median']} ms median, {aw['first_page_ms_max']} ms max "
        f"(again: {aw['again_ms_median']} ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="L")
    ap.add_argument("--presets", default="", help="e.g. M,L,XL: the profiles' growth")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--masters", type=int, default=3)
    ap.add_argument("--loader", choices=("collector", "store"), help="default: store at XL")
    ap.add_argument("--cluster-only", action="store_true", help="default at XL")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--parallel", type=int, default=4, help="threads per collector process")
    ap.add_argument("--seconds", type=float, default=6, help="per profile and topology")
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--slices", type=int, default=6)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--writes", type=int, default=5, help="first pages after a write")
    ap.add_argument("--profile", dest="profiles", action="append", help="only these (prefix)")
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    args.churn, args.churn_rows, args.churn_model = 0.0, False, ""  # a still fleet
    xl = args.preset.upper() == "XL"
    args.loader = args.loader or ("store" if xl or args.presets else "collector")
    if args.presets:
        growth(args)
        return
    started = time.monotonic()
    standalone = None if args.cluster_only or xl else start_redis_server()
    cluster = start_redis_cluster(masters=args.masters, replicas=0)
    urls = {"standalone": standalone.url} if standalone else {}
    urls["cluster"] = cluster.url
    try:
        leaf, collected = load_all(args, urls)
        standalone_mb = memory_mb(standalone.url) if standalone else None
        per_shard = shards(cluster, leaf)
        print(per_shard, flush=True)
        results = {name: measure(args, url) for name, url in urls.items()}
    finally:
        cluster.stop()
        if standalone:
            standalone.stop()
    write(args, leaf, collected, standalone_mb, per_shard, results, time.monotonic() - started)


def memory_mb(url: str) -> int:
    with redis.Redis.from_url(url) as r:
        return round(int(r.info("memory")["used_memory"]) / 2**20)


def growth(args: Any) -> None:
    """The chosen profiles at each of `args.presets` on the same (emptied) cluster."""
    presets = [p.strip().upper() for p in args.presets.split(",") if p.strip()]
    started = time.monotonic()
    cluster = start_redis_cluster(masters=args.masters, replicas=0)
    runs: dict[str, dict[str, Any]] = {}
    try:
        for preset in presets:
            cluster.flush()
            load = store_into(cluster.url, preset, args)
            leaf = preset_fleet(preset, args.seed).cluster_names
            per_shard = shards(cluster, leaf)
            runs[preset] = {"load": load, "shards": per_shard, **measure(args, cluster.url)}
            print(preset, load, per_shard, flush=True)
    finally:
        cluster.stop()
    write_growth(args, presets, runs, time.monotonic() - started)


def write_growth(
    args: Any, presets: list[str], runs: dict[str, dict[str, Any]], secs: float
) -> None:
    first, last = presets[0], presets[-1]
    by = {p: {x["profile"]: x for x in runs[p]["results"]} for p in presets}
    rows: list[tuple[Any, ...]] = [
        ("rows", *(runs[p]["load"]["objects"] for p in presets), ""),
        (
            "memory (used_memory, all shards)",
            *(f"{sum(x['used_memory_mb'] for x in runs[p]['shards'])} MB" for p in presets),
            "",
        ),
    ]
    for name, res in by[first].items():
        if "ratio_to_one_get" not in res or not all(
            "ratio_to_one_get" in by[p].get(name, {}) for p in presets
        ):
            continue
        cells = [
            f"{by[p][name]['ratio_to_one_get']}x, p99 {by[p][name]['p99_ms']} ms, "
            f"{by[p][name]['redis_cmds_per_req']} cmds/req"
            for p in presets
        ]
        a, b = res["redis_cmds_per_req"], by[last][name]["redis_cmds_per_req"]
        ratio = by[last][name]["ratio_to_one_get"] / max(res["ratio_to_one_get"], 1e-9)
        rows.append((name, *cells, f"cmds x{round(b / a, 2) if a else ''}, ratio x{ratio:.2f}"))
    for p in presets:
        aw = runs[p]["after_write"]
        if aw:
            rows.append(
                (
                    f"{p}: first page after a write ({aw['profile']})",
                    *(_after_cell(aw) if q == p else "" for q in presets),
                    "",
                )
            )
    report.record(
        f"cluster growth: fleets {', '.join(presets)} on a {args.masters}-primary Redis Cluster",
        {"benchmark": "cluster-growth", "presets": presets, "runs": runs, "run_s": round(secs, 1)},
        ("measure", *presets, f"{last} / {first}"),
        rows,
        notes=f"Each fleet loaded by bench.xl_load into the emptied cluster; profiles: "
        f"{args.connections} connections, {args.seconds:g} s each in {args.slices} slices "
        "alternating with the one-GET reference (`Nx` = ratio to it); every Redis node and the "
        "service share the machine's cores.",
        write_doc=not args.no_doc,
    )


def write(
    args: Any,
    leaf: list[str],
    collected: dict[str, dict[str, Any]],
    standalone_mb: int | None,
    per_shard: list[dict[str, Any]],
    measured: dict[str, dict[str, Any]],
    secs: float,
) -> None:
    sides = list(collected)  # ["standalone", "cluster"] or ["cluster"]
    both = len(sides) == 2
    balance = ", ".join(
        f"{x['used_memory_mb']} MB / {x['keys']} keys / {x['leaf_clusters']} clusters"
        for x in per_shard
    )
    memory = {"standalone": f"{standalone_mb} MB", "cluster": ""}
    memory["cluster"] = f"{sum(x['used_memory_mb'] for x in per_shard)} MB in all"
    rows = [
        _row("load wall s", [collected[s]["wall_s"] for s in sides], both),
        _row("objects/s", [collected[s]["objects_per_s"] for s in sides], both),
        ("objects", *(collected[s]["objects"] for s in sides), *([""] if both else [])),
        ("memory (used_memory)", *(memory[s] for s in sides), *([""] if both else [])),
        ("per shard: memory / keys / leaf clusters", *([""] if both else []), balance),
    ]
    by_side = {s: {r["profile"]: r for r in measured[s]["results"]} for s in sides}
    for name, first in by_side[sides[0]].items():
        if not all(name in by_side[s] and "rps" in by_side[s][name] for s in sides):
            failed = (by_side[s].get(name, {}).get("failed", "") for s in sides)
            rows.append((name, *failed, *([""] if both else [])))
            continue
        cells = [_profile_cell(by_side[s][name]) for s in sides]
        last = by_side[sides[-1]][name]
        change = [round(last["rps"] / first["rps"], 2) if first["rps"] else ""] if both else []
        rows.append((name, *cells, *change))
    for s in sides:
        aw = measured[s]["after_write"]
        if aw:
            cell = f"{aw['profile']}: {_after_cell(aw)}"
            cells = [cell if x == s else "" for x in sides]
            rows.append(
                (f"first page after a write ({aw['writes']} writes)", *cells, *([""] * both))
            )
    names = {"standalone": "standalone", "cluster": f"Redis Cluster ({args.masters} primaries)"}
    title = f"cluster: fleet {args.preset} on a {args.masters}-primary Redis Cluster"
    report.record(
        title + (" vs one server" if both else ""),
        {
            "benchmark": "cluster",
            "preset": args.preset,
            "masters": args.masters,
            "loader": args.loader,
            "leaf_clusters": len(leaf),
            "collected": collected,
            "standalone_mb": standalone_mb,
            "shards": per_shard,
            "results": {s: measured[s]["results"] for s in sides},
            "after_write": {s: measured[s]["after_write"] for s in sides},
            "run_s": round(secs, 1),
        },
        ("measure", *(names[s] for s in sides), *(["cluster / standalone"] if both else [])),
        rows,
        notes=f"{_load_note(args)} Profiles: {args.connections} connections, {args.seconds:g} s "
        f"each in {args.slices} slices alternating with the one-GET reference on the same "
        "topology (`Nx` = ratio to it); every Redis node and the service share the machine's "
        "cores.",
        write_doc=not args.no_doc,
    )


def _row(name: str, values: list[Any], both: bool) -> tuple[Any, ...]:
    if not both:
        return (name, *values)
    return (name, *values, round(values[1] / values[0], 2) if values[0] else "")


def _profile_cell(res: dict[str, Any]) -> str:
    """req/s, p99, ratio to one-GET and, for a profile, issue #22's verdict (>= 0.5x and p99
    within 2x the one-GET p99)."""
    cell = f"{res['rps']} req/s, p99 {res['p99_ms']} ms, {res.get('ratio_to_one_get', '')}x"
    met = query.verdict(res)
    return f"{cell} (bar {res['p99_bar_ms']} ms): {met}" if met else cell


def _load_note(args: Any) -> str:
    if args.loader == "store":
        return (
            f"Load: bench.xl_load ({args.processes} processes, one leaf cluster at a time "
            "through the collector's sync, no HTTP)."
        )
    return (
        f"Load: {args.processes} `fleetscope collect --once` processes x {args.parallel} "
        "threads from kubesim, into each topology in turn."
    )


if __name__ == "__main__":
    main()
