"""`fleetscope collect --once [--cluster NAME]`: one synchronous full collection (objects and
RBAC) of the configured clusters, a per-cluster summary, exit status 1 if any cluster failed."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from collector import gc_tuning
from collector.clusters import ClusterSource
from collector.jobs import ClusterOutcome, Collector, collect_once
from common import logs, redis_client
from common.kinds.registry import load_registry
from common.settings import Settings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--once",
        action="store_true",
        help="collect once and exit (scheduled collection runs under Celery: "
        "`celery -A collector worker` and `celery -A collector beat`)",
    )
    parser.add_argument(
        "--cluster",
        action="append",
        metavar="NAME",
        help="collect only this cluster (repeatable); default: every configured cluster",
    )
    parser.add_argument(
        "--parallel", type=int, default=4, metavar="N", help="clusters collected at once"
    )


def run(args: argparse.Namespace, settings: Settings | None = None) -> int:
    if not args.once:
        print("fleetscope collect: only --once is supported here; schedule with Celery beat")
        return 2
    settings = settings or Settings.from_env()
    logs.configure(settings)
    gc_tuning.tune()
    r = redis_client.connect(settings.redis_url)
    source = ClusterSource(settings, r=r)
    try:
        c = Collector(settings, r, load_registry(settings.kinds_file), source)
        outcomes = collect_once(c, args.cluster, args.parallel)
    finally:
        source.close()
        r.close()
    print_summary(outcomes)
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


def print_summary(outcomes: list[ClusterOutcome], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    header = ("CLUSTER", "STATE", "OBJECTS", "CHANGED", "REQUESTS", "SECONDS", "RBAC", "ERROR")
    lines = [header]
    for o in sorted(outcomes, key=lambda o: o.cluster):
        obj, rb = o.objects, o.rbac
        lines.append(
            (
                o.cluster,
                "not ready" if obj.skipped else "ok" if o.ok else "error",
                str(obj.objects),
                f"+{obj.added}/-{obj.removed}",
                str(obj.requests + rb.requests),
                f"{obj.duration_s + rb.duration_s:.2f}",
                "ok" if rb.ok else "error",
                (obj.error or rb.error or obj.skipped)[:120],
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        cells = [cell.ljust(w) for cell, w in zip(line, widths, strict=False)]
        print("  ".join([*cells, line[-1]]).rstrip(), file=out)
    failed = sum(1 for o in outcomes if not o.ok)
    skipped = sum(1 for o in outcomes if o.objects.skipped)
    total = sum(o.objects.objects for o in outcomes)
    note = f", {skipped} not ready" if skipped else ""
    print(f"{len(outcomes)} clusters, {failed} failed{note}, {total} objects", file=out)
