"""Benchmark: what a watcher replica keeps of a take-over (issue #41's RSS invariant).

    ./dev bench takeover_memory [--preset M] [--rounds 2] [--out takeover.json]

kubesim serves the preset in a process of its own and a private redis-server holds the index.
Replica `b` runs in this process (so its Python heap can be read), replica `a` as `fleetscope
watch`. Once each holds its share, `a` is killed (SIGKILL) and `b` takes every cluster over;
then `a` is started again and `b` hands its share back. Each round reports how soon `b` held
each of `a`'s clusters and had stored its grants from its own RBAC lists (`grants_stored_s`:
until then a revocation on that cluster waits), and `b`'s RSS, by
mapping kind (common heap, other anonymous mappings: Python's arenas, thread stacks, glibc's
other arenas; files), and pymalloc's arenas and free space: before the kill, while holding
every cluster, and after the hand-back (each after a full collection and a heap trim, as the
replica runs them after dropping watches), with the objects made during the take-over still
alive after it, by type. A leak grows `after` round over round; a high-water mark of the
allocator does not (the second take-over reuses what the first left).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.collection import start_kubesim
from bench.heaptrace import heapmaps
from collector.clusters import ClusterSource
from collector.watch.replica import WatchReplica, release_memory
from common.index import keys
from common.kinds.registry import builtin_registry
from common.leaf import registry
from common.redis_client import connect
from common.redis_server import start_redis_server
from common.settings import Settings

LEASE_TTL_S = 5.0


def owners(r: Any, clusters: list[str]) -> dict[str, str]:
    """cluster -> the replica name holding its lease ("" when none)."""
    values = r.mget([keys.lease(c) for c in clusters])
    return {
        c: (v.decode().split(":")[0] if v else "") for c, v in zip(clusters, values, strict=True)
    }


def wait(cond: Callable[[], bool], timeout_s: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise RuntimeError(f"timed out after {timeout_s} s: {what}")
        time.sleep(0.5)
    return round(time.monotonic() - t0, 1)


def measure() -> dict[str, Any]:
    """This process's memory after a full collection and a heap trim (release_memory)."""
    release_memory()
    py = heapmaps.pymalloc()
    return {
        "rss_mib": round(sum(heapmaps.smaps_kib().values()) / 1024, 1),
        "smaps_mib": {k: round(v / 1024, 1) for k, v in heapmaps.smaps_kib().items()},
        "arenas": py.get("arenas", 0),
        "pymalloc_live_mib": round(py.get("live", 0) / 2**20, 1),
        "pymalloc_free_mib": round(
            (py.get("free_in_pools", 0) + py.get("free_pools", 0)) / 2**20, 1
        ),
        "gc_objects": len(gc.get_objects()),
    }


def holders(objs: list[Any], listed: list[Any], depth: int = 8, most: int = 50) -> dict[str, int]:
    """Why objects are still alive: for up to `most` of `objs`, the chain of the types of their
    first referrer, its first referrer and so on (`depth` steps; the lists this benchmark made
    and this function's own frames and temporaries left out), counted by chain."""
    skip = {id(objs), id(listed)}
    chains: collections.Counter[str] = collections.Counter()
    for i in range(min(most, len(objs))):
        cur = objs[i]
        chain = [type(cur).__name__]
        for _ in range(depth):
            refs = gc.get_referrers(cur)
            skip.add(id(refs))
            found = None
            for x in refs:
                if id(x) in skip or (
                    isinstance(x, types.FrameType) and x.f_code.co_name in ("holders", "run")
                ):
                    continue  # ours
                found = x
                break
            del refs
            if found is None:
                break
            cur = found
            name = type(cur).__name__
            if isinstance(cur, types.FrameType):  # where it waits: the code it runs
                name = f"frame({cur.f_code.co_name}:{cur.f_lineno})"
            if isinstance(cur, dict):  # whose attributes: the owner's type where known
                owners = gc.get_referrers(cur)
                skip.add(id(owners))
                name = f"dict({'/'.join(sorted({type(x).__name__ for x in owners})[:3])})"
                del owners
            chain.append(name)
        chains[" <- ".join(chain)] += 1
    return dict(chains.most_common(10))


