"""Benchmark (issue #41): a query worker's memory under a read load with writes, side by side.

    .venv/bin/python -m bench.worker_memory [--preset L | --redis-url URL] [--duration-s 900]
        [--storm-every-s 120] [--variant NAME:VAR=VALUE,...] ... [--out worker_memory.json]

Serves the query app under gunicorn once per `--variant` (one worker of `--threads` request
threads each, its memos bounded as the soak's are: `FLEETSCOPE_QUERY_MEMO_MIB` 128,
`FLEETSCOPE_QUERY_MEMO_IDLE_S` 120; a variant adds or overrides environment variables), all on
the same fleet at once, so every variant sees the same writes: `--transitions-per-s` and
`--unchanged-per-s` (bench.churn, the soak's 20 and 20 by default) and, every
`--storm-every-s`, a transition on every cluster at once (what a Redis failover or a watcher's
re-list does to every cached count). Each variant gets `--threads` closed-loop callers (an
admin, a one-namespace user and six teams in turn: lists, unhealthy lists, groups by object and
by namespace, facets and group facets, `--think-s` apart on average).

Every `--dump-every-s` each worker writes its heap's make-up (bench.heaptrace: RSS, pymalloc's
arenas, live blocks, each memo's estimated bytes); the report gives each variant's series, its
worker's CPU seconds, and each route's answers with their p50/p99. Faster than a soak (one
fleet load, no leaves, no faults) and closer to a worker's own memory than the soak's RSS
samples, it is for trying a change to a worker's memory before a soak (docs/operations.md,
"Memory of a query worker").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import requests

from bench import churn
from bench.fleetload import load_fleet
from bench.services import gunicorn
from bench.soak_stack import heaptrace_env
from common import redis_client
from common.index import keys
from common.redis_client import text
from common.redis_server import start_redis_server

CALLERS: list[tuple[str, str]] = [
    ("admin-0", "fleet-admins"),
    ("solo", ""),
    *((f"dev-team-{i:02d}", f"team-{i:02d}") for i in range(6)),
]
"""bench.fleetload's users: a cluster admin, a one-namespace user, six teams."""

PATHS = [
    "/api/v1/objects?limit=50",
    "/api/v1/objects?limit=50&status=unhealthy",
    "/api/v1/groups?limit=50",
    "/api/v1/groups?limit=50&by=namespace",
    "/api/v1/facets",
    "/api/v1/facets?by=object",
]


