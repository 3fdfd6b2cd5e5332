"""Benchmark (issue #38): what one watch write costs the watcher's writer, per row it changes.

    ./dev bench write_cost [--preset M] [--seconds 8] [--per-tick 50] [--out write_cost.json]

Loads the preset fleet into a private redis-server (bench/fleetload.py), then writes from this
one process, with nothing else running, as a watcher replica does (`store_events.apply_changes`,
one write per cluster touched): first status-unchanged updates (bench.churn's: `--per-tick` rows
across random clusters get a new message, as a Flux object's `Ready` message does on every
reconcile), then status transitions (a random row turns unhealthy or healthy again), each for
`--seconds`. Reports, per kind of write, the rows changed a second, the process CPU per row
(the row's decode and encode included: what a watcher pays besides its event's parse), and the
Redis commands per write by name (INFO commandstats). A reader of a churned fleet pays none of
it; the machine running the writers does (on one 2-core machine: the reads' CPU).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from bench import query
from bench.churn import transition, unchanged_updates
from bench.fleetload import load_fleet
from common import redis_client
from common.index import keys
from common.redis_client import text
from common.redis_server import start_redis_server


def commandstats(r: redis.Redis) -> Counter[str]:
    """bench.query's count of calls per command, without INFO's, CONFIG's and the handshake's."""
    out = Counter(query.commandstats(r))
    for k in ("info", "config|resetstat", "hello", "ping"):
        out.pop(k, None)
    return out


def measure(r: redis.Redis, kind: str, seconds: float, per_tick: int, seed: int) -> dict[str, Any]:
    """`kind` writes ("updates" or "transitions") for `seconds`: rows changed, CPU and commands."""
    clusters = sorted(text(c) for c in r.hkeys(keys.CLUSTERS))
    rnd = random.Random(seed)
    query.reset_stats(r)
    done = 0
    cpu0, t0 = time.process_time(), time.monotonic()
    while time.monotonic() - t0 < seconds:
        if kind == "updates":
            done += unchanged_updates(r, clusters, per_tick, rnd)
        else:
            transition(r, rnd.choice(clusters))
            done += 1
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    cmds = commandstats(r)
    writes = cmds.get("exec", 0)
    return {
        "rows": done,
        "writes": writes,
        "rows_per_s": round(done / wall, 1),
        "cpu_ms_per_row": round(cpu * 1e3 / done, 3) if done else None,
        "cpu_share_of_a_core": round(cpu / wall, 2),
        "redis_commands_per_write": {
            k: round(v / writes, 2) for k, v in sorted(cmds.items()) if writes
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="M")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--per-tick", type=int, default=50, help="rows a batch of updates changes")
    p.add_argument("--out", default="write_cost.json")
    args = p.parse_args(argv)
    server = start_redis_server()
    try:
        loaded = load_fleet(server.url, args.preset, args.seed)
        r = redis_client.connect(server.url)
        result: dict[str, Any] = {"benchmark": "write_cost", "preset": args.preset, **loaded}
        for i, kind in enumerate(("updates", "transitions")):
            result[kind] = measure(r, kind, args.seconds, args.per_tick, args.seed + i)
    finally:
        server.stop()
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
