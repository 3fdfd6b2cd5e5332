"""One thread per query process serving every watch stream of that process.

It reads the clusters' change feeds (common.index.feed) with one Redis connection (XREAD
BLOCK) and fans each change out to the streams: filtered by each stream's filters and its
caller's current access (re-resolved when the grants version or the fleet view changes, so a
revoked grant stops events within the list path's bound), written to the stream's socket
without blocking (query.gunicorn_worker hands the socket over once the request is answered:
no request thread is held). BOOKMARKs every `watch_bookmark_s`, STATUS when the caller's
degraded-mode state changes. A new stream catches up from its position first, or gets 410.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis

from common import redis_client
from common.index import feed, keys, syncstatus
from common.index.feed import Change, Position
from common.index.read.reader import Filters
from common.rbac.authorizer import UserInfo
from common.rbac.grants import Access
from query import positions, watch_events
from query.scope import resolve_scope
from query.state import QueryState

log = logging.getLogger(__name__)
BLOCK_MS = 200
OUTBOX_MAX = 1 << 20
"""Bytes a slow client may fall behind by before its stream is closed (it resumes)."""
_MAX_ID = (1 << 64) - 1


class Sink(Protocol):
    def send(self, data: bytes) -> bool: ...

    def close(self) -> None: ...


class SocketSink:
    """A handed-over client socket: written without blocking, the rest kept in an outbox."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.outbox = bytearray()
        self.closed = False

    def send(self, data: bytes) -> bool:
        if self.closed:
            return False
        self.outbox += data
        return self.flush()

    def flush(self) -> bool:
        try:
            while self.outbox:
                n = self.sock.send(self.outbox)
                del self.outbox[:n]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self.close()
            return False
        if len(self.outbox) > OUTBOX_MAX:
            self.close()
            return False
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.close()


class QueueSink:
    """A stream served by a WSGI server that cannot hand its socket over (werkzeug's, the test
    client): a response generator drains it on the request's own thread."""

    def __init__(self) -> None:
        self.q: queue.Queue[bytes | None] = queue.Queue(maxsize=10_000)
        self.closed = False

    def send(self, data: bytes) -> bool:
        if self.closed:
            return False
        try:
            self.q.put_nowait(data)
        except queue.Full:
            self.close()
            return False
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(queue.Full):
                self.q.put_nowait(None)

    def drain(self, keepalive_s: float = 5.0) -> Iterator[bytes]:
        try:
            while True:
                try:
                    item = self.q.get(timeout=keepalive_s)
                except queue.Empty:
                    yield b": keepalive\n\n"
                    continue
                if item is None:
                    return
                yield item
        finally:
            self.closed = True


@dataclass(eq=False)
class Subscription:
    user: UserInfo
    filters: Filters
    start: dict[str, Position] | None
    """The position to resume from (None: from now)."""
    preamble: list[bytes] = field(default_factory=list)
    """Events sent before any change (the initial ADDED of a watch without resourceVersion)."""
    sink: Sink | None = None
    access: dict[str, Access] = field(default_factory=dict)
    ahead: dict[str, Position] = field(default_factory=dict)
    """Clusters where this stream's position is past the hub's: changes up to it are skipped."""
    status_text: str = ""
    fresh: dict[str, Any] = field(default_factory=dict)
    """The caller's freshness block (the list answers'), as of the last re-scope."""
    bookmark_at: float = 0.0
    ends_at: float = float("inf")
    """When the hub closes the stream (monotonic): the client reconnects and is authenticated
    again, so an expired token or a removed user does not keep a stream forever."""

    @property
    def closed(self) -> bool:
        return self.sink is None or bool(getattr(self.sink, "closed", False))


