"""Watch streams on asyncio: many watches on one event-loop thread instead of a thread each.

A watcher replica holds every served kind of its clusters open at once (~30 streams a cluster,
thousands a replica). `open_watch` sends the same request as `LeafClient.watch` (same URL, query,
credentials and TLS settings, taken from the kubeconfig the client loaded) with aiohttp, and
reads the chunked JSON-lines answer as it arrives; the events, errors and 410 handling are
`common.leaf.client`'s (`parse_event`).

Why aiohttp: measured against the hand-written HTTP/1.1 reader it replaced and against httpx
(bench/watch_http.py, docs/benchmarks.md "watch_http"), its C parser reads a watch for less CPU
than either, and it speaks HTTP proxies: a cluster with `proxy-url` in its kubeconfig (or the
`HTTPS_PROXY`/`NO_PROXY` environment the kubernetes client reads) is watched through the proxy
on the loop, CONNECT for an https server, absolute-form requests for an http one, as the
threaded client (urllib3's ProxyManager) sends them. A proxy URL's user info becomes a
`Proxy-Authorization: Basic` header, as client-go sends it. Only a SOCKS or https:// proxy
keeps the threaded `LeafClient.watch` (`supported` says so).

One aiohttp session per event loop, shared by every cluster: no cookie jar (a leaf's cookies
never reach another leaf), no redirects (a leaf cannot send the bearer token elsewhere), no
proxy or `.netrc` from the environment beyond what the kubeconfig's Configuration says, and
every error reduced to its type name (aiohttp's messages carry URLs: the proxy's may hold
credentials).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from common.errors import ClusterUnreachable
from common.leaf.client import (
    LeafClient,
    parse_event,
    proxy_settings,
    raise_for_status,
    watch_path,
)

ERROR_BODY_MAX = 64 * 1024  # bytes of an error answer read for its message
LINE_MAX = 64 * 1024 * 1024  # one event (one object): the biggest a leaf may send
HEADER_FIELD_MAX = 64 * 1024  # bytes of one answer header line
OPEN_CONCURRENCY = 64
"""Connections being opened at once per event loop: a replica starting on 100 clusters opens
~3,000 streams; all at once, their TLS handshakes outlast any timeout."""
PROXY_SCHEMES = ("http",)
"""Proxies whose watches run here (a SOCKS or TLS proxy keeps a thread per watch)."""
_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
_sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}


def _open_slots() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(OPEN_CONCURRENCY)
    return slots


def _session() -> aiohttp.ClientSession:
    """This loop's session (made on first use; `close_session` ends it)."""
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(
            limit=0,  # one connection per stream: the open slots bound the handshakes
            force_close=True,  # a watch holds its connection to the end, as kube-apiserver does
            ttl_dns_cache=60,
        )
        session = _sessions[loop] = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "User-Agent"),
            max_field_size=HEADER_FIELD_MAX,
        )
    return session


