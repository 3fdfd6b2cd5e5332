"""One leaf cluster, watched: per served kind (and the 4 RBAC resources) list, then watch from the
list's resourceVersion with bookmarks; relist on 410 or a broken stream, re-watch when the server
ends a watch cleanly. Row changes go through one writer thread per cluster, in batches, to
common.index.write.store_events; RBAC changes recompile the grants (collector.watch.rbac); the checked
Istio kinds, with Services and Namespaces, are re-validated together (collector.watch.mesh).

Each resource's list-then-watch loop is a coroutine on the process's watch loop
(collector.watch.loop: one thread for every stream, lists on its small pool), not a thread, also
through an HTTP proxy; only a cluster behind a SOCKS or https:// proxy keeps a thread per watch
(common.leaf.async_watch.supported).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from collector import mesh
from collector.watch import loop as watch_loop
from collector.watch import metrics as watch_metrics
from collector.watch.mesh import CONTEXT, MeshState
from collector.watch.rbac import RBAC_API, RESOURCES, RbacState
from common.errors import ClusterError, ClusterUnreachable, FleetscopeError, LockBusy
from common.index import history, rows
from common.index.lease import Fence
from common.index.write import store_events
from common.kinds.registry import Kind, KindRegistry
from common.leaf import async_watch
from common.leaf.client import LeafClient, WatchExpired, WatchStream
from common.settings import Settings

log = logging.getLogger(__name__)
BATCH_MAX = 1000  # changes per MULTI/EXEC
QUEUE_MAX = 20_000  # encoded rows waiting for the writer (back-pressure on the watch threads)
BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)


class _Validated:
    """Queued after a validation's rows: once written, the Istio rows reflect the config."""


@dataclass(frozen=True)
class _Arrived:
    """A row change and when its event arrived (for the event-to-Redis lag)."""

    change: store_events.Change
    at: float


@dataclass(frozen=True)
class _Replace:
    """A (re)list of one kind: its rows become exactly `members`."""

    kind_key: str
    members: list[str]


