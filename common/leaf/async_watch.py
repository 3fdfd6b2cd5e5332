"""Watch streams on asyncio: many watches on one event-loop thread instead of a thread each.

A watcher replica holds every served kind of its clusters open at once (~30 streams a cluster,
thousands a replica). `open_watch` sends the same request as `LeafClient.watch` (same URL, query,
credentials and TLS settings, taken from the kubeconfig the client loaded) over an asyncio
connection and reads the chunked JSON-lines answer itself; the events, errors and 410 handling
are `common.leaf.client`'s (`parse_event`). A cluster reached through an HTTP proxy
(`proxy-url` in its kubeconfig) is not served here: `supported` says so, and its watches keep
the threaded `LeafClient.watch`.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from common.errors import ClusterUnreachable
from common.leaf.client import LeafClient, parse_event, raise_for_status, watch_path

HEADER_MAX = 64 * 1024  # bytes of status line and headers
ERROR_BODY_MAX = 64 * 1024  # bytes of an error answer read for its message
LINE_MAX = 64 * 1024 * 1024  # one event (one object): the biggest a leaf may send
OPEN_CONCURRENCY = 64
"""Connections being opened at once per event loop: a replica starting on 100 clusters opens
~3,000 streams; all at once, their TLS handshakes outlast any timeout."""
_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


def _open_slots() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(OPEN_CONCURRENCY)
    return slots


def supported(client: LeafClient) -> bool:
    """Whether `client`'s watches can run here (not through a proxy)."""
    return not getattr(client.configuration, "proxy", None)


def ssl_context(client: LeafClient) -> ssl.SSLContext | None:
    """The TLS settings of the client's kubeconfig (None for plain HTTP): build once a client,
    pass to every `open_watch`."""
    config = client.configuration
    ctx: ssl.SSLContext | None = None
    if urlsplit(config.host).scheme == "https":
        ctx = ssl.create_default_context(cafile=config.ssl_ca_cert or None)
        if config.cert_file:
            ctx.load_cert_chain(config.cert_file, config.key_file or None)
        if not config.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif config.assert_hostname is False:
            ctx.check_hostname = False
    return ctx


async def open_watch(
    client: LeafClient,
    ctx: ssl.SSLContext | None,
    api_version: str,
    plural: str,
    resource_version: str,
    timeout_s: float,
    idle_s: float,
) -> AsyncWatchStream:
    """`LeafClient.watch`, on the running event loop."""
    config = client.configuration
    url = urlsplit(config.host)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    server_hostname = None
    if ctx is not None:
        server_hostname = getattr(config, "tls_server_name", None) or host
        if isinstance(config.assert_hostname, str):
            server_hostname = config.assert_hostname
    path = (url.path.rstrip("/") or "") + watch_path(
        api_version, plural, resource_version, timeout_s
    )
    client.requests += 1
    # As urllib3 does for the threaded watch: the connection and the answer's head may take as
    # long as the stream may stay silent (a TLS handshake on a busy machine takes seconds).
    wait_s = max(client.timeout_s, idle_s)
    try:
        async with _open_slots():
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname=server_hostname, limit=LINE_MAX
                ),
                wait_s,
            )
    except (OSError, TimeoutError, ssl.SSLError) as e:
        raise ClusterUnreachable(f"cluster {client.name}: watch: {type(e).__name__}") from None
    headers = {"Host": url.netloc, "Accept": "application/json", "Connection": "close"}
    headers.update(client.headers())
    head = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    stream = AsyncWatchStream(client.name, reader, writer, idle_s)
    try:
        writer.write(head.encode("latin-1") + b"\r\n")
        status, response_headers = await stream.read_head(wait_s)
        if status >= 400:
            body = await stream.read_body(ERROR_BODY_MAX)
            raise_for_status(client.name, status, body, path)
        if status != 200:
            raise ClusterUnreachable(f"cluster {client.name}: watch: HTTP {status}")
    except BaseException:
        stream.close()
        raise
    stream.chunked = "chunked" in response_headers.get("transfer-encoding", "").lower()
    return stream


class AsyncWatchStream:
    """The events of one open watch: `async for (type, object)`; `close()` (on the loop) ends it.
    Raises WatchExpired on a 410 ERROR event, ClusterUnreachable when the stream breaks or stays
    silent for `idle_s`."""

    def __init__(
        self,
        cluster: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        idle_s: float,
    ) -> None:
        self.cluster = cluster
        self._reader, self._writer = reader, writer
        self.idle_s = idle_s
        self.chunked = False
        self._length = -1
        self.closed = False
        self._loop = asyncio.get_running_loop()

    async def _read(self, coro: Any, timeout_s: float | None = None) -> Any:
        try:
            return await asyncio.wait_for(coro, timeout_s or self.idle_s)
        except TimeoutError:
            raise ClusterUnreachable(
                f"cluster {self.cluster}: watch silent for {self.idle_s:.0f}s"
            ) from None
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            raise ClusterUnreachable(
                f"cluster {self.cluster}: watch broke ({type(e).__name__})"
            ) from None

    async def read_head(self, timeout_s: float) -> tuple[int, dict[str, str]]:
        raw = await self._read(self._reader.readuntil(b"\r\n\r\n"), timeout_s)
        if len(raw) > HEADER_MAX:
            raise ClusterUnreachable(f"cluster {self.cluster}: watch: answer headers too long")
        lines = raw.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise ClusterUnreachable(f"cluster {self.cluster}: watch: not an HTTP answer") from None
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._length = int(headers.get("content-length", "-1") or -1)
        return status, headers

    async def read_body(self, limit: int) -> bytes:
        """An error answer's body (up to `limit` bytes)."""
        if self.chunked:
            out = b""
            async for data in self._chunks():
                out += data
                if len(out) >= limit:
                    break
            return out[:limit]
        if self._length >= 0:
            return bytes(await self._read(self._reader.readexactly(min(self._length, limit))))
        return bytes(await self._read(self._reader.read(limit)))

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            size_line = await self._read(self._reader.readuntil(b"\r\n"))
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ClusterUnreachable(
                    f"cluster {self.cluster}: watch broke (bad chunk)"
                ) from None
            if size == 0:
                return
            data = await self._read(self._reader.readexactly(size + 2))
            yield data[:-2]

    async def _data(self) -> AsyncIterator[bytes]:
        if self.chunked:
            async for data in self._chunks():
                yield data
            return
        while True:
            data = await self._read(self._reader.read(2**16))
            if not data:
                return
            yield data

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        buf = b""
        try:
            async for data in self._data():
                buf += data
                if b"\n" not in data:
                    continue
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    if raw.strip():
                        yield parse_event(self.cluster, raw)
            if buf.strip():
                yield parse_event(self.cluster, buf)
        except ClusterUnreachable:
            if not self.closed:  # else closed here: the stream just ends
                raise
        finally:
            self.close()

    def close(self) -> None:
        """End the stream, from any thread (a blocked read then ends quietly)."""
        if self.closed:
            return
        self.closed = True
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            here = False
        if here:
            self._writer.close()
        else:
            self._loop.call_soon_threadsafe(self._writer.close)
