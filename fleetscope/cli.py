"""`fleetscope` console script: subcommands live in the packages that own them.

Each subcommand module has `configure(parser)` (adds its arguments) and `run(args) -> int`.
Modules are imported only when their subcommand runs, so `fleetscope --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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
    "watch": ("collector.watch_cli", "watch leaf clusters for near-real-time updates"),
}


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetscope",
        description="A single pane of glass for Flux and Istio objects across many clusters.",
    )
    parser.add_argument("--version", action="version", version=f"fleetscope {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(importlib.import_module(SUBCOMMANDS[args.command][0]).run(args) or 0)
    except ConfigError as e:
        print(f"fleetscope {args.command}: configuration error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
