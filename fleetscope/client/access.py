"""`fleetscope access`: what the caller may see and why. Who the server thinks you are (user and
groups), then per cluster the namespaces and kinds you may list and the bindings that grant
them; clusters whose RBAC data is too old to trust are marked hidden (fail closed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.printers import print_document
from fleetscope.client.table import cell, write_table
from fleetscope.client.terminal import escape

COLUMNS = ("CLUSTER", "NAMESPACE", "KINDS", "BINDING", "SUBJECT")
ALL_NAMESPACES = "*"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--no-headers", action="store_true", help="no header line in the table")
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _access(args))


def _access(args: argparse.Namespace) -> int:
    api = connect(args)
    body = api.get("/api/v1/access")
    if args.output != "table":
        print_document(body, args.output)
        return 0
    user = body.get("user") or {}
    out = sys.stdout
    out.write(f"User:    {escape(str(user.get('name')))}\n")
    out.write(f"Groups:  {escape(', '.join(user.get('groups') or [])) or '<none>'}\n")
    clusters = [c for c in body.get("clusters") or [] if isinstance(c, dict)]
    every = frozenset(api.features().kinds)
    rows = [r for c in clusters for r in grant_rows(c, every)]
    out.write("\n")
    if not rows:
        out.write("No access: no binding on any cluster lets you list the collected kinds.\n")
        return 0
    write_table(out, None if args.no_headers else COLUMNS, rows)
    hidden = [str(c.get("cluster")) for c in clusters if c.get("rbacFresh") is False]
    if hidden:
        out.write(f"\nHidden until their RBAC data is fresh again: {escape(', '.join(hidden))}\n")
    return 0


def grant_rows(c: dict[str, Any], every: frozenset[str] = frozenset()) -> list[list[str]]:
    """One row per grant: namespace (`*` = every namespace), kinds, the binding and subject."""
    rows = []
    for g in c.get("grants") or []:
        if isinstance(g, dict):
            ns = g.get("namespace")
            rows.append(
                [
                    cell(c.get("cluster")),
                    "<all>" if ns == ALL_NAMESPACES else cell(ns),
                    kinds_text(g.get("kinds") or [], every),
                    cell(g.get("binding")),
                    cell(g.get("subject")),
                ]
            )
    return rows


def kinds_text(kinds: list[str], every: frozenset[str] = frozenset(), shown: int = 3) -> str:
    """`<all>` when the grant covers every kind the server knows; else the first few."""
    if every and every <= set(kinds):
        return "<all>"
    if len(kinds) <= shown:
        return ",".join(kinds) or "<none>"
    return ",".join(kinds[:shown]) + f",+{len(kinds) - shown} more"