def variant(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME` or `NAME:VAR=VALUE,VAR=VALUE` -> (name, environment)."""
    name, _, rest = spec.partition(":")
    env: dict[str, str] = {}
    for pair in filter(None, rest.split(",")):
        var, eq, value = pair.partition("=")
        if not eq or not var:
            raise argparse.ArgumentTypeError(f"{pair!r}: expected VAR=VALUE")
        env[var] = value
    if not name:
        raise argparse.ArgumentTypeError(f"{spec!r}: a variant needs a name")
    return name, env


APP = "query.wsgi:app"


class Worker:
    """One variant's gunicorn (one worker, bench.services.gunicorn) and its heap dumps."""

    def __init__(self, name: str, env: dict[str, str], args: Any, out: Path) -> None:
        self.name, self.dumps = name, out / f"heap-{name}"
        self.env = heaptrace_env(dict(os.environ), self.dumps, 0)
        self.env.update(
            HEAPTRACE_EVERY_S=str(args.dump_every_s),
            FLEETSCOPE_QUERY_WORKERS="1",
            FLEETSCOPE_QUERY_THREADS=str(args.threads),
            FLEETSCOPE_QUERY_MEMO_MIB="128",
            FLEETSCOPE_QUERY_MEMO_IDLE_S="120",
        )
        self.env.update(env)
        self.base = ""

    def series(self) -> tuple[int, list[dict[str, Any]]]:
        """(worker pid, its dumps: t_s, rss_mib, arenas, live blocks, memo MiB)."""
        files = sorted(self.dumps.glob("heap-*.jsonl"))
        if not files:
            return 0, []
        pid = int(files[0].stem.removeprefix("heap-"))
        out = []
        for line in files[0].read_text().splitlines():
            d = json.loads(line)
            out.append(
                {
                    "t_s": d["t_s"],
                    "rss_mib": round(d["rss"] / 2**20, 1),
                    "arenas": d.get("pymalloc", {}).get("arenas"),
                    "blocks": d.get("blocks"),
                    "memo_mib": round(sum(m[2] for m in d.get("memos", [])) / 2**20, 1),
                }
            )
        return pid, out


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def callers(
    w: Worker, n: int, think_s: float, stop: threading.Event, took: dict[tuple[str, str], list]
) -> list[threading.Thread]:
    def run(seed: int) -> None:
        rnd, session = random.Random(seed), requests.Session()
        while not stop.is_set():
            user, group = rnd.choice(CALLERS)
            headers = {"X-Remote-User": user, **({"X-Remote-Group": group} if group else {})}
            path = rnd.choice(PATHS)
            t0 = time.monotonic()
            try:
                status = str(session.get(w.base + path, headers=headers, timeout=120).status_code)
            except requests.RequestException as e:
                status = type(e).__name__
            took.setdefault((path, status), []).append(time.monotonic() - t0)
            stop.wait(rnd.expovariate(1 / think_s))

    return [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]


def storms(redis_url: str, every_s: float, stop: threading.Event, done: list[float]) -> None:
    """A transition on every cluster at once, every `every_s`."""
    r = redis_client.connect(redis_url)
    clusters = sorted(text(c) for c in r.hkeys(keys.CLUSTERS))
    t0 = time.monotonic()
    while not stop.wait(every_s):
        for c in clusters:
            churn.transition(r, c)
        done.append(round(time.monotonic() - t0, 1))


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(len(s) * q))], 3)


def run(args: Any, redis_url: str, out: Path) -> dict[str, Any]:
    variants = args.variant or [("default", {})]
    workers = [Worker(name, env, args, out) for name, env in variants]
    with ExitStack() as served:
        for w in workers:
            w.base = served.enter_context(gunicorn(APP, redis_url, "/healthz", w.env))
        return _measure(args, redis_url, workers, variants)


def _measure(
    args: Any, redis_url: str, workers: list[Worker], variants: list[tuple[str, dict[str, str]]]
) -> dict[str, Any]:
    took: dict[str, dict[tuple[str, str], list[float]]] = {w.name: {} for w in workers}
    stop, storm_at = threading.Event(), []
    model = churn.Model("worker_memory", args.transitions_per_s, args.unchanged_per_s)
    with churn.Churn(redis_url, model):
        threads = [
            t for w in workers for t in callers(w, args.threads, args.think_s, stop, took[w.name])
        ]
        if args.storm_every_s > 0:
            threads.append(
                threading.Thread(
                    target=storms,
                    args=(redis_url, args.storm_every_s, stop, storm_at),
                    daemon=True,
                )
            )
        for t in threads:
            t.start()
        stop.wait(args.duration_s)
        stop.set()
        for t in threads:
            t.join(150)
    result: dict[str, Any] = {"storms_s": storm_at, "variants": {}}
    for w in workers:
        pid, series = w.series()
        result["variants"][w.name] = {
            "env": dict(variants)[w.name],
            "worker_cpu_s": round(cpu_s(pid), 1),
            "dumps": series,
            "answers": [
                {
                    "path": path,
                    "status": status,
                    "n": len(v),
                    "p50_s": percentile(v, 0.5),
                    "p99_s": percentile(v, 0.99),
                }
                for (path, status), v in sorted(took[w.name].items())
            ],
        }
    return result


def table(result: dict[str, Any]) -> str:
    lines = []
    for name, v in result["variants"].items():
        lines.append(f"## {name} {v['env'] or ''}: worker CPU {v['worker_cpu_s']} s")
        lines.append("| t s | RSS MiB | arenas | live blocks | memos MiB |\n|---|---|---|---|---|")
        lines += [
            f"| {d['t_s']} | {d['rss_mib']} | {d['arenas']} | {d['blocks']} | {d['memo_mib']} |"
            for d in v["dumps"]
        ]
        lines.append("| path | status | answers | p50 s | p99 s |\n|---|---|---|---|---|")
        lines += [
            f"| {a['path']} | {a['status']} | {a['n']} | {a['p50_s']} | {a['p99_s']} |"
            for a in v["answers"]
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", default="L", help="the fleet loaded when no --redis-url is given")
    ap.add_argument(
        "--redis-url", default="", help="a Redis already holding a bench.fleetload fleet"
    )
    ap.add_argument("--duration-s", type=float, default=900)
    ap.add_argument("--storm-every-s", type=float, default=120, help="0: no storms")
    ap.add_argument("--transitions-per-s", type=float, default=20)
    ap.add_argument("--unchanged-per-s", type=float, default=20)
    ap.add_argument("--threads", type=int, default=4, help="request threads and callers each")
    ap.add_argument("--think-s", type=float, default=1.2, help="mean pause between a caller's asks")
    ap.add_argument("--dump-every-s", type=float, default=60)
    ap.add_argument("--variant", type=variant, action="append", help="NAME[:VAR=VALUE,...]")
    ap.add_argument("--out", default="worker_memory.json")
    ap.add_argument(
        "--dumps",
        default="",
        help="keep the heap dumps (heap-VARIANT/heap-PID.jsonl) in this directory, to read with"
        " bench.heaptrace.diff (default: a temporary directory, removed)",
    )
    args = ap.parse_args(argv)
    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        if not args.redis_url:
            print(load_fleet(url, args.preset), flush=True)
        if args.dumps:
            Path(args.dumps).mkdir(parents=True, exist_ok=True)
        kept = contextlib.nullcontext(args.dumps) if args.dumps else None
        with kept or tempfile.TemporaryDirectory(prefix="fleetscope-worker-memory-") as dumps:
            result = run(args, url, Path(dumps))
        result["args"] = {k: v for k, v in vars(args).items() if k != "variant"}
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(table(result), flush=True)
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
