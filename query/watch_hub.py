"""The watch hub: every watch stream of a process, served from one thread.

A reader thread (query.watch_feed) reads the clusters' change feeds; the hub's thread fans each
batch out: streams are grouped by caller (their access re-resolved once per caller when the
grants version or the fleet view moves, so a revoked grant stops events within the list path's
bound) and by filters, an event is rendered once per group and a batch is written to each
stream in one non-blocking send (query.watch_sinks). BOOKMARKs every `watch_bookmark_s`, STATUS
when a caller's degraded-mode state changes. A new stream catches up from its position first,
or gets 410. The stream process (query.stream_server) runs a hub on its main thread; a server
that cannot hand sockets over runs one in a thread (`hub`), its streams drained by their
request threads.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common import redis_client
from common.index import feed, keys, syncstatus
from common.index.feed import Change, Position
from common.index.read import tally
from common.index.read.reader import Filters
from common.rbac.authorizer import UserInfo
from common.rbac.grants import Access
from query import positions, watch_events
from query.scope import FleetSnapshot, resolve_scope
from query.state import QueryState
from query.watch_feed import Batch, FeedReader, entry_id
from query.watch_sinks import Sink, SocketSink

log = logging.getLogger(__name__)
TICK_S = 0.25
"""Longest wait of the hub's thread between looks at bookmarks, timeouts and the fleet view."""
READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


@dataclass(eq=False)
class Caller:
    """One identity's streams and its access, shared by them (re-resolved once for all)."""

    user: UserInfo
    access: dict[str, Access] = field(default_factory=dict)
    status: bytes = b""
    """The STATUS event of its current freshness block (sent when it changes)."""
    subs: dict[Subscription, None] = field(default_factory=dict)


@dataclass(eq=False)
class Subscription:
    user: UserInfo
    filters: Filters
    start: dict[str, Position] | None
    """The position to resume from (None: from now)."""
    preamble: list[bytes] = field(default_factory=list)
    """Events sent before any change (the initial ADDED of a watch without resourceVersion)."""
    sink: Sink | None = None
    caller: Caller | None = None
    ahead: dict[str, Position] = field(default_factory=dict)
    """Clusters where this stream's position is past the hub's: changes up to it are skipped."""
    bookmark_at: float = 0.0
    ends_at: float = float("inf")
    """When the hub closes the stream (monotonic): the client reconnects and is authenticated
    again, so an expired token or a removed user does not keep a stream forever."""

    @property
    def closed(self) -> bool:
        return self.sink is None or self.sink.closed


