"""Benchmark (issue #38): what the first read after a write costs, in the reader itself.

    .venv/bin/python -m bench.reads_after_writes [--preset M] [--redis-url URL] [--n 40]
        [--memo-mib MIB] [--burst K]

Loads the fleet (or uses `--redis-url`), then for a plain list page, newest first, groups (by object, by object with
`status=healthy`, by namespace), group facets (by object, by namespace), facets and facets
by label value (`labelKeys`: counted from the rows), as a cluster admin: the process CPU and Redis commands of the first request in the process (what a worker
pays after a start or after its memo sweep), of one request on a still fleet, right after a
status-unchanged update (bench.churn: a new message on one row), right after a status
transition on a random cluster, and after a transition with a new access map (one cluster
out of the caller's scope, or back: what the query service hands the reader when a cluster is
removed, re-added or its RBAC data goes stale), averaged over `--n` of each. No HTTP and no load: the reader's
own cost, steadier than a load run on a busy machine (a request costs this plus the service's).
`--memo-mib` bounds the memos as the query service's `FLEETSCOPE_QUERY_MEMO_MIB` does (default:
by their weights only); `--burst K` adds requests after K transitions on random clusters (what a
query worker sees between two of one caller's requests under churn), with the Python heap's
peak during each request (tracemalloc: what the request holds in flight).
"""

from __future__ import annotations

import argparse
import cProfile
import random
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench.churn import transition, unchanged_updates
from bench.fleetload import load_fleet
from common import redis_client
from common.index import keys
from common.index.read import memo
from common.index.read.group_facets import GroupFacets
from common.index.read.groups import GroupReader
from common.index.read.reader import Filters, PageRequest, Reader
from common.index.read.timesort import TimeReader
from common.kinds.registry import load_registry
from common.redis_client import text
from common.redis_server import start_redis_server
from tests.support import topology
from tests.support.index_fleet import FakeAccess


def cases(
    r: Any, clusters: list[str], caller: dict[str, Any] | None = None
) -> dict[str, Callable[[], Any]]:
    """The requests, as a cluster admin whose access map is `caller["access"]` (set here when
    absent; a write may replace it)."""
    kinds = load_registry().keys()
    reader = Reader(r, kinds)
    caller = {} if caller is None else caller
    caller.setdefault("access", {c: FakeAccess(frozenset(kinds)) for c in clusters})
    groups, group_facets = GroupReader(reader), GroupFacets(reader)
    healthy = Filters(statuses=("healthy",))
    by_time = TimeReader(r)

    def admin() -> Any:
        return caller["access"]

    return {
        "list (cluster admin)": lambda: reader.page(admin(), PageRequest(Filters(), 50)),
        "newest first": lambda: by_time.page(admin(), Filters(), 50, descending=True),
        "groups by object": lambda: groups.page(admin(), Filters(), "object", 50),
        "groups by object, status=healthy": lambda: groups.page(admin(), healthy, "object", 50),
        "groups by namespace": lambda: groups.page(admin(), Filters(), "namespace", 50),
        "group facets by object": lambda: group_facets.facets(admin(), Filters(), "object"),
        "group facets by namespace": lambda: group_facets.facets(admin(), Filters(), "namespace"),
        "facets": lambda: reader.facets(admin(), Filters()),
        "facets labelKeys=version": lambda: reader.facets(
            admin(), Filters(), label_keys=("app.kubernetes.io/version",)
        ),
    }


def regranted(caller: dict[str, Any], clusters: list[str], rnd: random.Random) -> None:
    """The caller's access map made again, as the query service makes it when a cluster
    leaves the caller's scope or comes back (removed from the registry, re-added, its RBAC
    data stale): a new dict, the same per-cluster access, one cluster out or back in."""
    whole = caller.setdefault("whole", caller["access"])
    if len(caller["access"]) < len(whole):
        caller["access"] = dict(whole)
    else:
        out = rnd.choice(clusters)
        caller["access"] = {c: a for c, a in whole.items() if c != out}


def measure(
    r: Any, n: int, only: list[str] | None = None, profile: str = "", burst: int = 0
) -> list[tuple[str, str, float, float, float]]:
    """(request, write before it, CPU ms, Redis commands, heap peak MiB: 0 unless `burst`) per
    case and kind of write."""
    clusters = sorted(text(c) for c in r.hkeys(keys.CLUSTERS))
    rnd = random.Random(1)
    caller: dict[str, Any] = {}

    def transition_and_new_map() -> None:
        transition(r, rnd.choice(clusters))
        regranted(caller, clusters, rnd)

    writes: dict[str, Callable[[], Any]] = {
        "still": lambda: None,
        "after a message-only update": lambda: unchanged_updates(r, clusters, 1, rnd),
        "after a transition": lambda: transition(r, rnd.choice(clusters)),
        "after a transition and a new access map": transition_and_new_map,
    }
    if burst:
        writes[f"after {burst} transitions"] = lambda: [
            transition(r, rnd.choice(clusters)) for _ in range(burst)
        ]
    out = []
    profiler = cProfile.Profile() if profile else None
    for name, ask in cases(r, clusters, caller).items():
        if only and not any(o in name for o in only):
            continue
        # the first answer in a process reads everything (as after the memo sweep dropped
        # what it held): measured once, apart
        topology.reset_stats(r)
        t0 = time.process_time()
        ask()
        cpu = time.process_time() - t0
        stats = topology.commandstats(r)
        stats.pop("config|resetstat", None)
        out.append(
            (name, "first in the process", round(cpu * 1e3, 2), float(sum(stats.values())), 0.0)
        )
        print(f"| {name} | first in the process | {out[-1][2]} | {out[-1][3]} |", flush=True)
        for what, write in writes.items():
            cpu = cmds = peak = 0.0
            for _ in range(n):
                write()
                topology.reset_stats(r)
                if burst:
                    tracemalloc.start()
                    base = tracemalloc.get_traced_memory()[0]
                t0 = time.process_time()
                if profiler is not None and what == "after a transition":
                    profiler.runcall(ask)
                else:
                    ask()
                cpu += time.process_time() - t0
                if burst:  # traced after the CPU time: tracing slows what it traces
                    peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
                    tracemalloc.stop()
                stats = topology.commandstats(r)
                stats.pop("config|resetstat", None)
                cmds += sum(stats.values())
            mib = round(peak / 2**20, 1)
            out.append((name, what, round(cpu / n * 1e3, 2), round(cmds / n, 1), mib))
            row = f"| {name} | {what} | {out[-1][2]} | {out[-1][3]} |"
            print(row + (f" {mib} |" if burst else ""), flush=True)
    if profiler is not None:
        profiler.dump_stats(profile)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="M")
    ap.add_argument("--redis-url", default="", help="a Redis already holding the fleet")
    ap.add_argument("--n", type=int, default=40, help="requests per case and kind of write")
    ap.add_argument("--case", action="append", help="only the requests whose name has this")
    ap.add_argument("--profile", default="", help="cProfile the reads after a transition here")
    ap.add_argument("--memo-mib", type=float, default=0, help="the memos' budget (0: none)")
    ap.add_argument("--burst", type=int, default=0, help="also after this many transitions")
    args = ap.parse_args()
    memo.set_budget(args.memo_mib)
    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        if not args.redis_url:
            print(load_fleet(url, args.preset), flush=True)
        head = "| request | before it | CPU ms | Redis commands |"
        if args.burst:
            head += " heap peak MiB |"
        print(head + "\n|" + "---|" * head.count(" |"), flush=True)
        measure(redis_client.connect(url), args.n, args.case, args.profile, args.burst)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
