"""The watch hub's reader: one thread that reads every cluster's change feed (common.index.feed)
with its own Redis connection and hands the hub batches of changes.

One XREAD BLOCK over all the feeds (polled on a Redis Cluster: below), then the grants version
(`fs:version`) read after it: an RBAC change made before these writes has raised
it by then, so the hub re-resolves access before sending them (the list path's bound). Keeping
the Redis waits and the reply decoding on this thread leaves the hub's thread free to accept
streams and write to sockets; the fleet view (re-read every second) is refreshed here too.

On a Redis Cluster an XREAD names one slot, so every cluster's feed is a command of its own,
polled: a fleet of 1,000 clusters was 1,000 XREADs every 200 ms (and, through redis-py's
cluster pipeline, two `COMMAND GETKEYS` each, its way of finding XREAD's key: 15,000 commands a
second on a still fleet, docs/benchmarks.md "Fleet XL"). Each round there first reads the
fleet's generation (`keys.FLEET_GENERATION`, raised by every writer after a write that appends
to a feed) and reads the feeds only when it moved, when a cluster was added, or when the last
read is `keys.FLEET_GENERATION_MAX_AGE_S` old (a writer that died before raising it); the
XREADs go out through `redis_client.pipelined`, one write per shard and no key lookups.
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
    expired: set[str] = field(default_factory=set)
    """Clusters whose feed was trimmed past where this reader was (it fell behind the feed's
    retention): entries between were lost to it, so every stream must list again (410)."""


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
        self._fleet_seen: tuple[Any] | None = None
        """On a Redis Cluster: (the fleet's generation the feeds were last read at,); None: read
        them next round."""
        self._fleet_read_at = 0.0
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
            expired = self._expired(got)
            self._batches.append(Batch(got, version, snapshot, self._added, expired))
            self._added = {}
            for change in got:
                self.pos[change.cluster] = change.position
            with contextlib.suppress(BlockingIOError, InterruptedError):
                self._wake.send(b".")  # unless the hub has wake-ups pending already

    def _expired(self, got: list[Change]) -> set[str]:
        """The clusters whose first entry read is not the one right after this reader's
        position and whose feed was trimmed past it (a generation may write no entry, so a
        gap alone proves nothing: `feed.expired` asks the stream)."""
        first: dict[str, Change] = {}
        for change in got:
            first.setdefault(change.cluster, change)
        out = set()
        for c, change in first.items():
            if change.entry != self.pos[c].next_id() and feed.expired(self.r, c, self.pos[c]):
                log.warning("watch feed: %s was trimmed past this reader; streams list again", c)
                out.add(c)
        return out

    def _new_clusters(self) -> None:
        """The clusters the hub asked for, and every second those new in the registry (their
        whole feed is new): the latter are reported, so the hub counts them from there."""
        with self._lock:
            requested, self._requested = self._requested, {}
        for c, p in requested.items():
            self.pos.setdefault(c, p)
            self._keys.setdefault(c, keys.feed(c))
            self._fleet_seen = None
        now = time.monotonic()
        if now - self._registry_at < REGISTRY_EVERY_S:
            return
        self._registry_at = now
        for c in syncstatus.registered_clusters(self.r):
            if c not in self.pos:
                self.pos[c] = self._added[c] = Position(0)
                self._keys[c] = keys.feed(c)
                self._fleet_seen = None

    def _read(self) -> list[Change]:
        if not self.pos:
            time.sleep(BLOCK_MS / 1000)  # no cluster yet: a pause, not a busy loop
            return []
        if isinstance(self.r, redis.RedisCluster):
            got = self._read_cluster()
            if not got:
                time.sleep(BLOCK_MS / 1000)
            return got
        streams = {self._keys[c]: entry_id(p) for c, p in self.pos.items()}
        replies: Any = self.r.xread(streams, block=BLOCK_MS) or []  # type: ignore[arg-type]
        by_key = {k: c for c, k in self._keys.items()}
        out: list[Change] = []
        for key, entries in replies:
            c = by_key[redis_client.text(key)]
            out += [feed.decode(c, i, f) for i, f in entries]
        return out

    def _read_cluster(self) -> list[Change]:
        """Every feed past its position, only if the fleet's generation moved since they were
        last read (or that read is too old to trust it: see the module's docstring). The fleet's
        generation is read before the feeds: a write after that read either is in them or
        raises it again for the next round."""
        fleet = self.r.get(keys.FLEET_GENERATION)
        now = time.monotonic()
        if (
            self._fleet_seen == (fleet,)
            and now - self._fleet_read_at < keys.FLEET_GENERATION_MAX_AGE_S
        ):
            return []
        clusters = list(self.pos)
        commands = [("XREAD", "STREAMS", self._keys[c], entry_id(self.pos[c])) for c in clusters]
        replies = redis_client.pipelined(self.r, commands)
        out: list[Change] = []
        for c, reply in zip(clusters, replies, strict=True):
            # raw: [[key, [[id, [field, value, ...]], ...]]] (a map of key to entries on RESP3)
            streams = reply.values() if isinstance(reply, dict) else (e for _, e in reply or ())
            for entries in streams:
                for i, flat in entries:
                    out.append(feed.decode(c, i, dict(zip(flat[::2], flat[1::2], strict=True))))
        self._fleet_seen = (fleet,)
        self._fleet_read_at = now
        return out
