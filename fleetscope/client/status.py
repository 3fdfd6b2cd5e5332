"""`fleetscope status`: the degraded-mode view. Overall state (ready | rebuilding | degraded),
how many clusters are collected, and per cluster (those the caller can see): sync state,
freshness of objects and RBAC data, object count and the last error."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from fleetscope.client.command import add_connection_flags, connect, run_command
from fleetscope.client.printers import print_document
from fleetscope.client.table import age_since, cell, human_age, write_table
from fleetscope.client.terminal import escape

COLUMNS = ("CLUSTER", "STATE", "OBJECTS", "LAST-SYNC", "RBAC", "LAST-ERROR")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--no-headers", action="store_true", help="no header line in the table")
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _status(args))


def _status(args: argparse.Namespace) -> int:
    body = connect(args).get("/api/v1/status")
    if args.output != "table":
        print_document(body, args.output)
        return 0
    out = sys.stdout
    collected = f"{body.get('collected')} of {body.get('total')} clusters collected"
    out.write(f"State:    {escape(str(body.get('state')))}\n")
    out.write(f"Message:  {escape(' '.join(str(body.get('message') or collected).split()))}\n")
    clusters = [c for c in body.get("clusters") or [] if isinstance(c, dict)]
    if clusters:
        out.write("\n")
        write_table(out, None if args.no_headers else COLUMNS, [cluster_cells(c) for c in clusters])
    registry = body.get("registry")
    if isinstance(registry, dict):
        write_registry(out, registry)
    return 0


def write_registry(out: TextIO, registry: dict[str, Any]) -> None:
    """The cluster registry's problems: clusters registered but not ready, names two sources
    claim, sources that could not be read (only what the caller may see; the rest counted)."""
    lines = [
        f"  {n.get('cluster')} ({n.get('source')}): not ready: {n.get('reason')}"
        for n in registry.get("notReady") or []
        if isinstance(n, dict)
    ]
    for p in registry.get("problems") or []:
        if isinstance(p, dict):
            where = p.get("cluster") or p.get("source") or ""
            lines.append(f"  {where}: {p.get('type')}: {' '.join(str(p.get('message')).split())}")
    if registry.get("hidden"):
        lines.append(f"  ({registry['hidden']} more not visible to you)")
    if lines:
        out.write("\nRegistry:\n" + "\n".join(escape(line) for line in lines) + "\n")


def cluster_cells(c: dict[str, Any]) -> list[str]:
    state = str(c.get("state") or "")
    state += ",stale" if c.get("stale") else ""
    state += ",not-collected" if c.get("collected") is False else ""
    state += ",not-ready" if c.get("ready") is False else ""
    synced = age_since(c.get("lastSuccess")) if c.get("lastSuccess") else "<never>"
    age = c.get("rbacAgeS")
    rbac = "fresh" if c.get("rbacFresh") else "stale"
    if isinstance(age, int | float):
        rbac += f" ({human_age(age)})"
    return [
        cell(c.get("cluster")),
        cell(state),
        cell(c.get("objects")),
        synced,
        rbac,
        "" if not c.get("lastError") else cell(c.get("lastError")),
    ]
