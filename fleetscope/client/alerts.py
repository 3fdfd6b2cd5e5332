"""`fleetscope alerts`: the firing fleet alerts on objects you may list (`GET /api/v1/alerts`),
kubectl-style, and a refused rules file when there is one. Text from leaf clusters is shown
without control characters (it never reaches the terminal as an escape sequence)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.printers import print_document
from fleetscope.client.table import age_since, cell, write_table

COLUMNS = ("ALERT", "SEVERITY", "CLUSTER", "NAMESPACE", "KIND", "NAME", "AGE", "SUMMARY")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--no-headers", action="store_true", help="no header line in the table")
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _alerts(args))


def _alerts(args: argparse.Namespace) -> int:
    body = connect(args).get("/api/v1/alerts")
    if args.output != "table":
        print_document(body, args.output)
        return 0
    items = [a for a in body.get("items") or [] if isinstance(a, dict)]
    rules = body.get("rules") if isinstance(body.get("rules"), dict) else {}
    if rules and rules.get("error"):
        sys.stderr.write(f"warning: alert rules refused: {safe(rules['error'])}\n")
    if not items:
        sys.stderr.write("No firing alerts.\n")
        return 0
    write_table(sys.stdout, None if args.no_headers else COLUMNS, [cells(a) for a in items])
    return 0


def cells(a: dict[str, Any]) -> list[str]:
    clusters = a.get("clusters")
    where = a.get("cluster") or (f"{len(clusters)} clusters" if isinstance(clusters, list) else "")
    notes = a.get("annotations")
    summary = (notes.get("summary") if isinstance(notes, dict) else "") or a.get("message") or ""
    return [
        safe(a.get("rule")),
        safe(a.get("severity")),
        safe(where),
        safe(a.get("namespace") or "_"),
        safe(a.get("kind")),
        safe(a.get("name")),
        age_since(a.get("startsAt")),
        safe(summary),
    ]


def safe(value: object) -> str:
    """A table cell without control characters."""
    return cell(_CONTROL.sub(" ", str(value)) if value is not None else None)
