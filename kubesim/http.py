"""A small HTTP/1.1 server on asyncio streams: keep-alive, Content-Length or chunked bodies,
and chunked streaming answers (watches). One `Listener` per simulated cluster, so a cluster
that is "down" closes its socket and clients get connection refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, list[str]]  # lower-case names, every value of repeated headers
    body: bytes = b""
    reader: asyncio.StreamReader | None = field(default=None, repr=False)
    transport: asyncio.BaseTransport | None = field(default=None, repr=False)

    def header(self, name: str, default: str = "") -> str:
        values = self.headers.get(name.lower())
        return values[0] if values else default

    def header_all(self, name: str) -> list[str]:
        return self.headers.get(name.lower(), [])

    def text_all(self, name: str) -> list[str]:
        """Every value of a header as text, its bytes read as UTF-8 as a Go server reads
        them (invalid bytes become U+FFFD)."""
        return [v.encode("latin-1").decode("utf-8", "replace") for v in self.header_all(name)]

    def disconnected(self) -> bool:
        if self.transport is not None and self.transport.is_closing():
            return True
        return self.reader is not None and (
            self.reader.at_eof() or self.reader.exception() is not None
        )


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: AsyncIterator[bytes] | None = None  # sent chunked when set


Handler = Callable[[Request], Awaitable[Response]]


class Listener:
    """Serves `handler` on host:port; `stop()` closes the socket and drops open connections."""

    def __init__(
        self, handler: Handler, host: str, port: int, tls: ssl.SSLContext | None = None
    ) -> None:
        self.handler, self.host, self.port, self.tls = handler, host, port, tls
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reserved: socket.socket | None = None

    @property
    def serving(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """Listen on host:port (port 0: one the OS picks, kept for later restarts).

        Raises OSError when the port cannot be bound (e.g. EADDRINUSE)."""
        if self._server is not None:
            return
        sock, self._reserved = self._reserved, None
        opts: dict[str, Any] = {"limit": MAX_HEAD_BYTES, "ssl": self.tls}
        if sock is not None:  # back from "down": listen on the socket that kept the port
            try:
                self._server = await asyncio.start_server(self._connection, sock=sock, **opts)
            except OSError:
                sock.close()
                raise
        else:
            self._server = await asyncio.start_server(
                self._connection, self.host, self.port, reuse_address=True, **opts
            )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self, keep_port: bool = False) -> None:
        """Close the socket and drop open connections. With `keep_port` (a cluster going
        "down") the port stays bound but not listening: clients get connection refused, and
        neither another program's outgoing connection nor a plain bind can take the port
        before `start()` listens on it again."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if keep_port:
            self._reserved = _bound_socket(self.host, self.port)
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        tasks = list(self._tasks)
        if tasks:  # aborted connections end by themselves (a watch as its reader sees the end)
            _, pending = await asyncio.wait(tasks, timeout=2.0)
            for task in pending:
                task.cancel()
        with contextlib.suppress(Exception):
            await server.wait_closed()

    def release(self) -> None:
        """Give up a port kept by `stop(keep_port=True)`."""
        sock, self._reserved = self._reserved, None
        if sock is not None:
            sock.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while True:
                request = await read_request(reader)
                if request is not None:
                    request.transport = writer.transport
                if request is None:
                    break
                response = await self.handler(request)
                keep = request.header("connection").lower() != "close"
                await write_response(writer, response, keep)
                if not keep or response.stream is not None:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except ssl.SSLError:
            pass
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            if writer.transport is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed under a dropped task
                    writer.transport.abort()


def _bound_socket(host: str, port: int) -> socket.socket | None:
    """A socket bound to host:port and not listening (None if the port was taken meanwhile)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    return sock


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), []).append(value.strip())
    body = b""
    if "chunked" in ",".join(headers.get("transfer-encoding", [])).lower():
        body = await _read_chunked(reader)
    elif headers.get("content-length"):
        length = int(headers["content-length"][0])
        if length > MAX_BODY_BYTES:
            raise ConnectionError("request body too large")
        body = await reader.readexactly(length)
    url = urlsplit(target)
    query = dict(parse_qsl(url.query, keep_blank_values=True))
    return Request(method.upper(), unquote(url.path), query, headers, body, reader)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def write_response(writer: asyncio.StreamWriter, resp: Response, keep: bool) -> None:
    reason = HTTPStatus(resp.status).phrase if resp.status in HTTPStatus._value2member_map_ else ""
    head = [f"HTTP/1.1 {resp.status} {reason}", f"Content-Type: {resp.content_type}"]
    head += [f"{k}: {v}" for k, v in resp.headers.items()]
    if resp.stream is None:
        head.append(f"Content-Length: {len(resp.body)}")
        head.append("Connection: keep-alive" if keep else "Connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + resp.body)
        await writer.drain()
        return
    head += ["Transfer-Encoding: chunked", "Connection: close"]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()
    try:
        async for chunk in resp.stream:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    finally:
        aclose = getattr(resp.stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):  # already finishing (cancelled inside)
                await aclose()
