"""`fleetscope groups [KIND ...]`: the same object (namespace, kind, name) across clusters, with
how many clusters report each status, where the server offers `/api/v1/groups`. `--drift`:
only the objects whose clusters run two or more revisions, with a REVISIONS column
(`6.5.0 (180), 6.4.1 (20)`, most clusters first; `+N more (M)` for the rest)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fleetscope.client import listing
from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.errors import BadInput
from fleetscope.client.features import GROUPS
from fleetscope.client.printers import ListPrinter
from fleetscope.client.table import cell, write_table

COLUMNS = ("NAMESPACE", "KIND", "NAME", "CLUSTERS", "STATUSES")
DRIFT_COLUMNS = (*COLUMNS, "REVISIONS")


def configure(parser: argparse.ArgumentParser) -> None:
    listing.add_filter_flags(parser)
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--limit", type=listing.check_limit, metavar="N", help="at most N groups")
    parser.add_argument(
        "--chunk-size",
        type=listing.check_chunk,
        metavar="N",
        help=f"groups per request (default {listing.DEFAULT_CHUNK})",
    )
    parser.add_argument("--no-headers", action="store_true", help="no header line in tables")
    parser.add_argument(
        "--drift",
        action="store_true",
        help="only objects whose clusters run two or more revisions (version drift), "
        "with their revisions and cluster counts",
    )
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _groups(args))


def _groups(args: argparse.Namespace) -> int:
    api = connect(args)
    if not api.features().offers(GROUPS):
        raise BadInput(
            "this server does not offer groups (no /api/v1/groups in its OpenAPI document)"
        )
    params = listing.filter_params(args, api, GROUPS)
    if args.drift:
        if api.features().known and not api.features().has_param(GROUPS, "drift"):
            raise BadInput("this server does not offer --drift (no `drift` on /api/v1/groups)")
        params.append(("drift", "true"))
    columns = DRIFT_COLUMNS if args.drift else COLUMNS
    chunk = args.chunk_size or listing.DEFAULT_CHUNK
    printer = ListPrinter(sys.stdout, args.output, args.chunk_size is not None)
    first = True
    for page in listing.pages(api, GROUPS, params, chunk, args.limit):
        if first:
            listing.warn_degraded(page.freshness)
        if args.output == "table":
            header = columns if first and not args.no_headers else None
            rows = [group_cells(g) + ([revision_cell(g)] if args.drift else []) for g in page.items]
            write_table(sys.stdout, header, rows)
        else:
            printer.page(page.items)
        first = False
    if args.output != "table":
        printer.done()
    return 0


def group_cells(g: dict[str, Any]) -> list[str]:
    """Per-status cluster counts as `healthy=3,unhealthy=1` (zero counts left out)."""
    counts: dict[str, Any] = next(
        (g[k] for k in ("statuses", "counts", "clusters") if isinstance(g.get(k), dict)), {}
    )
    total = g.get("total")
    if not isinstance(total, int):
        listed = g.get("clusters")
        total = (
            len(listed)
            if isinstance(listed, list)
            else sum(v for v in counts.values() if isinstance(v, int))
        )
    statuses = ",".join(f"{s}={n}" for s, n in counts.items() if n)
    return [
        cell(g.get("namespace")),
        cell(g.get("kind")),
        cell(g.get("name")),
        str(total),
        cell(statuses),
    ]


def revision_cell(g: dict[str, Any]) -> str:
    """`6.5.0 (180), 6.4.1 (20)`: the group's revisions with their clusters, most first, then
    `+N more (M)` when N more revisions run on M clusters."""
    listed = g.get("revisions")
    parts = [
        f"{r.get('revision')} ({r.get('clusters')})"
        for r in (listed if isinstance(listed, list) else [])
        if isinstance(r, dict)
    ]
    other = g.get("otherRevisions")
    if isinstance(other, dict) and other.get("revisions"):
        parts.append(f"+{other.get('revisions')} more ({other.get('clusters')})")
    return cell(", ".join(parts))