class Hub:
    def __init__(self, st: QueryState) -> None:
        self.st = st
        self.r = st.r
        self.pos: dict[str, Position] = {}
        self.subs: dict[Subscription, None] = {}
        self.callers: dict[tuple[str, tuple[str, ...]], Caller] = {}
        self.groups: dict[tuple[Caller, Filters], dict[Subscription, None]] = {}
        self.ahead: dict[Subscription, None] = {}
        """Streams still skipping changes up to their own position (served one by one)."""
        self.incoming: queue.Queue[Subscription] = queue.Queue()
        self.pending = 0
        """Streams on their way in (query.stream_server counts its handoffs here)."""
        self.ticks: list[Callable[[float], None]] = []
        self.sel = selectors.DefaultSelector()
        self.feed: FeedReader | None = None
        self.started = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.sel.register(self._wake_r, READ, self._woken)
        self._token: str | None = None
        self._snapshot: Any = None
        self._fleet: Any = None
        self._access_key: Any = None
        self._ticked_at = 0.0

    @property
    def streams(self) -> int:
        return len(self.subs) + self.incoming.qsize() + self.pending

    def subscribe(self, sub: Subscription) -> None:
        """From another thread: admit `sub` on the hub's thread."""
        self.incoming.put(sub)
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            self._wake_w.send(b".")

    def run(self, keep_going: Callable[[], bool] = lambda: True) -> None:
        """Serve until `keep_going()` is false (checked at least every TICK_S)."""
        while keep_going():
            try:
                self._start()
                break
            except redis_client.ERRORS:
                log.warning("watch hub: Redis unavailable; retrying")
                time.sleep(1.0)
        while keep_going():
            try:
                self.step()
            except redis_client.ERRORS:
                log.warning("watch hub: Redis unavailable; retrying")
                time.sleep(1.0)
            except Exception:  # keep serving the other streams
                log.exception("watch hub: round failed")

    def _start(self) -> None:
        """Start reading after every registered cluster's current generation (as a list's
        position is: streams opened from a list then start level with the hub)."""
        clusters = syncstatus.registered_clusters(self.r)
        gens, _ = tally.generations(self.r, clusters)
        self.pos = {c: Position(int(g or 0)) for c, g in zip(clusters, gens, strict=True)}
        self.feed = FeedReader(self.st, self.pos, self._wake_w)
        self.feed.start()
        self.started.set()

    def step(self, timeout_s: float = TICK_S) -> None:
        for key, mask in self.sel.select(timeout_s):
            key.data(key.fileobj, mask)
        while not self.incoming.empty():
            self.admit(self.incoming.get_nowait())
        assert self.feed is not None
        while (batch := self.feed.next()) is not None:
            self._apply(batch)
        self._tick()

    def _woken(self, sock: Any, mask: int) -> None:
        try:
            while sock.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    # -- changes -------------------------------------------------------------------------
    def _apply(self, batch: Batch) -> None:
        """Send a batch; a failure to re-resolve access leaves it queued (tried again after
        Redis is back), and one while sending closes every stream: they resume from their
        last id, none with a gap."""
        for c, p in batch.added.items():
            if c not in self.pos:
                self.pos[c] = p
                self._token = None
        self._check_access(batch.version, batch.snapshot)  # revoked before these writes: counts
        assert self.feed is not None
        self.feed.taken()
        for c in sorted(batch.expired):
            self._expire(c)
        if batch.changes:
            try:
                self._dispatch(batch.changes)
            except Exception:
                log.exception("watch hub: a batch failed; closing every stream (they resume)")
                for sub in list(self.subs):
                    self._drop(sub)
                for change in batch.changes:  # read: streams opened from now start after it
                    self.pos[change.cluster] = Position(change.position.gen)
                self._token = None

    def _expire(self, cluster: str) -> None:
        """The hub fell behind `cluster`'s feed retention (entries were trimmed before it read
        them): every stream that could have shown one of them gets 410 Expired and ends, as a
        resume from there would (the client lists again); none is left with a gap. A stream
        whose own position there is past the hub's (opened from a list read after the writes
        the hub has not read yet) is owed only what follows its position: it stays when the
        feed still holds that, since what the batch read starts at the oldest entry kept."""
        kept: dict[Position, bool] = {}
        for sub in list(self.subs):
            if sub.caller is None or sub.sink is None:
                continue
            if cluster not in sub.caller.access:
                continue
            if sub.filters.clusters and cluster not in sub.filters.clusters:
                continue
            own = sub.ahead.get(cluster)
            if own is not None:
                if own not in kept:
                    kept[own] = not feed.expired(self.r, cluster, own)
                if kept[own]:
                    continue
            sub.sink.send(watch_events.expired(_expired_message(cluster)))
            self._drop(sub)

    def _dispatch(self, changes: list[Change]) -> None:
        """Each change rendered once per (caller, filters); each stream gets the batch's bytes
        in one send."""
        out: dict[tuple[Caller, Filters], list[bytes]] = {}
        solo: dict[Subscription, list[bytes]] = {sub: [] for sub in self.ahead}
        for change in changes:
            self.pos[change.cluster] = change.position
            self._token = None
            texts: dict[tuple[int, bytes], str] = {}
            for key in self.groups:
                frame = self._frame(key[0], key[1], change, texts, None)
                if frame is not None:
                    out.setdefault(key, []).append(frame)
            for sub, frames in solo.items():
                ahead = sub.ahead.get(change.cluster)
                if ahead is not None:
                    if not ahead.behind(change.position):
                        continue
                    del sub.ahead[change.cluster]
                assert sub.caller is not None
                frame = self._frame(sub.caller, sub.filters, change, texts, sub)
                if frame is not None:
                    frames.append(frame)
        for key, frames in out.items():
            data = b"".join(frames)
            for sub in list(self.groups.get(key, ())):
                self._send(sub, data)
        for sub, frames in solo.items():
            if frames:
                self._send(sub, b"".join(frames))
        # A read returns whole writes (each is one MULTI/EXEC): the hub is past all of each
        # generation it read, as a list's position is, and level with streams opened there.
        for c in {change.cluster for change in changes}:
            self.pos[c] = Position(self.pos[c].gen)
        self._token = None
        self._level()

    def _level(self) -> None:
        """Streams the hub has caught up with everywhere join their groups."""
        for sub in list(self.ahead):
            for c, p in list(sub.ahead.items()):
                if not self.pos[c].behind(p):
                    del sub.ahead[c]
            if not sub.ahead:
                del self.ahead[sub]
                self._group(sub)

    def _frame(
        self,
        caller: Caller,
        filters: Filters,
        change: Change,
        texts: dict[tuple[int, bytes], str],
        sub: Subscription | None,
    ) -> bytes | None:
        got = watch_events.event_for(filters, caller.access, change)
        if got is None:
            return None
        kind, member = got
        text = texts.get((id(caller), member))
        if text is None:
            text = texts[(id(caller), member)] = watch_events.row_text(
                caller.access, change.cluster, member
            )
        token = self._token_of(sub) if sub is not None else self._shared_token()
        return watch_events.row_event(kind, text, token)

    def _shared_token(self) -> str:
        if self._token is None:
            self._token = positions.encode(self.st.signer, self.pos)
        return self._token

    def _token_of(self, sub: Subscription) -> str:
        if sub.ahead:
            return positions.encode(self.st.signer, {**self.pos, **sub.ahead})
        return self._shared_token()

    # -- streams -------------------------------------------------------------------------
    def admit(self, sub: Subscription) -> None:
        """Start serving `sub` (on the hub's thread): its preamble, STATUS, catch-up; closed
        if that fails (the client retries)."""
        try:
            self._admit(sub)
        except Exception:
            self._drop(sub)
            raise

    def _admit(self, sub: Subscription) -> None:
        assert sub.sink is not None
        key = (sub.user.name, sub.user.groups)
        caller = self.callers.get(key)
        if caller is None:
            caller = self.callers[key] = Caller(sub.user)
        sub.caller = caller
        caller.subs[sub] = None
        self.subs[sub] = None
        self._rescope(caller)  # checked: the grants are read, never a cache's
        if isinstance(sub.sink, SocketSink):  # the initial rows may exceed a slow client's bound
            sub.sink.limit += sum(len(item) for item in sub.preamble)
        for item in sub.preamble:
            sub.sink.send(item)
        sub.preamble = []
        sub.sink.send(caller.status)
        if sub.start is not None and not self._catch_up(sub):
            self._drop(sub)
            return
        if sub.closed:
            self._drop(sub)
            return
        sub.bookmark_at = time.monotonic()
        if isinstance(sub.sink, SocketSink):
            self.sel.register(sub.sink.sock, READ, functools.partial(self._client, sub))
            self._watch_writes(sub)
        if sub.ahead:
            self.ahead[sub] = None
        else:
            self._group(sub)

    def _group(self, sub: Subscription) -> None:
        assert sub.caller is not None
        self.groups.setdefault((sub.caller, sub.filters), {})[sub] = None

    def _catch_up(self, sub: Subscription) -> bool:
        """Send what happened since the stream's position; False (and 410) when it expired."""
        assert sub.sink is not None and sub.caller is not None
        start = sub.start or {}
        for c in start:
            if c not in self.pos:  # one the hub does not read yet (e.g. gone from the registry)
                self.pos[c] = Position(0)
                self._token = None
                if self.feed is not None:
                    self.feed.add(c, Position(0))
        cur = {c: start.get(c, Position(0)) for c in self.pos}
        for c in self._empty([c for c in self.pos if c not in start]):
            cur[c] = self.pos[c]
        for c, hub_pos in self.pos.items():
            p = cur[c]
            if hub_pos.behind(p):
                sub.ahead[c] = p
                continue
            if not p.behind(hub_pos):
                continue
            if feed.expired(self.r, c, p):
                sub.sink.send(watch_events.expired(_expired_message(c)))
                return False
            frames = []
            for change in feed.read_after(self.r, c, p, entry_id(hub_pos)):
                cur[c] = change.position
                token = positions.encode(self.st.signer, {**cur, **sub.ahead})
                got = watch_events.event_for(sub.filters, sub.caller.access, change)
                if got is not None:
                    text = watch_events.row_text(sub.caller.access, c, got[1])
                    frames.append(watch_events.row_event(got[0], text, token))
            if frames:
                sub.sink.send(b"".join(frames))
            cur[c] = hub_pos
        return True

    def _empty(self, clusters: list[str]) -> list[str]:
        """Of the clusters a new stream's position lacks (its list did not have them: registered
        since, or gone from the registry), the ones with no rows now. Such a stream is owed
        their changes from their start, but with no rows left, what it is owed is only what
        the feed brings from here on: it starts at the hub's position there instead of at 0,
        whose entries the feed may have trimmed long ago. Otherwise, while a cluster is out of
        the registry (its rows deleted), every list lacks it and every stream from one would
        get 410 Expired: clients listing and watching again ten times a second for as long as
        it is gone (the 2026-12-02 thirty-minute L soak, 3,800 reconnections). A row written
        between the hub's position and this count comes as an event; one deleted then comes as
        a DELETED of a row the client never saw, which a watch client ignores."""
        if not clusters:
            return []
        counts = redis_client.pipelined(self.r, [("ZCARD", keys.rows(c)) for c in clusters])
        return [c for c, n in zip(clusters, counts, strict=True) if not int(n)]

    def _send(self, sub: Subscription, data: bytes) -> None:
        assert sub.sink is not None
        if not sub.sink.send(data):
            self._drop(sub)
        elif isinstance(sub.sink, SocketSink) and sub.sink.outbox:
            self._watch_writes(sub)

    def _watch_writes(self, sub: Subscription) -> None:
        """Wait for the socket to be writable while a slow client's outbox holds bytes."""
        assert isinstance(sub.sink, SocketSink)
        mask = READ | WRITE if sub.sink.outbox else READ
        key = self.sel.get_key(sub.sink.sock)
        if key.events != mask:
            self.sel.modify(sub.sink.sock, mask, key.data)

    def _client(self, sub: Subscription, sock: Any, mask: int) -> None:
        """A client socket is readable (it went away, or sent bytes a stream ignores) or
        writable again (its outbox is flushed)."""
        assert isinstance(sub.sink, SocketSink)
        if mask & READ:
            try:
                if not sock.recv(4096):
                    self._drop(sub)
                    return
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._drop(sub)
                return
        if mask & WRITE:
            if not sub.sink.flush():
                self._drop(sub)
                return
            self._watch_writes(sub)

    def _drop(self, sub: Subscription) -> None:
        if isinstance(sub.sink, SocketSink) and sub in self.subs:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(sub.sink.sock)
        if sub.sink is not None:
            sub.sink.close()
        self.subs.pop(sub, None)
        self.ahead.pop(sub, None)
        caller = sub.caller
        if caller is None:
            return
        caller.subs.pop(sub, None)
        group = self.groups.get((caller, sub.filters))
        if group is not None:
            group.pop(sub, None)
            if not group:
                del self.groups[(caller, sub.filters)]
        if not caller.subs:
            self.callers.pop((caller.user.name, caller.user.groups), None)

    # -- access, bookmarks, timeouts -----------------------------------------------------
    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._ticked_at < TICK_S / 2:
            return  # a busy hub steps often; streams need looking at a few times a second
        self._ticked_at = now
        if self.feed is not None and self.feed.snapshot is not None:
            self._check_access(self.feed.version, self.feed.snapshot)
        every = self.st.settings.watch_bookmark_s
        bookmarks: dict[str, bytes] = {}
        for sub in list(self.subs):
            if sub.closed or now >= sub.ends_at:
                self._drop(sub)
            elif now - sub.bookmark_at >= every:
                sub.bookmark_at = now
                token = self._token_of(sub)
                frame = bookmarks.get(token)
                if frame is None:
                    frame = bookmarks[token] = watch_events.bookmark(token)
                self._send(sub, frame)
        for tick in self.ticks:
            tick(now)

    def _check_access(self, version: Any, snapshot: FleetSnapshot) -> None:
        """Re-resolve every caller's access when the grants version moved (the list path's
        signal: an RBAC sync raises it after writing the grants) or the fleet view changed in
        what access and freshness are made of (it is re-read every second, by the reader)."""
        if snapshot is not self._snapshot:
            self._snapshot, self._fleet = snapshot, fleet_key(snapshot)
        if (version, self._fleet) != self._access_key:
            self._access_key = (version, self._fleet)
            for caller in list(self.callers.values()):
                self._rescope(caller)

    def _rescope(self, caller: Caller) -> None:
        """The caller's current access (checked: the grants are read, never a cache's), and a
        STATUS to its streams when its freshness block changed."""
        st = self.st
        scope = resolve_scope(caller.user, st.fleet, st.resolver, st.settings)
        # A cluster that left the registry keeps the access it had: its feed's last entries
        # are its rows' DELETED, which the caller saw as rows.
        gone = {c: a for c, a in caller.access.items() if c not in scope.snapshot.syncs}
        caller.access = {**gone, **scope.visible} if gone else scope.visible
        status = watch_events.status(scope.freshness(st.settings))
        if status != caller.status:
            caller.status = status
            for sub in list(caller.subs):
                if sub.bookmark_at:  # admitted: a new stream gets it from `admit`
                    self._send(sub, status)


