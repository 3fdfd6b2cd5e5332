"""Benchmark (issue #38): where a full object sync's CPU goes, by stage, at fleet L's shape.

    ./dev bench sync_profile [--clusters 4] [--namespaces 2000] [--out sync_profile.json]

Starts `fleetscope kubesim` with `--clusters` clusters of `--namespaces` app namespaces (2,000 is
fleet L's shape: ~7,800 objects a cluster) and a private redis-server, syncs the first cluster
outside the measurement (imports, connections, caches), then runs `collector.sync.run` on each
other cluster (a first sync: every row built and written, as in a full collection) under
cProfile, through the product's Redis client and with the garbage collector tuned as the
collector's processes tune it (collector.gc_tuning). Reports the process CPU per object (the
profiler's overhead included: compare stages, not totals, with `bench collection`), each
stage's share of the profiled time (the cumulative time of the functions that are that stage:
listing and parsing the leaves' JSON, the status rules, labels, relations, the Istio checks,
the writer and, inside it, packing the commands) and the Redis commands per object by name
(INFO commandstats).

cProfile sees Python functions only, not the C extensions the build compiles the row builder's
modules into (common.native): the profile runs on the plain Python build (`FLEETSCOPE_PURE=1`,
in a child process when this one already runs the extensions), so its shares describe that
code; `bench collection` measures the build as deployed.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.collection import fleet_kubesim
from collector import gc_tuning, sync
from common import native, redis_client
from common.index import rows
from common.kinds.registry import builtin_registry
from common.leaf.client import LeafClient
from common.leaf.registry import load_dir
from common.redis_server import start_redis_server

STAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "list (HTTP, TLS, JSON)": (("common/leaf/client.py", "_pages"),),
    "parse JSON": (("common/leaf/client.py", "loads"),),
    "rows (all of the row building)": (("common/index/rows.py", "member"),),
    "status rules": (("common/kinds/status.py", "evaluate"),),
    "labels": (("common/index/label_field.py", "of_object"),),
    "relations": (("common/kinds/relations.py", "extract"),),
    "Istio checks and Service edges": (("collector/mesh.py", "members"),),
    "writer (graph, diff, tables, Redis)": (("common/index/write/store.py", "replace_rows"),),
    "redis-py packing commands": (("redis/connection.py", "pack_commands"),),
}
"""Stage -> the (file suffix, function) whose cumulative time is the stage. They nest (rows
hold status, labels and relations; the Istio checks build rows too; the writer holds the
packing), so the shares do not add up to 100 %."""


def stage_times(stats: pstats.Stats) -> dict[str, float]:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    out = dict.fromkeys(STAGES, 0.0)
    for (path, _, func), (_, _, _, cumulative, _) in raw.items():
        for stage, funcs in STAGES.items():
            if any(path.endswith(suffix) and func == name for suffix, name in funcs):
                out[stage] += cumulative
    return out


def measure(kube_dir: str, redis_url: str) -> dict[str, Any]:
    configs = load_dir(kube_dir)
    names = sorted(configs)
    clients = {name: LeafClient(configs[name]) for name in names}
    registry = builtin_registry()
    r = redis_client.connect(redis_url)  # the product's client (its command packer)
    gc_tuning.tune()  # as `fleetscope collect` and the workers run (else GC pauses land anywhere)
    try:
        sync.run(r, sync.Work.OBJECTS, clients[names[0]], registry)  # warm, not measured
        r.config_resetstat()
        prof = cProfile.Profile()
        objects = 0
        cpu = time.process_time()
        prof.enable()
        for name in names[1:]:
            objects += sync.run(r, sync.Work.OBJECTS, clients[name], registry).objects
        prof.disable()
        cpu = time.process_time() - cpu
        commands = {
            k.removeprefix("cmdstat_"): v["calls"] for k, v in r.info("commandstats").items()
        }
    finally:
        for client in clients.values():
            client.close()
        r.close()
    stats = pstats.Stats(prof)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    stages = stage_times(stats)
    return {
        "clusters_measured": len(names) - 1,
        "objects": objects,
        "cpu_us_per_object_profiled": round(cpu / max(objects, 1) * 1e6, 1),
        "stage_share_pct": {
            k: round(100 * v / total, 1) if total else 0.0 for k, v in stages.items()
        },
        "stage_us_per_object_profiled": {
            k: round(v / max(objects, 1) * 1e6, 1) for k, v in stages.items()
        },
        "redis_commands_per_object": {
            k: round(v / max(objects, 1), 3)
            for k, v in sorted(commands.items(), key=lambda kv: -kv[1])
            if k not in ("config|resetstat", "config")
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clusters", type=int, default=4, help="the first is synced unmeasured")
    p.add_argument("--namespaces", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="sync_profile.json")
    args = p.parse_args(argv)
    if args.clusters < 2:
        p.error("--clusters must be at least 2 (the first is synced unmeasured)")
    if native.compiled(rows):  # the profiler would not see into the row builder
        env = {**os.environ, native.PURE_ENV: "1"}
        argv = sys.argv[1:] if argv is None else argv
        root = Path(__file__).resolve().parent.parent
        command = [sys.executable, "-m", "bench.sync_profile", *argv]
        return subprocess.run(command, env=env, cwd=root, check=False).returncode
    with fleet_kubesim(args.seed, args.clusters, args.namespaces) as kube_dir:
        server = start_redis_server()
        try:
            result = measure(kube_dir, server.url)
        finally:
            server.stop()
    result.update(clusters=args.clusters, namespaces=args.namespaces)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
