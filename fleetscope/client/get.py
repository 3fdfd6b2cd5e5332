"""`fleetscope get [KIND ...]`: visible objects across the fleet, like `kubectl get` / `flux get`.

Pages are requested `--chunk-size` rows at a time and printed as they arrive; `--limit` stops
after that many rows in all, without fetching more. `-w` then prints the changes
(fleetscope.client.watching).
"""

from __future__ import annotations

import argparse
import sys

from fleetscope.client import csvout, listing, watching
from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.errors import ClientError
from fleetscope.client.features import OBJECTS
from fleetscope.client.printers import FORMATS, make_printer


def configure(parser: argparse.ArgumentParser) -> None:
    listing.add_filter_flags(parser)
    parser.add_argument(
        "--sort-by",
        metavar="FIELD",
        help="lastTransitionTime (oldest first) or -lastTransitionTime, where the server sorts",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=(*FORMATS, "csv"),
        default="table",
        help="table (default), wide, json, yaml, name (cluster/namespace/kind/name), or csv "
        "(the server's RFC 4180 export of every row)",
    )
    parser.add_argument(
        "--limit", type=listing.check_limit, metavar="N", help="print at most N rows in all"
    )
    parser.add_argument(
        "--chunk-size",
        type=listing.check_chunk,
        metavar="N",
        help=f"rows per request, 1..{listing.MAX_CHUNK} (default "
        f"{listing.DEFAULT_CHUNK}); with -o json|yaml, also stream the List",
    )
    parser.add_argument("--no-headers", action="store_true", help="no header line in tables")
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print each change as it happens (Ctrl-C stops)",
    )
    parser.add_argument(
        "--watch-only", action="store_true", help="print only the changes, not the list first"
    )
    parser.add_argument(
        "--output-watch-events",
        action="store_true",
        help="with --watch: an EVENT column (ADDED, MODIFIED, DELETED); json/yaml: each object "
        "wrapped as {type, object}",
    )
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _get(args))


def _get(args: argparse.Namespace) -> int:
    api = connect(args)
    params = listing.filter_params(args, api)
    params += listing.sort_param(args.sort_by, api.features()) if args.sort_by else []
    if args.output == "csv":
        shown = csvout.write(api, OBJECTS, params, limit=args.limit, headers=not args.no_headers)
        if shown == 0:
            print("No resources found", file=sys.stderr)
        return 0
    blocked_by = args.output == "wide" and "blockedBy" in api.features().row_fields
    if args.watch or args.watch_only:
        if args.output == "csv" or args.sort_by or args.limit:
            raise ClientError("--watch takes no -o csv, --sort-by or --limit")
        events = watching.EventPrinter(
            sys.stdout, args.output, args.output_watch_events, not args.no_headers, blocked_by
        )
        return watching.run(api, params, events, args.watch_only)
    printer = make_printer(
        args.output,
        sys.stdout,
        stream=args.chunk_size is not None,
        headers=not args.no_headers,
        blocked_by=blocked_by,
    )
    chunk = args.chunk_size or listing.DEFAULT_CHUNK
    shown = 0
    for i, page in enumerate(listing.pages(api, OBJECTS, params, chunk, args.limit)):
        if i == 0:
            listing.warn_degraded(page.freshness)
        printer.page(page.items)
        shown += len(page.items)
    printer.done()
    if shown == 0 and args.output in ("table", "wide", "name"):
        print("No resources found", file=sys.stderr)
    return 0
