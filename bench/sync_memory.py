"""Benchmark (issue #41): what a sync's list and build make alive at once, in one process.

    ./dev bench sync_memory [--clusters 4] [--namespaces 2000] [--rounds 4] [--out sync_memory.json]

Starts `fleetscope kubesim` with `--clusters` clusters of `--namespaces` app namespaces (2,000 is
fleet L's shape: ~7,800 rows a cluster), then, in this process, lists and builds every
cluster's rows `--rounds` times over (`collector.sync.list_cluster` then `build`: the work of a
Celery child's object sync, without Redis). Reports the CPU seconds of this process, the most
allocated blocks seen (right after each list and each build: the swing a sync adds on top of
what the process holds anyway), pymalloc's arenas after each round (after a full collection:
what the process keeps), and the peak RSS. A child's arenas are set by the largest swing it has
seen (docs/operations.md, the thirty-second L soak); run it from two trees to compare.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from bench.collection import fleet_kubesim
from bench.heaptrace import heapmaps
from collector import sync
from common.kinds.registry import builtin_registry
from common.leaf.client import LeafClient
from common.leaf.registry import load_dir


def measure(kube_dir: str, rounds: int) -> dict[str, Any]:
    configs = load_dir(kube_dir)
    clients = {name: LeafClient(configs[name]) for name in sorted(configs)}
    registry = builtin_registry()
    gc.collect()
    base_blocks = sys.getallocatedblocks()
    peak = base_blocks
    out: list[dict[str, Any]] = []
    cpu0 = time.process_time()
    try:
        for i in range(rounds):
            objects = 0
            for name, client in clients.items():
                listed = sync.list_cluster(client, registry)
                peak = max(peak, sys.getallocatedblocks())
                objects += listed.count
                members = sync.build(name, listed)
                peak = max(peak, sys.getallocatedblocks())
                del listed, members
            gc.collect()
            out.append(
                {
                    "round": i + 1,
                    "objects": objects,
                    "arenas": heapmaps.pymalloc().get("arenas"),
                    "blocks": sys.getallocatedblocks(),
                    "cpu_s": round(time.process_time() - cpu0, 2),
                }
            )
    finally:
        for client in clients.values():
            client.close()
    return {
        "cpu_s": round(time.process_time() - cpu0, 2),
        "blocks_before": base_blocks,
        "peak_blocks": peak,
        "swing_blocks": peak - base_blocks,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rounds": out,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clusters", type=int, default=4)
    p.add_argument("--namespaces", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--out", default="sync_memory.json")
    args = p.parse_args(argv)
    with fleet_kubesim(args.seed, args.clusters, args.namespaces) as kube_dir:
        result = measure(kube_dir, args.rounds)
    result.update(clusters=args.clusters, namespaces=args.namespaces)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
