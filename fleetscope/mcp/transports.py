"""Serving the MCP server: stdio (what assistants start by default) or the streamable HTTP
transport at `http://ADDR/mcp`. The HTTP server acts with the user's credentials and has no
login of its own, so it listens on loopback only and checks Host and Origin against DNS
rebinding (a web page must not reach it through the browser)."""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fleetscope.client.errors import BadInput

PATH = "/mcp"


def parse_addr(addr: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT` (host 127.0.0.1); `[::1]:PORT` for IPv6. Loopback only."""
    host, sep, port = addr.rpartition(":")
    if not sep:
        host, port = "", addr
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise BadInput(f"--http {addr[:80]!r}: not HOST:PORT (e.g. 127.0.0.1:8765, :0 for any)")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise BadInput(
                f"--http {addr[:80]!r}: only a loopback address (127.0.0.1, ::1, localhost); "
                "the server acts as you and has no login of its own"
            )
    return host, int(port)


def allowed(host: str, port: int) -> tuple[list[str], list[str]]:
    """Host headers and Origins a local client sends to this address."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    names.add(f"[{host}]" if ":" in host else host)
    hosts = [f"{n}:{port}" for n in sorted(names)]
    return hosts, [f"http://{h}" for h in hosts]


async def serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Any, host: str, port: int) -> None:
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise BadInput(f"--http {host}:{port}: cannot listen: {e.strerror}") from e
    sock.listen(128)
    port = sock.getsockname()[1]
    hosts, origins = allowed(host, port)
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        ),
    )

    class Endpoint:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route(PATH, endpoint=Endpoint())], lifespan=lifespan)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    shown = f"[{host}]" if ":" in host else host
    print(f"fleetscope mcp: serving http://{shown}:{port}{PATH}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])