class Hub:
    def __init__(self, st: QueryState) -> None:
        self.st = st
        self.r = redis_client.connect(st.settings.redis_url, BLOCK_MS / 1000 + 5.0)
        self.pos: dict[str, Position] = {}
        self.subs: list[Subscription] = []
        self.incoming: queue.Queue[Subscription] = queue.Queue()
        self.lock = threading.Lock()
        self.started = threading.Event()
        self._idle = threading.Event()
        self._token: str | None = None
        self._version: Any = None
        self._snapshot: Any = None
        self._clusters_at = 0.0
        self._sel = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._run, name="watch-hub", daemon=True)
        self._thread.start()

    @property
    def streams(self) -> int:
        return len(self.subs) + self.incoming.qsize()

    def subscribe(self, sub: Subscription) -> None:
        self.incoming.put(sub)

    # -- the hub's thread --------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                self._start()
                break
            except redis_client.ERRORS:
                log.warning("watch hub: Redis unavailable; retrying")
                time.sleep(1.0)
        self.started.set()
        while True:
            try:
                self._round()
            except redis_client.ERRORS:
                log.warning("watch hub: Redis unavailable; retrying")
                time.sleep(1.0)
            except Exception:  # keep serving the other streams
                log.exception("watch hub: round failed")

    def _start(self) -> None:
        clusters = syncstatus.registered_clusters(self.r)
        self.pos = {c: feed.last(self.r, c) for c in clusters}
        self._clusters_at = time.monotonic()

    def _round(self) -> None:
        while not self.incoming.empty():
            self._admit(self.incoming.get_nowait())
        self._refresh()
        got = self._read()
        if got:
            self._check_access()  # grants revoked before these writes count for them
        for c, change in got:
            self._dispatch(c, change)
        self._reap()

    def _read(self) -> list[tuple[str, Change]]:
        if not self.pos:
            self._idle.wait(BLOCK_MS / 1000)  # no cluster yet: never set, a pause
            return []
        streams = {keys.feed(c): _id(p) for c, p in self.pos.items()}
        by_key = {keys.feed(c): c for c in self.pos}
        got: Any
        if isinstance(self.r, redis.RedisCluster):
            pipe = self.r.pipeline()
            for k, i in streams.items():
                pipe.xread({k: i})
            got = [x for reply in pipe.execute() for x in (reply or [])]
            if not got:
                self._idle.wait(BLOCK_MS / 1000)
        else:
            got = self.r.xread(streams, block=BLOCK_MS) or []  # type: ignore[arg-type]
        out = []
        for key, entries in got:
            c = by_key[key.decode() if isinstance(key, bytes) else key]
            out += [(c, feed.decode(c, i, f)) for i, f in entries]
        return out

    def _dispatch(self, cluster: str, change: Change) -> None:
        self.pos[cluster] = change.position
        self._token = None
        # Streams of one caller share their access map (query.scope), so streams with the same
        # filters get the same bytes: rendered once per change, not once per stream.
        frames: dict[tuple[int, Filters], bytes | None] = {}
        for sub in self.subs:
            if sub.closed:
                continue
            ahead = sub.ahead.get(cluster)
            if ahead is not None:
                if not ahead.behind(change.position):
                    continue
                del sub.ahead[cluster]
            if sub.ahead:
                self._deliver(sub, change, self._token_of(sub))
                continue
            key = (id(sub.access), sub.filters)
            if key not in frames:
                frames[key] = self._frame(sub, change, self._token_of(sub))
            frame = frames[key]
            if frame is not None and sub.sink is not None:
                sub.sink.send(frame)

    def _deliver(self, sub: Subscription, change: Change, token: str) -> None:
        frame = self._frame(sub, change, token)
        if frame is not None and sub.sink is not None:
            sub.sink.send(frame)

    @staticmethod
    def _frame(sub: Subscription, change: Change, token: str) -> bytes | None:
        got = watch_events.event_for(sub.filters, sub.access, change)
        if got is None:
            return None
        text = watch_events.row_text(sub.access, change.cluster, got[1])
        return watch_events.row_event(got[0], text, token)

    def _token_of(self, sub: Subscription) -> str:
        if sub.ahead:
            return positions.encode(self.st.signer, {**self.pos, **sub.ahead})
        if self._token is None:
            self._token = positions.encode(self.st.signer, self.pos)
        return self._token

    def _admit(self, sub: Subscription) -> None:
        self._rescope(sub)
        assert sub.sink is not None
        for item in sub.preamble:
            sub.sink.send(item)
        sub.preamble = []
        self._send_status(sub)
        if sub.start is not None and not self._catch_up(sub):
            return
        sub.bookmark_at = time.monotonic()
        self.subs.append(sub)
        if isinstance(sub.sink, SocketSink):
            self._sel.register(sub.sink.sock, selectors.EVENT_READ, sub)

    def _catch_up(self, sub: Subscription) -> bool:
        """Send what happened since the stream's position; False (and 410) when it expired."""
        start = sub.start or {}
        for c in start:
            if c not in self.pos:  # one the hub has not read yet (e.g. gone from the registry)
                self.pos[c] = Position(0)
                self._token = None
        cur = {c: start.get(c, Position(0)) for c in self.pos}
        for c, hub_pos in self.pos.items():
            p = cur[c]
            if hub_pos.behind(p):
                sub.ahead[c] = p
                continue
            if not p.behind(hub_pos):
                continue
            if feed.expired(self.r, c, p):
                assert sub.sink is not None
                sub.sink.send(watch_events.expired(_expired_message(c)))
                sub.sink.close()
                return False
            for change in feed.read_after(self.r, c, p, _id(hub_pos)):
                cur[c] = change.position
                token = positions.encode(self.st.signer, {**cur, **sub.ahead})
                self._deliver(sub, change, token)
            cur[c] = hub_pos
        return True

    def _refresh(self) -> None:
        """Every round: the grants version and the fleet view; new clusters every second;
        BOOKMARKs when due."""
        now = time.monotonic()
        self._check_access()
        if now - self._clusters_at >= 1.0:
            self._clusters_at = now
            for c in syncstatus.registered_clusters(self.r):
                if c not in self.pos:
                    self.pos[c] = Position(0)  # a new cluster: its whole feed is new
                    self._token = None
        every = self.st.settings.watch_bookmark_s
        for sub in self.subs:
            if now - sub.bookmark_at >= every and sub.sink is not None:
                sub.bookmark_at = now
                sub.sink.send(watch_events.bookmark(self._token_of(sub)))

    def _check_access(self) -> None:
        """Re-resolve every stream's access when the grants version or the fleet view moved
        (the list path's signal: an RBAC sync raises the version after writing the grants)."""
        version = self.r.get(keys.VERSION)
        snapshot = self.st.fleet.snapshot(self.st.settings)
        if version != self._version or snapshot is not self._snapshot:
            self._version, self._snapshot = version, snapshot
            for sub in self.subs:
                self._rescope(sub)
                self._send_status(sub)

    def _rescope(self, sub: Subscription) -> None:
        """The caller's current access (checked: the grants are read, never a cache's)."""
        st = self.st
        scope = resolve_scope(sub.user, st.fleet, st.resolver, st.settings)
        # A cluster that left the registry keeps the access it had: its feed's last entries
        # are its rows' DELETED, which the caller saw as rows.
        gone = {c: a for c, a in sub.access.items() if c not in scope.snapshot.syncs}
        sub.access = {**gone, **scope.visible} if gone else scope.visible
        sub.fresh = scope.freshness(st.settings)

    def _send_status(self, sub: Subscription) -> None:
        if sub.sink is None:
            return
        frame = watch_events.status(sub.fresh)
        if frame != sub.status_text.encode():
            sub.status_text = frame.decode()
            sub.sink.send(frame)

    def _reap(self) -> None:
        """Drop closed streams; notice clients that went away; flush slow clients' outboxes."""
        if self.subs:
            for key, _ in self._sel.select(timeout=0):
                sub = key.data
                try:
                    if not key.fileobj.recv(4096):  # type: ignore[union-attr]
                        sub.sink.close()
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    sub.sink.close()
        keep = []
        now = time.monotonic()
        for sub in self.subs:
            if now >= sub.ends_at and sub.sink is not None:
                sub.sink.close()
            if isinstance(sub.sink, SocketSink) and sub.sink.outbox and not sub.sink.closed:
                sub.sink.flush()
            if sub.closed:
                if isinstance(sub.sink, SocketSink):
                    with contextlib.suppress(KeyError, ValueError):
                        self._sel.unregister(sub.sink.sock)
                continue
            keep.append(sub)
        self.subs = keep


def _id(p: Position) -> str:
    return f"{p.gen}-{_MAX_ID if p.seq is None else p.seq}"


def _expired_message(cluster: str) -> str:
    return (
        f"the resourceVersion is older than the change feed of cluster {cluster} keeps "
        "(FLEETSCOPE_WATCH_FEED_MAX); list again and watch from the list's resourceVersion"
    )


_hubs: dict[int, Hub] = {}
_hubs_lock = threading.Lock()


def hub(st: QueryState) -> Hub:
    """This process's hub for this app (started on the first watch)."""
    with _hubs_lock:
        got = _hubs.get(id(st))
        if got is None or got.st is not st:
            got = _hubs[id(st)] = Hub(st)
        return got
