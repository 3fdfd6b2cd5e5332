"""Watch streams: replay from a resourceVersion, then live events, as JSON lines.

Like kube-apiserver's watch cache: `resourceVersion` "" or "0" starts with a synthetic ADDED per
existing object; an older resourceVersion than the retained history answers one ERROR event
with a 410 `Expired` Status; `allowWatchBookmarks` adds periodic BOOKMARK events. A stalled
watch (fault) stays open and silent until its timeout.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubesim.catalog import Resource
from kubesim.errors import KubeError
from kubesim.http import Request
from kubesim.store import ClusterStore, Event

if TYPE_CHECKING:
    from kubesim.cluster import SimCluster

TICK_S = 0.2  # how often a quiet watch checks for client disconnect, stall and timeout


def line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


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
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.last_rv = 0

    def matches(self, e: Event) -> bool:
        if e.res_key != self.res.key or (self.namespace and e.namespace != self.namespace):
            return False
        if self.labels is None and self.fields is None:
            return True
        meta = json.loads(e.raw).get("metadata") or {}
        if self.labels is not None and not self.labels(meta.get("labels") or {}):
            return False
        return self.fields is None or self.fields(meta)

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
        obj = {"kind": self.res.kind, "apiVersion": self.res.api_version, "metadata": meta}
        return line("BOOKMARK", json.dumps(obj, separators=(",", ":")).encode())

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
        self.store.watchers.add(self.queue.put_nowait)
        return out

    async def run(self) -> AsyncIterator[bytes]:
        first = self._start()
        if isinstance(first, KubeError):
            yield line("ERROR", first.body())
            return
        deadline = time.monotonic() + self.timeout_s
        interval = self.cluster.bookmark_interval_s
        next_bookmark = time.monotonic() + interval
        stalled = self.cluster.fault.stall_watch
        try:
            for chunk in [] if stalled else first:
                yield chunk
            while time.monotonic() < deadline and not self.req.disconnected():
                stalled = stalled or self.cluster.fault.stall_watch
                try:
                    e = await asyncio.wait_for(self.queue.get(), TICK_S)
                except TimeoutError:
                    e = None
                # Checked again after the wait: an event that arrives after the fault is set
                # must not slip through.
                stalled = stalled or self.cluster.fault.stall_watch
                if stalled:
                    continue
                if e is not None:
                    self.last_rv = e.rv
                    if self.matches(e):
                        yield line(e.type, e.raw)
                elif self.bookmarks and time.monotonic() >= next_bookmark:
                    self.last_rv = max(self.last_rv, self.store.rv)
                    next_bookmark = time.monotonic() + interval
                    yield self._bookmark()
        finally:
            self.store.watchers.discard(self.queue.put_nowait)
