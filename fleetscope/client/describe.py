"""`fleetscope describe CLUSTER/NAMESPACE/KIND/NAME`: the live object, read from its leaf cluster
through the API's detail proxy as the caller (the leaf's RBAC decides).

YAML by default (`-o json` for JSON). Where the server offers relations and history, they follow
the object as YAML comments (since when it has been failing, its last transitions), so the
output still loads as the object alone.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any
from urllib.parse import quote

from fleetscope.client import history, kinds
from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.errors import BadInput
from fleetscope.client.features import RELATIONS
from fleetscope.client.printers import CLUSTER_SCOPED, dump_yaml
from fleetscope.client.table import cell, write_table
from fleetscope.client.terminal import escape, json_text

LAST_TRANSITIONS = 5
EDGE_COLUMNS = ("relation", "cluster", "namespace", "kind", "name", "status", "exists", "depth")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "object",
        metavar="CLUSTER/NAMESPACE/KIND/NAME",
        help="as `fleetscope get -o name` prints it; `_` as the namespace of a "
        "cluster-scoped object; KIND may be a plural or short name",
    )
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    parser.add_argument(
        "--depth",
        type=int,
        default=1,
        metavar="N",
        help="relations up to N hops away, where the server offers them",
    )
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _describe(args))


def parse_ref(ref: str) -> tuple[str, str, str, str]:
    parts = ref.strip("/").split("/")
    if len(parts) != 4 or not all(parts):
        raise BadInput(
            f"{ref[:200]!r} is not CLUSTER/NAMESPACE/KIND/NAME (use `_` for no namespace)"
        )
    return parts[0], parts[1], parts[2], parts[3]


def _describe(args: argparse.Namespace) -> int:
    cluster, namespace, kind_arg, name = parse_ref(args.object)
    api = connect(args)
    kind = kinds.resolve([kind_arg], api.features().kinds)[0]
    path = "/api/v1/objects/" + "/".join(
        quote(p, safe="") for p in (cluster, namespace, kind, name)
    )
    obj = api.get(path).get("object", {})
    if args.output == "json":
        print(json_text(json.dumps(obj, indent=4, ensure_ascii=False)))
        return 0
    sys.stdout.write(dump_yaml(obj))
    if api.features().offers(RELATIONS):
        params = (
            [("depth", str(args.depth))] if api.features().has_param(RELATIONS, "depth") else []
        )
        sys.stdout.write(relations_comment(api.get(path + "/relations", params)))
    sys.stdout.write(history_comment(history.last_transitions(api, path, LAST_TRANSITIONS)))
    return 0


def history_comment(answer: dict[str, Any]) -> str:
    """Since when the object has been failing (the row's `failingSince`, else as far as the
    transitions reach) and its last transitions, as YAML comments."""
    got = answer.get("items")
    entries = [e for e in got if isinstance(e, dict)] if isinstance(got, list) else []
    row = answer.get("object")
    if not entries and not (isinstance(row, dict) and row.get("failingSince")):
        return ""
    if isinstance(row, dict) and "failingSince" in row:
        since = row["failingSince"]
    else:
        since = failing_since(entries)
    lines = ["", f"Failing since: {history.visible_cell(since)}" if since else "Failing since: -"]
    lines.append("Last transitions:")
    rows = [history.entry_cells(e) for e in entries]
    lines += _table_lines(list(history.COLUMNS), rows) if rows else ["  none recorded"]
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def failing_since(entries: list[dict[str, Any]]) -> str | None:
    """The start of the current run of non-healthy statuses, as far as the entries (newest
    first) reach; None when the newest says healthy (or the object is gone)."""
    since = None
    for e in entries:
        if e.get("status") == "healthy" or e.get("source") == "deleted":
            break
        since = e.get("at")
    return str(since) if since else None


def relations_comment(body: dict[str, Any]) -> str:
    """The relations answer as a table in YAML comments: one row per edge, `hidden` counted."""
    rows = []
    for direction, edges in body.items():
        if isinstance(edges, list):
            for e in (e for e in edges if isinstance(e, dict)):
                ns = e.get("namespace") or CLUSTER_SCOPED
                rows.append(
                    [direction, *(cell(ns if c == "namespace" else e.get(c)) for c in EDGE_COLUMNS)]
                )
    lines = ["", "Relations:"]
    if rows:
        header = ["DIRECTION", *(c.upper() for c in EDGE_COLUMNS)]
        lines += _table_lines(header, rows)
    else:
        lines.append("  none")
    hidden = body.get("hidden")
    count = (
        sum(v for v in hidden.values() if isinstance(v, int))
        if isinstance(hidden, dict)
        else hidden
    )
    if isinstance(count, int) and count:
        lines.append(f"  and {count} related object(s) you may not list")
    return "".join(f"# {escape(line)}\n" if line else "#\n" for line in lines)


def _table_lines(header: list[str], rows: list[list[str]]) -> list[str]:
    buf = io.StringIO()
    write_table(buf, header, rows)
    return ["  " + line for line in buf.getvalue().splitlines()]
