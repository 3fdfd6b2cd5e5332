"""A watcher replica's RSS under the soak's churn, for several replicas side by side that differ
only in their environment (e.g. glibc's malloc settings): which one grows, and by how much.

    ./dev bench watcher_memory --preset L --duration-s 1320 \\
        --arm '{"MALLOC_ARENA_MAX": "16"}' --arm '{}'

Starts a Redis, kubesim's fleet and one `fleetscope watch` replica per `--arm` (a JSON object
of environment variables; `MALLOC_ARENA_MAX` set wins over the replica's own cap of two, so
`"16"` is glibc's default on 2 cores). The replicas share the fleet through their leases; once
every cluster is built and the shares settled, the soak's churn (status transitions and
status-unchanged updates of Kustomizations on random clusters, bench.soak_load.Churn) runs for
`--duration-s` while each replica's RSS is read every 2 s. Prints, per replica, its build CPU
and its RSS floor (the lowest sample) of every 2-minute window (`--window-s`), and writes them as JSON
(`--out`). Memory only: the replicas run at once on the same machine, so their CPU and timings
are not a benchmark's.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench import soak_load
from bench.services import ROOT, bench_env
from bench.soak_stack import rss_kib
from bench.watch_latency import free_port, held, proc_stats, wait_ready, wait_shared
from common.redis_server import start_redis_server
from kubesim.gen.fleet import preset_fleet
from kubesim.server import KubeSim

WINDOW_S = 120.0


def floors(samples: list[list[float]], column: int, window_s: float = WINDOW_S) -> list[float]:
    """The lowest RSS (MiB) of each whole window of `samples` ([t_s, kib...] rows)."""
    out = []
    end = samples[-1][0] if samples else 0.0
    for k in range(int(end // window_s)):
        window = [s[column] for s in samples if k * window_s <= s[0] < (k + 1) * window_s]
        if window:
            out.append(round(min(window) / 1024, 1))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="M")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duration-s", type=float, default=1320)
    p.add_argument("--transitions-per-s", type=float, default=20)
    p.add_argument("--unchanged-per-s", type=float, default=20)
    p.add_argument("--arm", action="append", default=[], help="a replica's environment (JSON)")
    p.add_argument("--window-s", type=float, default=WINDOW_S, help="a floor's window")
    p.add_argument("--every-s", type=float, default=2, help="RSS read every this often")
    p.add_argument("--out", default="watcher_memory.json")
    args = p.parse_args(argv)
    arms: list[dict[str, str]] = [json.loads(a) for a in args.arm] or [{}]
    server = start_redis_server()
    r = redis.Redis.from_url(server.url)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        kc = Path(tmp) / "clusters"
        sim = KubeSim.start(preset_fleet(args.preset, args.seed), kubeconfig_dir=kc)
        try:
            sim.warm()
            gc.collect()
            gc.freeze()  # kubesim's fleet lives here: no full collections pausing it
            env = {**bench_env(server.url, 0), "FLEETSCOPE_CLUSTERS_DIR": str(kc)}
            env["FLEETSCOPE_WATCH_BOOKMARK_S"] = "5"  # as in the soak
            for i, arm in enumerate(arms):
                cmd = [sys.executable, "-m", "fleetscope", "watch", "--name", f"arm{i}"]
                cmd += ["--reconcile"] if i == 0 else []
                port = {"FLEETSCOPE_WATCH_METRICS_PORT": str(free_port())}
                with (Path(tmp) / f"arm{i}.log").open("wb") as log:
                    procs.append(
                        subprocess.Popen(
                            cmd, cwd=ROOT, env={**env, **arm, **port}, stdout=log, stderr=log
                        )
                    )
            build_s = wait_ready(r, sim.clusters, 1800)
            wait_shared(r, sim.clusters, len(arms), 600)
            built = [proc_stats(w.pid) for w in procs]
            shares = held(r, sim.clusters)
            print(f"built in {build_s:.0f} s; clusters per replica {shares}", flush=True)
            rec = soak_load.Record()
            namespaces = soak_load.app_namespaces(sim)
            churned = [n for i, n in enumerate(namespaces) if i % 5 != 1]
            churn = soak_load.Churn(rec, sim, churned, args.transitions_per_s, args.unchanged_per_s)
            churn.start()
            t0 = time.monotonic()
            samples: list[list[float]] = []
            while (t := time.monotonic() - t0) < args.duration_s:
                samples.append([round(t, 1)] + [rss_kib(w.pid) for w in procs])
                time.sleep(args.every_s)
            churn.stop()
            churn.join(30)
        finally:
            for w in procs:
                w.terminate()
            for w in procs:
                w.wait(60)
            sim.stop()
            server.stop()
    result: dict[str, Any] = {
        "preset": args.preset,
        "duration_s": args.duration_s,
        "build_s": round(build_s, 1),
        "churn": dict(rec.churn),
        "replicas": [
            {
                "env": arm,
                "clusters": shares.get(f"arm{i}", 0),
                "build_cpu_s": built[i]["cpu_s"],
                "rss_after_build_mib": built[i]["rss_mib"],
                "floors_mib": floors(samples, i + 1, args.window_s),
            }
            for i, arm in enumerate(arms)
        ],
        "samples": samples,
    }
    Path(args.out).write_text(json.dumps(result))
    for rep in result["replicas"]:
        fl = rep["floors_mib"]
        grew = round(fl[-1] - fl[0], 1) if fl else None
        print(
            f"{json.dumps(rep['env'])}: build CPU {rep['build_cpu_s']} s, floors {fl} MiB (+{grew})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
