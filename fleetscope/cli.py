"""`fleetscope` console script: subcommands live in the packages that own them.

Each subcommand module has `configure(parser)` (adds its arguments) and `run(args) -> int`.
Modules are imported only when their subcommand runs, so `fleetscope --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from common.buildinfo import version
from common.errors import ConfigError

SUBCOMMANDS = {
    "demo": (
        "fleetscope.demo",
        "run the whole stack on this machine (Redis, kubesim, workers, API)",
    ),
    "collect": ("collector.cli", "collect objects and RBAC from the configured clusters once"),
    "kubesim": ("kubesim.cli", "serve simulated leaf clusters and write their kubeconfigs"),
    "serve": ("query.cli", "serve the query API under gunicorn"),
    "watch": ("collector.watch.cli", "watch leaf clusters for near-real-time updates"),
    "get": ("fleetscope.client.get", "list objects across the fleet, like kubectl get"),
    "describe": ("fleetscope.client.describe", "show one live object, read from its cluster"),
    "status": ("fleetscope.client.status", "the index's state and each cluster's freshness"),
    "access": ("fleetscope.client.access", "what you may see, and the bindings behind it"),
    "groups": ("fleetscope.client.groups", "the same object across clusters, by status"),
    "history": ("fleetscope.client.history", "an object's recorded transitions, newest first"),
    "completion": ("fleetscope.client.completion", "print a bash or zsh completion script"),
    "mcp": ("fleetscope.mcp.command", "serve the fleet to AI assistants (MCP), as you"),
    "alerts": ("fleetscope.client.alerts", "firing fleet alerts on objects you may list"),
}
# Not listed in --help: what the completion scripts call back.
HIDDEN = {"__complete": ("fleetscope.client.complete", "candidates for shell completion")}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line and exit status 2, like the client's other bad-input errors."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: bad input: {message} (see `{self.prog} --help`)\n")


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fleetscope",
        description="A single pane of glass for Flux and Istio objects across many clusters.",
    )
    parser.add_argument("--version", action="version", version=f"fleetscope {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands = {**SUBCOMMANDS, **(HIDDEN if chosen in HIDDEN else {})}
    for name, (module, help_text) in commands.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in SUBCOMMANDS or chosen in HIDDEN else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        module = {**SUBCOMMANDS, **HIDDEN}[args.command][0]
        return int(importlib.import_module(module).run(args) or 0)
    except ConfigError as e:
        print(f"fleetscope {args.command}: configuration error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
