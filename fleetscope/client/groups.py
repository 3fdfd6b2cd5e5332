"""`fleetscope groups [KIND ...]`: the same object (namespace, kind, name) across clusters, with
how many clusters report each status, where the server offers `/api/v1/groups`."""

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
    chunk = args.chunk_size or listing.DEFAULT_CHUNK
    printer = ListPrinter(sys.stdout, args.output, args.chunk_size is not None)
    first = True
    for page in listing.pages(api, GROUPS, params, chunk, args.limit):
        if first:
            listing.warn_degraded(page.freshness)
        if args.output == "table":
            header = COLUMNS if first and not args.no_headers else None
            write_table(sys.stdout, header, [group_cells(g) for g in page.items])
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
