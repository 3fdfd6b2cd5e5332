"""The watch hub's reader: one thread that reads every cluster's change feed (common.index.feed)
with its own Redis connection and hands the hub batches of changes.

One XREAD BLOCK over all the feeds (a Redis Cluster: a pipeline of XREADs, polled), then the
grants version (`fs:version`) read after it: an RBAC change made before these writes has raised
it by then, so the hub re-resolves access before sending them (the list path's bound). Keeping
the Redis waits and the reply decoding on this thread leaves the hub's thread free to accept
streams and write to sockets; the fleet view (re-read every second) is refreshed here too.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis

from common import redis_client
from common.index import feed, keys, syncstatus
from common.index.feed import Change, Position
from query.state import QueryState

log = logging.getLogger(__name__)
BLOCK_MS = 200
REGISTRY_EVERY_S = 1.0
_MAX_SEQ = (1 << 64) - 1


@dataclass
class Batch:
    changes: list[Change]
    version: Any
    """`fs:version` as read after these changes."""
    snapshot: Any
    """The fleet view (query.scope.FleetSnapshot) as of after these changes."""
    added: dict[str, Position] = field(default_factory=dict)
    """Clusters this reader started reading (new in the registry), from where."""


def entry_id(p: Position) -> str:
    """The feed id a read after `p` starts from (exclusive)."""
    return f"{p.gen}-{_MAX_SEQ if p.seq is None else p.seq}"


class FeedReader:
    def __init__(self, st: QueryState, start: dict[str, Position], wake: socket.socket) -> None:
        self.st = st
        self.r = redis_client.connect(st.settings.redis_url, BLOCK_MS / 1000 + 5.0)
        self.pos = dict(start)
        self.version: Any = None
        """`fs:version` as last read (the hub's ticks compare it)."""
        self.snapshot: Any = None
        """The fleet view as last refreshed here (the hub's ticks compare it)."""
        self._keys = {c: keys.feed(c) for c in start}
        self._batches: deque[Batch] = deque()
        self._requested: dict[str, Position] = {}
        self._added: dict[str, Position] = {}  # new in the registry, not reported yet
        self._lock = threading.Lock()
        self._wake = wake
        self._registry_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="watch-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, cluster: str, pos: Position) -> None:
        """Read `cluster` from `pos` too (the hub already counts it there)."""
        with self._lock:
            self._requested[cluster] = pos

    def next(self) -> Batch | None:
        """The oldest batch not yet taken (it stays queued until `taken`)."""
        return self._batches[0] if self._batches else None

    def taken(self) -> None:
        self._batches.popleft()

    def _run(self) -> None:
        while True:
            try:
                self._round()
            except redis_client.ERRORS:
                log.warning("watch feed: Redis unavailable; retrying")
                time.sleep(1.0)
            except Exception:  # keep reading for the other streams
                log.exception("watch feed: read failed")
                time.sleep(1.0)

    def _round(self) -> None:
        """One read; what it read counts as read only once queued (a failure reads it again)."""
        self._new_clusters()
        got = self._read()
        version = self.r.get(keys.VERSION)
        snapshot = self.st.fleet.snapshot(self.st.settings)
        self.version, self.snapshot = version, snapshot
        if got or self._added:
            self._batches.append(Batch(got, version, snapshot, self._added))
            self._added = {}
            for change in got:
                self.pos[change.cluster] = change.position
            with contextlib.suppress(BlockingIOError, InterruptedError):
                self._wake.send(b".")  # unless the hub has wake-ups pending already

    def _new_clusters(self) -> None:
        """The clusters the hub asked for, and every second those new in the registry (their
        whole feed is new): the latter are reported, so the hub counts them from there."""
        with self._lock:
            requested, self._requested = self._requested, {}
        for c, p in requested.items():
            self.pos.setdefault(c, p)
            self._keys.setdefault(c, keys.feed(c))
        now = time.monotonic()
        if now - self._registry_at < REGISTRY_EVERY_S:
            return
        self._registry_at = now
        for c in syncstatus.registered_clusters(self.r):
            if c not in self.pos:
                self.pos[c] = self._added[c] = Position(0)
                self._keys[c] = keys.feed(c)

    def _read(self) -> list[Change]:
        if not self.pos:
            time.sleep(BLOCK_MS / 1000)  # no cluster yet: a pause, not a busy loop
            return []
        streams = {self._keys[c]: entry_id(p) for c, p in self.pos.items()}
        got: Any
        if isinstance(self.r, redis.RedisCluster):
            pipe = self.r.pipeline()
            for k, i in streams.items():
                pipe.xread({k: i})
            got = [x for reply in pipe.execute() for x in (reply or [])]
            if not got:
                time.sleep(BLOCK_MS / 1000)
        else:
            got = self.r.xread(streams, block=BLOCK_MS) or []  # type: ignore[arg-type]
        by_key = {k: c for c, k in self._keys.items()}
        out: list[Change] = []
        for key, entries in got:
            c = by_key[redis_client.text(key)]
            out += [feed.decode(c, i, f) for i, f in entries]
        return out
