"""Benchmark: how query p99 and full-sync time grow from fleet S to M to L.

    ./dev bench growth [--presets S,M,L] [--seconds 5]

Per preset: the query benchmark's admin, team-member and status=unhealthy profiles (bench.query:
the fleet loaded into a private Redis, gunicorn with the production defaults, wrk at 16
connections), then a full collection from kubesim (bench.collection). Slow at L (~10 min).
"""

from __future__ import annotations

import argparse
import os
import time
from types import SimpleNamespace
from typing import Any

from bench import collection, query, report
from bench.fleetload import load_fleet
from common.redis_server import start_redis_server

PROFILES = ["cluster admin", "team member (~1% of namespaces)", "status=unhealthy (admin)"]


def query_p99(preset: str, seed: int, seconds: float) -> dict[str, Any]:
    server = start_redis_server()
    try:
        loaded = load_fleet(server.url, preset, seed)
        args = SimpleNamespace(profiles=PROFILES, seconds=seconds, warmup=2, connections=16)
        results = query.run(args, server.url)
    finally:
        server.stop()
    return {**loaded, "queries": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--presets", default="S,M,L")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    out, rows = [], []
    for preset in args.presets.split(","):
        started = time.monotonic()
        q = query_p99(preset, args.seed, args.seconds)
        sync_args = SimpleNamespace(processes=os.cpu_count() or 1, parallel=4)
        c = collection.run(preset, args.seed, sync_args)
        out.append({"preset": preset, **q, "collection": c})
        by = {r["profile"]: r for r in q["queries"]}
        p99 = [next(v for k, v in by.items() if k.startswith(p))["p99_ms"] for p in PROFILES]
        rps = [next(v for k, v in by.items() if k.startswith(p))["rps"] for p in PROFILES]
        one_get = by["reference: one Redis GET (best run)"]
        rows.append(
            (
                preset,
                q["clusters"],
                q["rows"],
                *(f"{a} / {b:.0f}" for a, b in zip(p99, rps, strict=True)),
                f"{one_get['p99_ms']} / {one_get['rps']:.0f}",
                c["full"]["wall_s"],
                c["resync"]["wall_s"],
                report.load_average().split()[0],
            )
        )
        print(rows[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    report.record(
        "growth: query p99 and sync time by fleet size",
        {"benchmark": "growth", "results": out},
        (
            "fleet",
            "clusters",
            "rows",
            "admin p99 ms / req/s",
            "team member p99 ms / req/s",
            "unhealthy p99 ms / req/s",
            "one-GET p99 ms / req/s",
            "full sync s",
            "no-change re-sync s",
            "load 1m",
        ),
        rows,
        notes=f"wrk at 16 connections, {args.seconds:g} s per profile; collection with "
        f"{os.cpu_count()} processes x 4 threads.",
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
