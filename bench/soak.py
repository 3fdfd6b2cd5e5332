"""Soak: the whole stack for a while (default 10 minutes) at a steady request rate, with an
object sync every 10 s and one leaf cluster flapping (down/up), recording every answer's status
and the memory (RSS) of every process over time.

    ./dev bench soak [--duration-s 600] [--rate 20] [--flap-period-s 30] [--out soak.json]

Expected errors: detail reads of the flapping cluster while it is down (502). Anything else
(5xx, connection errors, a process exiting) is counted as unexpected; exit status 1 if any.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common.redis_server import start_redis_server
from fleetscope.supervisor import Supervisor
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.reliability.stack import (
    http_json,
    stack_env,
    start_beat,
    start_query,
    start_worker,
    wait_for,
)

FLAP = "cluster-001"
CALLERS = {
    "admin": {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"},
    "team": {"X-Remote-User": "dev-team-00", "X-Remote-Group": "team-00"},
    "nobody": {"X-Remote-User": "nobody"},
}


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in raw.split()]


def sample(sup: Supervisor, redis_pid: int, self_pid: int) -> dict[str, int]:
    """RSS (KiB) of every process: redis, kubesim (this process), and each child's tree."""
    out = {"redis": rss_kib(redis_pid), "kubesim+loadgen": rss_kib(self_pid)}
    for child in sup.children:
        out[child.name] = rss_kib(child.process.pid)
        for i, pid in enumerate(sorted(children(child.process.pid))):
            out[f"{child.name}.child{i}"] = rss_kib(pid)
    return out


def requests_cycle(sim: KubeSim) -> itertools.cycle[tuple[str, str, dict[str, str]]]:
    targets = []
    for cluster in sim.clusters:
        obj = sim.list(cluster, "Kustomization")[0]["metadata"]
        path = f"/api/v1/objects/{cluster}/{obj['namespace']}/Kustomization/{obj['name']}"
        targets.append(("detail", path, CALLERS["admin"]))
    for who, headers in CALLERS.items():
        targets += [
            ("list", "/api/v1/objects?limit=50", headers),
            ("list-unhealthy", "/api/v1/objects?status=unhealthy&limit=50", headers),
            ("facets", "/api/v1/facets", headers),
            ("status", "/api/v1/status", headers),
        ]
        del who
    return itertools.cycle(targets)


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="fleetscope-soak-"))
    redis_server = start_redis_server()
    sim = KubeSim.start(
        generate_fleet(args.clusters, args.namespaces, seed=3), kubeconfig_dir=workdir / "clusters"
    )
    sim.warm()
    env = stack_env(
        redis_server.url,
        workdir / "clusters",
        workdir,
        sync_interval_s=args.sync_interval_s,
        rbac_sync_interval_s=args.sync_interval_s,
        registry_interval_s=30,
    )
    sup = Supervisor(workdir, env)
    statuses: Counter[str] = Counter()
    unexpected: Counter[str] = Counter()
    memory: list[dict[str, Any]] = []
    flap_down = threading.Event()
    try:
        start_worker(sup, pool="prefork")
        start_beat(sup, workdir)
        _, base = start_query(sup)
        admin = CALLERS["admin"]
        wait_for(
            lambda: http_json(base + "/api/v1/status", admin)[1].get("state") == "ready",
            120,
            "ready",
        )
        targets = requests_cycle(sim)
        started = time.monotonic()
        next_flap, next_sample, sent = started + args.flap_period_s, started, 0
        while (now := time.monotonic()) - started < args.duration_s:
            if now >= next_flap:
                flap_down.set() if not flap_down.is_set() else flap_down.clear()
                sim.set_fault(FLAP, down=flap_down.is_set())
                next_flap += args.flap_period_s
            if now >= next_sample:
                memory.append(
                    {"t_s": round(now - started), **sample(sup, redis_server.process.pid, _pid())}
                )
                next_sample += args.sample_every_s
                print(
                    f"[{now - started:5.0f}s] sent {sent}, statuses {dict(statuses)}, "
                    f"unexpected {dict(unexpected)}",
                    flush=True,
                )
            what, path, headers = next(targets)
            code, body = http_json(base + path, headers)
            statuses[f"{what} {code}"] += 1
            sent += 1
            expected_502 = what == "detail" and FLAP in path and code == 502
            if (
                code == 0
                or (code >= 500 and not expected_502)
                or (code >= 400 and what != "detail")
            ):
                unexpected[f"{what} {code} {(body or {}).get('error', '')}"] += 1
            for child in sup.dead():
                unexpected[f"process exited: {child.name}"] += 1
            time.sleep(max(0.0, started + sent / args.rate - time.monotonic()))
    finally:
        sup.stop_all()
        sim.stop()
        redis_server.stop()
    return summarize(args, statuses, unexpected, memory, sent)


def _pid() -> int:
    import os

    return os.getpid()


def summarize(
    args: argparse.Namespace,
    statuses: Counter[str],
    unexpected: Counter[str],
    memory: list[dict[str, Any]],
    sent: int,
) -> dict[str, Any]:
    half = memory[len(memory) // 2] if memory else {}
    last = memory[-1] if memory else {}
    growth = {
        k: {
            "first_kib": memory[0].get(k, 0),
            "half_kib": half.get(k, 0),
            "last_kib": last.get(k, 0),
        }
        for k in (memory[0] if memory else {})
        if k != "t_s"
    }
    return {
        "duration_s": args.duration_s,
        "rate_per_s": args.rate,
        "requests": sent,
        "statuses": dict(statuses),
        "unexpected": dict(unexpected),
        "memory": growth,
        "samples": memory,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=600)
    parser.add_argument("--rate", type=float, default=20, help="requests per second")
    parser.add_argument("--sync-interval-s", type=float, default=10)
    parser.add_argument("--flap-period-s", type=float, default=30)
    parser.add_argument("--sample-every-s", type=float, default=30)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--namespaces", type=int, default=50)
    parser.add_argument("--out", default="", help="write the full result as JSON here")
    args = parser.parse_args()
    result = run(args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    return 1 if result["unexpected"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