async def close_session() -> None:
    """Close the running loop's session (a loop that ends before the process does)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


@atexit.register
def _close_all() -> None:
    """At exit, close the sessions of loops still running (a daemon loop thread's session would
    otherwise be reported unclosed)."""
    for loop, session in list(_sessions.items()):
        if loop.is_running() and not session.closed:
            done = asyncio.run_coroutine_threadsafe(session.close(), loop)
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                done.result(2)


def supported(client: LeafClient) -> bool:
    """Whether `client`'s watches can run here: directly or through an http:// proxy."""
    proxy, _ = proxy_settings(client.configuration)
    return not proxy or urlsplit(proxy).scheme.lower() in PROXY_SCHEMES


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
    path = watch_path(api_version, plural, resource_version, timeout_s)
    url = config.host.rstrip("/") + path
    server_hostname = None
    if ctx is not None:
        server_hostname = getattr(config, "tls_server_name", None) or None
        if isinstance(config.assert_hostname, str):
            server_hostname = config.assert_hostname
    proxy, proxy_headers = proxy_settings(config)
    headers = {"Accept": "application/json"}
    headers.update(client.headers())
    if proxy and urlsplit(url).scheme != "https":
        # plain http: the request itself goes to the proxy (absolute-form) and carries them;
        # for https they go with the CONNECT only, never through the tunnel to the server
        headers.update(proxy_headers)
        proxy_headers = {}
    client.requests += 1
    # As urllib3 does for the threaded watch: the connection may take as long as the stream may
    # stay silent (a TLS handshake on a busy machine takes seconds); then no byte for `idle_s`
    # (head or body) is a broken stream.
    wait_s = max(client.timeout_s, idle_s)
    timeout = aiohttp.ClientTimeout(total=None, connect=wait_s, sock_read=idle_s)
    try:
        async with _open_slots():
            resp = await _session().get(
                url,
                headers=headers,
                ssl=ctx if ctx is not None else True,
                server_hostname=server_hostname,
                proxy=proxy or None,
                proxy_headers=proxy_headers or None,
                timeout=timeout,
                allow_redirects=False,
            )
    except (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError, ValueError) as e:
        raise ClusterUnreachable(f"cluster {client.name}: watch: {type(e).__name__}") from None
    stream = AsyncWatchStream(client.name, resp, idle_s)
    try:
        if resp.status >= 400:
            body = await stream.read_body(ERROR_BODY_MAX)
            raise_for_status(client.name, resp.status, body, path)
        if resp.status != 200:
            raise ClusterUnreachable(f"cluster {client.name}: watch: HTTP {resp.status}")
    except BaseException:
        stream.close()
        raise
    return stream


class AsyncWatchStream:
    """The events of one open watch: `async for (type, object)`; `close()` (from any thread)
    ends it. Raises WatchExpired on a 410 ERROR event, ClusterUnreachable when the stream breaks
    or stays silent for `idle_s`."""

    def __init__(self, cluster: str, resp: aiohttp.ClientResponse, idle_s: float) -> None:
        self.cluster = cluster
        self._resp = resp
        self.idle_s = idle_s
        self.closed = False
        self._loop = asyncio.get_running_loop()

    @property
    def chunked(self) -> bool:
        return "chunked" in self._resp.headers.get("Transfer-Encoding", "").lower()

    def _broken(self, e: BaseException) -> ClusterUnreachable:
        if isinstance(e, TimeoutError):  # aiohttp's read timeout (sock_read) is one
            return ClusterUnreachable(
                f"cluster {self.cluster}: watch silent for {self.idle_s:.0f}s"
            )
        return ClusterUnreachable(f"cluster {self.cluster}: watch broke ({type(e).__name__})")

    async def read_body(self, limit: int) -> bytes:
        """An error answer's body (up to `limit` bytes)."""
        out = bytearray()
        try:
            while len(out) < limit:
                data = await self._resp.content.read(limit - len(out))
                if not data:
                    break
                out += data
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
            raise self._broken(e) from None
        return bytes(out)

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        content = self._resp.content
        pending: list[bytes] = []  # the start of a line split across reads
        size = 0
        try:
            while True:
                try:
                    data = await content.readany()
                except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
                    raise self._broken(e) from None
                if not data:
                    break
                end = data.rfind(b"\n")
                if end < 0:
                    size += len(data)
                    if size > LINE_MAX:
                        raise ClusterUnreachable(
                            f"cluster {self.cluster}: watch broke (event over {LINE_MAX} bytes)"
                        )
                    pending.append(data)
                    continue
                if pending:
                    pending.append(data[: end + 1])
                    whole = b"".join(pending)
                    pending.clear()
                else:
                    whole = data[: end + 1]
                rest = data[end + 1 :]
                if rest:
                    pending.append(rest)
                size = len(rest)
                for raw in whole.split(b"\n"):
                    if raw.strip():
                        yield parse_event(self.cluster, raw)
            tail = b"".join(pending)
            if tail.strip():
                yield parse_event(self.cluster, tail)
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
            self._resp.close()
        else:
            self._loop.call_soon_threadsafe(self._resp.close)
