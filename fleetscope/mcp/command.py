"""`fleetscope mcp [--http ADDR]`: the fleet for AI assistants, as the caller. Takes the
client's connection flags and configuration (contexts, token file, exec plugin, `--as`), so
the assistant acts with exactly the user's identity. stdio by default (stdout is the protocol;
everything else goes to stderr)."""

from __future__ import annotations

import argparse
import logging
import sys

from fleetscope.client.command import add_connection_flags, connect, run_command

INSTALL_HINT = "fleetscope mcp needs the MCP SDK: pip install 'fleetscope[mcp]'"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http",
        metavar="ADDR",
        help="serve the streamable HTTP transport at http://ADDR/mcp instead of stdio "
        "(HOST:PORT on loopback, :PORT, or :0 for any free port)",
    )
    add_connection_flags(parser)


def run(args: argparse.Namespace) -> int:
    return run_command(lambda: _serve(args))


def _serve(args: argparse.Namespace) -> int:
    try:
        import anyio

        from fleetscope.mcp import transports
        from fleetscope.mcp.fleet import Fleet, quiet
        from fleetscope.mcp.server import create_server
    except ImportError as e:
        if e.name and e.name.split(".")[0] in ("mcp", "anyio", "uvicorn", "starlette"):
            print(f"error: {INSTALL_HINT}", file=sys.stderr)
            return 1
        raise
    addr = transports.parse_addr(args.http) if args.http else None
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if args.verbosity >= 4 else logging.WARNING,
        format="fleetscope mcp: %(levelname)s %(name)s: %(message)s",
    )
    api = connect(args)
    fleet = Fleet(quiet(api.target), api.timeout_s or 0, api.verbosity)
    api.close()
    server = create_server(fleet)
    try:
        if addr is None:
            anyio.run(transports.serve_stdio, server)
        else:
            anyio.run(transports.serve_http, server, *addr)
    finally:
        fleet.close()
    return 0