class ClusterWatch:
    """Watches one cluster while `fence` (the replica's lease) is ours; `stop()` ends it."""

    def __init__(
        self,
        r: redis.Redis,
        client: LeafClient,
        kinds: KindRegistry,
        settings: Settings,
        fence: Fence,
        list_slots: threading.BoundedSemaphore | None = None,
        gated: bool = False,
    ) -> None:
        self.r, self.client, self.kinds, self.settings = r, client, kinds, settings
        self.retention = history.Retention(
            settings.history_max,
            settings.history_days,
            settings.flapping_threshold,
            settings.watch_feed_max,
        )
        self.cluster = client.name
        self.fence = fence
        # Closed (`gated`): lists and watches run but nothing is written until `open_gate`, for
        # a replica taking a cluster over from another before that one lets go (its lease).
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        self.list_slots = list_slots or threading.BoundedSemaphore(4)
        self.lost = False  # the lease moved: the replica drops this cluster
        self.stats: Counter[str] = Counter()
        self._listed: set[str] = set()  # resources listed once: a further list is a relist
        self.stop_event = threading.Event()
        self.rbac = RbacState(r, self.cluster, kinds, settings.watch_rbac_debounce_s, self.owned)
        self.mesh: MeshState | None = None
        self._queue: queue.Queue[store_events.Change | _Arrived | _Replace | _Validated] = (
            queue.Queue(QUEUE_MAX)
        )
        self.mesh_written = False  # a validation's rows were written (see healthy)
        self._streams: set[WatchStream | async_watch.AsyncWatchStream] = set()
        self._live: dict[str, float] = {}  # resource -> monotonic time of its last event
        self._rv: dict[str, str] = {}  # resource -> resourceVersion to watch from
        self._expected: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._lock = threading.Lock()
        self._async = async_watch.supported(client)
        self._ssl = async_watch.ssl_context(client) if self._async else None

    def start(self) -> None:
        self._spawn(self._start_all, "start")

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"{self.cluster}:{name}")
        self._threads.append(t)
        t.start()

    def _spawn_watch(self, res: str, api_version: str, kind: Kind | None) -> None:
        """Watch one resource: a coroutine on the shared loop (a thread if proxied)."""
        if not self._async:
            self._spawn(self._watch_loop, res, res, api_version, kind)
            return
        with self._lock:  # against stop(): no task starts after it cancelled them
            if not self.stop_event.is_set():
                coro = self._watch_loop_async(res, api_version, kind)
                self._tasks.append(watch_loop.shared().submit(coro))

    def _start_all(self) -> None:
        served = self._discover()
        if served is None:
            return
        self._expected = {k for k in served} | set(RESOURCES)
        checked = mesh.held_kinds(self.kinds, served)
        if checked:
            self.mesh = MeshState(
                self.cluster,
                [(k, served[k.key]) for k in checked],
                self.settings.watch_validate_debounce_s,
                lambda key, members: self._put(_Replace(key, members)),
                self._put,
                lambda: self._put(_Validated()),
            )
            self._expected |= set(CONTEXT)
        self._spawn(self._writer, "writer")
        self._spawn(self.rbac.run, "rbac", self.stop_event)
        if self.mesh is not None:
            self._spawn(self.mesh.run, "mesh", self.stop_event, self.owned)
            for res in CONTEXT:
                self._spawn_watch(res, mesh.CORE_API, None)
        for kind in self.kinds:
            if kind.key in served:
                self._spawn_watch(kind.key, served[kind.key], kind)
        for plural in RESOURCES:
            self._spawn_watch(plural, RBAC_API, None)

    def _discover(self) -> dict[str, str] | None:
        for attempt in range(1_000_000):
            try:
                return self.client.discover(self.kinds)
            except FleetscopeError as e:
                log.warning("discovery failed: %s", e, extra={"cluster": self.cluster})
                if self.stop_event.wait(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]):
                    return None
        return None

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            self.stop_event.set()
            streams, tasks = list(self._streams), list(self._tasks)
        for s in streams:
            s.close()
        for task in tasks:
            task.cancel()  # its stream closes as the cancellation unwinds it
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def owned(self) -> bool:
        return self.gate.is_set() and not (self.lost or self.stop_event.is_set())

    def open_gate(self) -> None:
        """The lease is ours now: write what was listed and watched meanwhile, then go on."""
        self.gate.set()
        self.rbac.touch()
        if self.mesh is not None:
            self.mesh.touch()

    def listed(self, now: float | None = None) -> bool:
        """Every resource listed and watching (what `healthy` asks, before anything written)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            live = dict(self._live)
        idle = self.settings.watch_idle_timeout_s
        return bool(self._expected) and all(
            now - live.get(res, float("-inf")) < idle for res in self._expected
        )

    def healthy(self, now: float | None = None) -> bool:
        """Every resource listed and watching, none silent past the idle timeout, and the Istio
        config validated once (its rows written)."""
        validated = self.mesh is None or self.mesh_written  # a validation's rows are stored
        return self.gate.is_set() and validated and self.listed(now)

    def rbac_healthy(self, now: float | None = None) -> bool:
        return self.healthy(now) and self.rbac.compiles > 0

    # -- one resource: list, then watch; relist on 410 or a broken stream -------------------

    def _watch_loop(self, res: str, api_version: str, kind: Kind | None) -> None:
        plural = kind.plural if kind is not None else res
        failures = 0
        while not self.stop_event.is_set():
            try:
                if not self._rv.get(res):
                    self._list(res, api_version, plural, kind)
                    if self.stop_event.is_set():
                        return
                self._watch(res, api_version, plural, kind, self._rv[res])
                failures = 0  # ended by the server's timeout: watch again from the last rv
            except FleetscopeError as e:
                failures, delay_s = self._failed(res, e, failures)
                if delay_s is None:
                    return
                self.stop_event.wait(delay_s)

    async def _watch_loop_async(self, res: str, api_version: str, kind: Kind | None) -> None:
        """`_watch_loop` on the event loop: the list runs on the loop's list pool."""
        plural = kind.plural if kind is not None else res
        loop = asyncio.get_running_loop()
        failures = 0
        while not self.stop_event.is_set():
            try:
                if not self._rv.get(res):
                    await loop.run_in_executor(None, self._list, res, api_version, plural, kind)
                    if self.stop_event.is_set():
                        return
                await self._watch_async(res, api_version, plural, kind, self._rv[res])
                failures = 0
            except FleetscopeError as e:
                failures, delay_s = self._failed(res, e, failures)
                if delay_s is None:
                    return
                await asyncio.sleep(delay_s)
            except Exception:
                log.exception("watch of %s failed", res, extra={"cluster": self.cluster})
                self._mark_down(res)
                await asyncio.sleep(BACKOFF_S[-1])

    async def _watch_async(
        self, res: str, api_version: str, plural: str, kind: Kind | None, rv: str
    ) -> None:
        s = self.settings
        stream = await async_watch.open_watch(
            self.client,
            self._ssl,
            api_version,
            plural,
            rv,
            s.watch_timeout_s,
            s.watch_idle_timeout_s,
        )
        with self._lock:
            self._streams.add(stream)
            self._live[res] = time.monotonic()
        try:
            async for event_type, obj in stream:
                if self.stop_event.is_set():
                    return
                item = self._event(res, plural, kind, api_version, event_type, obj)
                while item is not None and not self.stop_event.is_set():
                    try:
                        self._queue.put_nowait(item)
                        item = None
                    except queue.Full:  # the writer is behind: wait, without stalling the loop
                        await asyncio.sleep(0.05)
        finally:
            stream.close()
            with self._lock:
                self._streams.discard(stream)

    def _event(
        self,
        res: str,
        plural: str,
        kind: Kind | None,
        api_version: str,
        event_type: str,
        obj: dict[str, Any],
    ) -> _Arrived | None:
        """One watch event: bookkeeping, RBAC and Istio state; the row change to queue."""
        with self._lock:
            self._live[res] = time.monotonic()
        new_rv = (obj.get("metadata") or {}).get("resourceVersion")
        if new_rv:
            self._rv[res] = str(new_rv)
        if event_type == "BOOKMARK":
            return None
        self.stats["events"] += 1
        watch_metrics.EVENTS.inc()
        if kind is None and res in CONTEXT and self.mesh is not None:
            self.mesh.event(res, event_type, obj)
        elif kind is None:
            self.rbac.event(plural, event_type, obj)
        elif self.mesh is not None and kind.key in self.mesh.kinds:
            self.mesh.event(kind.key, event_type, obj)
        else:
            change = _change(self.cluster, kind, api_version, event_type, obj)
            return _Arrived(change, time.monotonic())
        return None

    def _failed(self, res: str, e: FleetscopeError, failures: int) -> tuple[int, float | None]:
        """After a list or watch of `res` raised `e`: the failures so far and how long to wait
        before trying again (0 after a 410: list at once), None when the loop should end."""
        if isinstance(e, WatchExpired):
            self.stats["expired"] += 1
            watch_metrics.EXPIRED.inc()
            self._rv[res] = ""
            return failures, 0.0
        if isinstance(e, ClusterError) and self._context_unavailable(res, e):
            return failures, None
        self._mark_down(res)
        if self.stop_event.is_set():
            return failures, None
        failures += 1
        self._broken(res, e)
        return failures, BACKOFF_S[min(failures - 1, len(BACKOFF_S) - 1)]

    def _broken(self, res: str, e: FleetscopeError) -> None:
        """A list or watch failed. Unreachable (refused, timed out, cut, silent): the watch
        resumes from the last resourceVersion seen, as client-go's reflector does (the server
        replays what was missed, or answers 410 and the kind is listed again); anything else
        (an error answer, a malformed event): the kind is listed again."""
        self.stats["broken"] += 1
        if isinstance(e, ClusterUnreachable) and self._rv.get(res):
            log.info("watch of %s broke (%s); resuming", res, e, extra={"cluster": self.cluster})
            return
        log.info("watch of %s broke (%s); relisting", res, e, extra={"cluster": self.cluster})
        self._rv[res] = ""

    def _context_unavailable(self, res: str, e: ClusterError) -> bool:
        """Services or Namespaces cannot be listed at all (403, 404): as in the full sync, the
        Istio rows then say they were not validated, and that watch stops (True)."""
        if res not in CONTEXT or self.mesh is None or self._rv.get(res):
            return False
        log.warning(
            "cannot list %s, so Istio config is not validated: %s",
            res,
            e,
            extra={"cluster": self.cluster},
        )
        with self._lock:
            self._expected.discard(res)
        self.mesh.unavailable(res)
        return True

    def _list(self, res: str, api_version: str, plural: str, kind: Kind | None) -> None:
        with self.list_slots:
            if self.stop_event.is_set():
                return
            items, rv = self.client.list_snapshot(api_version, plural)
        self.stats["lists"] += 1
        if res in self._listed:
            watch_metrics.RELISTS.inc()
        self._listed.add(res)
        if kind is None and res in CONTEXT and self.mesh is not None:
            self.mesh.replace(res, items)
        elif kind is None:
            self.rbac.replace(plural, items)
        elif self.mesh is not None and kind.key in self.mesh.kinds:
            self.mesh.replace(kind.key, items)
        else:
            members = [rows.member(self.cluster, kind, api_version, o) for o in items]
            self._put(_Replace(kind.key, members))
        self._rv[res] = rv

    def _watch(self, res: str, api_version: str, plural: str, kind: Kind | None, rv: str) -> None:
        s = self.settings
        stream = self.client.watch(
            api_version, plural, rv, s.watch_timeout_s, s.watch_idle_timeout_s
        )
        with self._lock:
            self._streams.add(stream)
            self._live[res] = time.monotonic()
        try:
            for event_type, obj in stream:
                if self.stop_event.is_set():
                    return
                item = self._event(res, plural, kind, api_version, event_type, obj)
                if item is not None:
                    self._put(item)
        finally:
            with self._lock:
                self._streams.discard(stream)

    def _mark_down(self, res: str) -> None:
        with self._lock:
            self._live.pop(res, None)

    def _put(self, item: store_events.Change | _Arrived | _Replace | _Validated) -> None:
        while not self.stop_event.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    # -- the writer: batches of changes, one MULTI/EXEC each ------------------------------------

    def _writer(self) -> None:
        pending: list[store_events.Change | _Arrived] = []
        while not self.gate.wait(0.5):  # a take-over: nothing is written before the lease
            if self.stop_event.is_set():
                return
        while not self.stop_event.is_set():
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            items = [item]
            while len(items) < BATCH_MAX:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for it in items:
                if isinstance(it, _Replace):
                    self._write_arrived(pending)
                    pending = []
                    self._write(
                        store_events.kind_changes(self.r, self.cluster, it.kind_key, it.members)
                    )
                elif isinstance(it, _Validated):
                    self._write_arrived(pending)
                    pending = []
                    self.mesh_written = True
                else:
                    pending.append(it)
            self._write_arrived(pending)
            pending = []

    def _write_arrived(self, pending: list[store_events.Change | _Arrived]) -> None:
        """Write `pending`; the lag of those that came from watch events (validated Istio rows
        come from a recomputation, not one event)."""
        changes = [p.change if isinstance(p, _Arrived) else p for p in pending]
        if changes and self._write(changes):
            now = time.monotonic()
            for p in pending:
                if isinstance(p, _Arrived):
                    watch_metrics.LAG.observe(now - p.at)

    def _write(self, changes: list[store_events.Change]) -> bool:
        """Apply `changes` (retried until written or stopped); True once written."""
        while changes and not self.stop_event.is_set():
            try:
                stats = store_events.apply_changes(
                    self.r, self.cluster, changes, self.fence, None, self.retention
                )
                self.stats["written"] += stats.added + stats.removed + stats.updated
                self.stats["batches"] += 1
                return True
            except LockBusy:
                if not self.stop_event.is_set():  # else dropped (handed over): expected
                    log.warning("watch lease lost; stopping", extra={"cluster": self.cluster})
                self.lost = True
                self.stop_event.set()
            except (FleetscopeError, redis.RedisError, RedisClusterException) as e:
                log.warning("could not write events: %s", e, extra={"cluster": self.cluster})
                self.stop_event.wait(1.0)
        return False


def _change(
    cluster: str, kind: Kind, api_version: str, event_type: str, obj: dict[str, Any]
) -> store_events.Change:
    if event_type == "DELETED":
        meta = obj.get("metadata") or {}
        identity = rows.sort_key(str(meta.get("namespace") or ""), kind.key, str(meta.get("name")))
        return store_events.Change(identity, None)
    return store_events.Change.of(rows.member(cluster, kind, api_version, obj))
