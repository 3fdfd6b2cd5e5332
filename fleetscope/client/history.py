"""`fleetscope history CLUSTER/NAMESPACE/KIND/NAME`: an object's recorded transitions, newest
first (`GET .../{name}/history`), where the server offers them.

A table by default (`-o json` / `-o yaml`: the API's answer, every page's items in one
document). Leaf data never reaches the terminal as a control sequence: control characters in
reasons, messages and revisions are shown escaped (`\\x1b`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import quote

from fleetscope.client import kinds, listing, terminal
from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.errors import BadInput, Refused
from fleetscope.client.features import DETAIL
from fleetscope.client.printers import print_document
from fleetscope.client.table import NONE, age_since, cell, write_table
from fleetscope.client.transport import Api

HISTORY = DETAIL + "/history"
COLUMNS = ("AGE", "AT", "STATUS", "SOURCE", "REASON", "REVISION", "MESSAGE")
PAGE = 50


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "object",
        metavar="CLUSTER/NAMESPACE/KIND/NAME",
        help="as `fleetscope get -o name` prints it; `_` as the namespace of a "
        "cluster-scoped object; KIND may be a plural or short name",
    )
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument(
        "--limit", type=listing.check_limit, metavar="N", help="at most N transitions"
    )
    parser.add_argument("--no-headers", action="store_true", help="no header line in the table")
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _history(args))


def object_path(api: Api, ref: str) -> str:
    """The API path of an object reference (KIND resolved against the server's kinds)."""
    from fleetscope.client.describe import parse_ref  # describe shows history: not at import

    cluster, namespace, kind_arg, name = parse_ref(ref)
    kind = kinds.resolve([kind_arg], api.features().kinds)[0]
    return "/api/v1/objects/" + "/".join(
        quote(p, safe="") for p in (cluster, namespace, kind, name)
    )


def read(api: Api, path: str, limit: int | None) -> dict[str, Any]:
    """The history answer with the items of every page (up to `limit`)."""
    body: dict[str, Any] = {}
    items: list[Any] = []
    token = ""
    while True:
        size = PAGE if limit is None else min(PAGE, limit - len(items))
        params = [("limit", str(size)), *([("continue", token)] if token else [])]
        body = api.get(path + "/history", params)
        got = body.get("items")
        items += got if isinstance(got, list) else []
        token = body.get("continue") or ""
        if not token or (limit is not None and len(items) >= limit):
            break
    return {"object": body.get("object"), "items": items[:limit]}


def _history(args: argparse.Namespace) -> int:
    api = connect(args)
    if not api.features().offers(HISTORY):
        raise BadInput("this server keeps no history (no .../history route in its OpenAPI)")
    body = read(api, object_path(api, args.object), args.limit)
    if args.output != "table":
        print_document(body, args.output)
        return 0
    if body["object"] is None:
        sys.stdout.write("# the object was deleted; its history is kept for a while\n")
    header = None if args.no_headers else list(COLUMNS)
    write_table(sys.stdout, header, [entry_cells(e) for e in body["items"]])
    return 0


def entry_cells(e: dict[str, Any]) -> list[str]:
    status = str(e.get("status") or "")
    if e.get("suspended") is True:
        status += ",suspended"
    message = visible_cell(e.get("message"))
    return [
        age_since(e.get("at")),
        visible_cell(e.get("at")),
        visible_cell(status),
        visible_cell(e.get("source")),
        visible_cell(e.get("reason")),
        visible_cell(e.get("revision")),
        "" if message == NONE else message,
    ]


def visible(text: str) -> str:
    """`text` with every control character (C0, DEL, C1) escaped, so a leaf's data never moves
    the cursor or recolours the terminal. Whitespace is left for `cell` to fold."""
    return terminal.escape(text, keep="\t\n\r")


def visible_cell(value: object) -> str:
    return cell(visible(str(value)) if value is not None else None)


def last_transitions(api: Api, path: str, n: int) -> dict[str, Any]:
    """The history answer with the newest `n` transitions (for `describe`); {} when the server
    keeps none, or when the caller may read the object (the leaf's `get`) but not list it
    (fleetscope's history)."""
    if not api.features().offers(HISTORY):
        return {}
    try:
        return api.get(path + "/history", [("limit", str(n))])
    except Refused:
        return {}
