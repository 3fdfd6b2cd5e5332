"""Watch streams: replay from a resourceVersion, then live events, as JSON lines.

Like kube-apiserver's watch cache: `resourceVersion` "" or "0" starts with a synthetic ADDED per
existing object; an older resourceVersion than the retained history answers one ERROR event
with a 410 `Expired` Status; `allowWatchBookmarks` adds periodic BOOKMARK events. A stalled
watch (fault) stays open and silent until its timeout.

A quiet stream costs nothing until it has something to do: the store hands it only its own
resource's events (already serialized once for all its watchers), and it sleeps on one future
woken by an event, its next bookmark or timeout, or the client going away. Bookmarks are
spread over the interval, so streams opened together do not all wake together. Each live event
sent is stamped in `Deliveries`: when the write was made and when a watcher first got it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.catalog import Resource
from kubesim.errors import KubeError
from kubesim.http import Request
from kubesim.store import ClusterStore, Event, watch_line

if TYPE_CHECKING:
    from kubesim.cluster import SimCluster

line = watch_line  # the name the rest of kubesim used before the store serialized events
CHUNK_BYTES = 64 * 1024  # initial events are sent in chunks of about this size
GOLDEN = 0.6180339887498949  # bookmark phases: n * GOLDEN mod 1 spreads evenly for any count
_phases = itertools.count(1)


@dataclass(frozen=True)
class Delivery:
    """One live event: `made_s` when the store wrote it, `delivered_s` when a watch stream
    first sent it (both `time.monotonic()`, comparable within the process)."""

    made_s: float
    delivered_s: float


DeliveryKey = tuple[str, str, str, str, int]  # cluster, kind, namespace, name, resourceVersion


class Deliveries:
    """The send times of recent live watch events, bounded (oldest dropped first).

    Written on kubesim's loop thread; `get` may be called from any thread (one dict read)."""

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self._sent: OrderedDict[DeliveryKey, Delivery] = OrderedDict()

    def stamp(self, cluster: str, kind: str, event: Event, now_s: float) -> None:
        key = (cluster, kind, event.namespace, event.name, event.rv)
        if key in self._sent:
            return  # the first watcher to get it is the leaf's delivery
        self._sent[key] = Delivery(event.at, now_s)
        if len(self._sent) > self.size:
            self._sent.popitem(last=False)

    def get(self, cluster: str, kind: str, namespace: str, name: str, rv: int) -> Delivery | None:
        return self._sent.get((cluster, kind, namespace, name, rv))

    def __len__(self) -> int:
        return len(self._sent)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class WatchStream:
    """One watch request's event stream (an async generator via `run()`)."""

    def __init__(
        self,
        cluster: SimCluster,
        store: ClusterStore,
        res: Resource,
        namespace: str,
        labels: Callable[[Mapping[str, str]], bool] | None,
        fields: Callable[[Mapping[str, Any]], bool] | None,
        resource_version: str,
        bookmarks: bool,
        initial_events: bool,
        timeout_s: float,
        req: Request,
    ) -> None:
        self.cluster, self.store, self.res, self.namespace = cluster, store, res, namespace
        self.labels, self.fields = labels, fields
        self.resource_version, self.bookmarks = resource_version, bookmarks
        self.initial_events, self.timeout_s, self.req = initial_events, timeout_s, req
        self.last_rv = 0
        self.offered = 0  # live events the store handed this stream
        self._lines: list[bytes] = []  # live events waiting to be sent, and the events
        self._events: list[Event] = []
        self._wake: asyncio.Future[None] | None = None
        head = {"kind": res.kind, "apiVersion": res.api_version}
        self._bookmark_head = json.dumps(head, separators=(",", ":")).encode()[:-1]

    def matches(self, e: Event) -> bool:
        if e.res_key != self.res.key or (self.namespace and e.namespace != self.namespace):
            return False
        if self.labels is None and self.fields is None:
            return True
        meta = json.loads(e.raw).get("metadata") or {}
        if self.labels is not None and not self.labels(meta.get("labels") or {}):
            return False
        return self.fields is None or self.fields(meta)

    def offer(self, e: Event, raw_line: bytes) -> None:
        """A live event of this stream's resource (the store's watcher callback)."""
        self.offered += 1
        self.last_rv = e.rv
        if (self.labels is not None or self.fields is not None) and not self.matches(e):
            return
        self._lines.append(raw_line)
        self._events.append(e)
        if self._wake is not None:
            _wake(self._wake)

    def _initial(self) -> list[bytes]:
        raws, _ = self.store.page(self.res, self.namespace, None, 0)
        if self.labels is None and self.fields is None:
            return [line("ADDED", raw) for raw in raws]
        out = []
        for raw in raws:
            ns = (json.loads(raw).get("metadata") or {}).get("namespace", "")
            if self.matches(Event(0, self.res.key, "ADDED", ns, "", raw)):
                out.append(line("ADDED", raw))
        return out

    def _bookmark(self, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(self.last_rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        body = json.dumps(meta, separators=(",", ":")).encode()
        return line("BOOKMARK", self._bookmark_head + b',"metadata":' + body + b"}")

    def _start(self) -> list[bytes] | KubeError:
        """Events to send first (replay or initial list), registering for live events."""
        rv_text = self.resource_version
        self.last_rv = self.store.rv
        if rv_text in ("", "0") or self.initial_events:
            out = self._initial()
            if self.initial_events:
                out.append(self._bookmark(initial_end=True))
        else:
            try:
                rv = int(rv_text)
            except ValueError:
                return KubeError.bad_request(f"invalid resource version {rv_text!r}")
            since = self.store.events_since(rv)
            if since is None:
                return KubeError.expired(f"too old resource version: {rv} ({self.store.rv})")
            out = [line(e.type, e.raw) for e in since if self.matches(e)]
        self.store.watch(self.res, self.namespace, self.offer)
        return out

    def _take(self) -> bytes:
        """The waiting live events as one chunk, stamped as delivered now."""
        chunk = b"".join(self._lines)
        now = time.monotonic()
        stamp, name, kind = self.cluster.deliveries.stamp, self.cluster.name, self.res.kind
        for e in self._events:
            stamp(name, kind, e, now)
        self._lines, self._events = [], []
        return chunk

    async def run(self) -> AsyncIterator[bytes]:
        first = self._start()
        if isinstance(first, KubeError):
            yield line("ERROR", first.body())
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        interval = self.cluster.bookmark_interval_s
        # The first bookmark comes after a share of the interval that differs per stream.
        next_bookmark = loop.time() + interval * (0.25 + 0.75 * ((next(_phases) * GOLDEN) % 1))
        stalled = self.cluster.fault.stall_watch
        gone = self._watch_disconnect(loop)
        try:
            for chunk in [] if stalled else _chunks(first):
                yield chunk
            while loop.time() < deadline and not self.req.disconnected():
                # Checked whenever the stream wakes: an event that arrives after the fault is
                # set must not slip through.
                stalled = stalled or self.cluster.fault.stall_watch
                if stalled:
                    self._lines, self._events = [], []
                elif self._lines:
                    yield self._take()
                    continue
                elif self.bookmarks and loop.time() >= next_bookmark:
                    self.last_rv = max(self.last_rv, self.store.rv)
                    next_bookmark = loop.time() + interval
                    yield self._bookmark()
                    continue
                await self._sleep(
                    loop,
                    deadline if stalled or not self.bookmarks else min(deadline, next_bookmark),
                )
        finally:
            self.store.unwatch(self.res, self.namespace, self.offer)
            if gone is not None:
                gone.cancel()

    async def _sleep(self, loop: asyncio.AbstractEventLoop, until: float) -> None:
        """Until `until` (loop time), a live event, or the client going away."""
        wake = self._wake = loop.create_future()
        timer = loop.call_at(until, _wake, wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    def _watch_disconnect(self, loop: asyncio.AbstractEventLoop) -> asyncio.Task[bytes] | None:
        """A task that ends when the client closes its side (a watch client sends nothing
        more), waking the stream so it unregisters at once rather than at its timeout."""
        reader = self.req.reader
        if reader is None:
            return None
        task = loop.create_task(reader.read())

        def woken(done: asyncio.Task[bytes]) -> None:
            if not done.cancelled():
                done.exception()  # retrieved: a reset connection is just a client gone
            if self._wake is not None:
                _wake(self._wake)

        task.add_done_callback(woken)
        return task


def _chunks(lines: list[bytes]) -> list[bytes]:
    """Lines joined into chunks of about CHUNK_BYTES (fewer writes for an initial list)."""
    out: list[bytes] = []
    part: list[bytes] = []
    size = 0
    for ln in lines:
        part.append(ln)
        size += len(ln)
        if size >= CHUNK_BYTES:
            out.append(b"".join(part))
            part, size = [], 0
    if part:
        out.append(b"".join(part))
    return out