def fleet_key(snap: FleetSnapshot) -> tuple[Any, ...]:
    """What callers' access and freshness blocks are made of, in one fleet view: equal keys,
    equal scopes (the view is re-read every second, mostly to the same effect)."""
    pending = tuple((c, snap.syncs[c].state) for c in snap.pending)
    stale = tuple((c, snap.syncs[c].last_success) for c in snap.stale)
    rbac = tuple((c, snap.syncs[c].rbac_synced_at) for c in snap.rbac_stale)
    return (tuple(snap.clusters), snap.state, snap.limits, pending, stale, rbac)


def _expired_message(cluster: str) -> str:
    return (
        f"the resourceVersion is older than the change feed of cluster {cluster} keeps "
        "(FLEETSCOPE_WATCH_FEED_MAX); list again and watch from the list's resourceVersion"
    )


_hubs: dict[int, Hub] = {}
_hubs_lock = threading.Lock()


def hub(st: QueryState) -> Hub:
    """This process's in-thread hub for this app (started on the first watch): for servers
    that cannot hand a socket to the stream process."""
    with _hubs_lock:
        got = _hubs.get(id(st))
        if got is None or got.st is not st:
            got = _hubs[id(st)] = Hub(st)
            threading.Thread(target=got.run, name="watch-hub", daemon=True).start()
        return got