def grants_times(
    replica: WatchReplica, clusters: list[str], since: float, timeout_s: float
) -> dict[str, Any]:
    """For the clusters `replica` took over: seconds from `since` (the kill) to the moment it
    held the lease and to the moment it had stored the cluster's grants from its own RBAC lists
    (until then a revocation there waits), polled every 50 ms while the take-over runs."""
    taken: dict[str, float] = {}
    stored: dict[str, float] = {}
    deadline = since + timeout_s
    while len(stored) < len(clusters) and time.monotonic() < deadline:
        now = time.monotonic() - since
        for c in clusters:
            w = replica.watches.get(c)
            if w is not None:
                taken.setdefault(c, now)
                if w.rbac.stored and c not in stored:
                    stored[c] = now
        time.sleep(0.05)

    def spread(values: list[float]) -> dict[str, float]:
        v = sorted(values)
        if not v:
            return {}
        return {"p50": round(v[len(v) // 2], 2), "max": round(v[-1], 2), "n": len(v)}

    lag = [stored[c] - taken[c] for c in stored if c in taken]
    return {
        "taken_after_kill": spread(list(taken.values())),
        "stored_after_kill": spread(list(stored.values())),
        "stored_after_taken": spread(lag),
        "never_stored": len(clusters) - len(stored),
    }


def spawn(settings: Settings, name: str, log: Path) -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        FLEETSCOPE_REDIS_URL=settings.redis_url,
        FLEETSCOPE_CLUSTERS_DIR=settings.clusters_dir,
        FLEETSCOPE_WATCH_LEASE_TTL_S=str(LEASE_TTL_S),
        FLEETSCOPE_WATCH_METRICS_PORT="0",
        FLEETSCOPE_LOG_LEVEL="WARNING",
    )
    cmd = [sys.executable, "-m", "fleetscope", "watch", "--name", name]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="fleetscope-takeover-"))
    kube_dir = str(tmp / "clusters")
    sim = start_kubesim(args.preset, args.seed, kube_dir)
    server = start_redis_server()
    a: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        settings = Settings(
            redis_url=server.url,
            clusters_dir=kube_dir,
            watch_lease_ttl_s=LEASE_TTL_S,
            log_level="WARNING",
        )
        r = connect(server.url, 10)
        registry.reconcile(r, registry.load_cluster_configs(settings))
        clusters = sorted(registry.load_cluster_configs(settings))
        replica = WatchReplica(settings, r, builtin_registry(), ClusterSource(settings), "b")
        thread = threading.Thread(target=replica.run, args=(stop,), daemon=True)
        thread.start()
        a = spawn(settings, "a", tmp / "a.log")
        half = len(clusters) // 2

        def shared() -> bool:
            held = collections.Counter(owners(r, clusters).values())
            mine = [w for w in replica.watches.values() if w.built]
            return held["a"] >= half and held["b"] >= half and len(mine) == held["b"]

        def alone() -> bool:
            built = sum(1 for w in replica.watches.values() if w.built)
            return set(owners(r, clusters).values()) == {"b"} and built == len(clusters)

        first_s = wait(shared, args.timeout_s, "each replica holds its share")
        time.sleep(args.settle_s)
        rounds = []
        for _ in range(args.rounds):
            before = measure()
            seen = {id(o) for o in gc.get_objects()}
            theirs = [c for c, holder in owners(r, clusters).items() if holder == "a"]
            a.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            a.wait(10)
            grants = grants_times(replica, theirs, killed, args.timeout_s)
            wait(alone, args.timeout_s, "b took every cluster over")
            took_s = round(time.monotonic() - killed, 2)  # from the kill, as before
            time.sleep(args.settle_s)
            holding = measure()
            a = spawn(settings, "a", tmp / "a.log")
            gave_s = wait(shared, args.timeout_s, "b handed a's share back")
            wait(lambda: replica._unretired == 0, args.timeout_s, "dropped watches retired")
            time.sleep(args.settle_s)
            after = measure()
            new = [o for o in gc.get_objects() if id(o) not in seen]
            kept = collections.Counter(type(o).__name__ for o in new)
            why = holders([o for o in new if type(o).__name__ == args.why], new) if args.why else {}
            del seen, new
            rounds.append(
                {
                    "before": before,
                    "holding_all": holding,
                    "after": after,
                    "take_over_s": took_s,
                    "grants_stored_s": grants,
                    "hand_back_s": gave_s,
                    "kept_objects_by_type": kept.most_common(args.top),
                    "why_kept": why,
                }
            )
            print(json.dumps(rounds[-1]), flush=True)
        return {
            "benchmark": "takeover_memory",
            "preset": args.preset,
            "clusters": len(clusters),
            "first_build_s": first_s,
            "rounds": rounds,
        }
    finally:
        stop.set()
        if thread is not None:
            thread.join(60)  # its leases released while Redis is still there
        if a is not None and a.poll() is None:
            a.terminate()
            a.wait(10)
        sim.terminate()
        sim.wait(30)
        if sim.stdout is not None:
            sim.stdout.close()
        server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="M")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--settle-s", type=float, default=15.0)
    p.add_argument("--timeout-s", type=float, default=600.0)
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--why",
        default="",
        metavar="TYPE",
        help="diagnosis: the referrer chains keeping the take-over's objects of this type alive",
    )
    p.add_argument("--out", default="takeover.json")
    args = p.parse_args(argv)
    result = run(args)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
