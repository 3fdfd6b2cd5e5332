"""One leaf cluster, watched: per served kind (and the 4 RBAC resources) list, then watch from the
list's resourceVersion with bookmarks; relist on 410 or a broken stream, re-watch when the server
ends a watch cleanly. Row changes queue per cluster and the process's writer threads
(collector.watch.writers) write them in order, in batches, to common.index.write.store_events;
RBAC changes recompile the grants (collector.watch.rbac); the checked Istio kinds, with Services
and Namespaces, are re-validated together (collector.watch.mesh), both on the shared recompute
pool (collector.debounce).

The first build (every kind's first list, and the first validation's Istio rows) is held in
memory and written once, as a full sync writes a snapshot: `blockedBy` is settled in memory
once for the cluster (common.index.graph.Snapshot), not read back from Redis per kind. Later
lists and events are batches settled against what is stored (common.index.graph.settle).

Every write also stores, in the same transaction, the resourceVersion each watched kind's rows
are at (`keys.resume`: the last event or list of that kind in the write, or a bookmark before
it). A replica taking over a cluster nobody holds (its holder died, stopped, or lost the lease)
starts each such kind's watch from there instead of listing it, as client-go's reflector resumes
a broken watch: the leaf replays what happened since (or answers 410, and that kind is listed),
so a take-over costs a few lists (RBAC, and the Istio config and context validation keeps in
memory), not a rebuild. Each replayed event was not written before (the stored point is at
least the newest written event's), so nothing is recorded twice.

Each resource's list-then-watch loop, and the cluster's start (discovery), is a coroutine on the
process's watch loop (collector.watch.loop: one thread for every stream, lists on its small
pool), not a thread, also through an HTTP proxy; only a cluster behind a SOCKS or https:// proxy
keeps a thread per watch (common.leaf.async_watch.supported). No thread is the cluster's own
otherwise.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from collector import mesh
from collector.watch import loop as watch_loop
from collector.watch import metrics as watch_metrics
from collector.watch import writers
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
BUILD_CUT_FAILURES = (
    3  # a resource's first list failing this often: the build is written without it
)


def watch_timeout(settings: Settings) -> float:
    """The server-side timeout one watch request asks for: a random time between
    `watch_timeout_s` and twice it, as client-go's reflector picks one between its minimum and
    twice that. A replica opens its clusters' ~4,000 watches within a minute of each other; with
    one timeout for all they would end and open again together every 5 minutes, a burst on the
    leaves and on the replica."""
    return settings.watch_timeout_s * (1.0 + random.random())


class _Validated:
    """Queued after a validation's rows: once written, the Istio rows reflect the config."""


@dataclass(frozen=True)
class _Arrived:
    """A row change and when its event arrived (for the event-to-Redis lag); the event's
    resourceVersion (`keys.resume`)."""

    change: store_events.Change
    at: float
    rv: str = ""


@dataclass(frozen=True)
class _Replace:
    """A (re)list of one kind: its rows become exactly `members`; `rv` the list's
    resourceVersion (empty for the validated Istio rows: no list of theirs)."""

    kind_key: str
    members: list[str]
    rv: str = ""


@dataclass(frozen=True)
class _Mark:
    """A bookmark of a row kind: nothing of that kind happened up to `rv` since what is queued
    before it (a resume point, written with the next write)."""

    kind_key: str
    rv: str


_Item = store_events.Change | _Arrived | _Replace | _Validated | _Mark


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
        resume: bool = False,
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
        # Watch the row kinds from the resume points stored with the rows (`keys.resume`)
        # instead of listing them: for a cluster nobody else writes any more.
        self.resume = resume and not gated
        self.resumed: set[str] = set()  # the kinds watched from a stored resume point
        self._carry: dict[str, str] = {}  # resume points not written yet (writer threads only)
        self.list_slots = list_slots or threading.BoundedSemaphore(4)
        self.lost = False  # the lease moved: the replica drops this cluster
        self.stats: Counter[str] = Counter()
        self._listed: set[str] = set()  # resources listed once: a further list is a relist
        self.stop_event = threading.Event()
        self.rbac = RbacState(
            r, self.cluster, kinds, settings.watch_rbac_debounce_s, self.owned, fence
        )
        self.mesh: MeshState | None = None
        self._queue: queue.Queue[_Item] = queue.Queue(QUEUE_MAX)
        self.mesh_written = False  # a validation's rows were written (see healthy)
        self._streams: set[WatchStream | async_watch.AsyncWatchStream] = set()
        self._live: dict[str, float] = {}  # resource -> monotonic time of its last event
        self._rv: dict[str, str] = {}  # resource -> resourceVersion to watch from
        self._expected: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._lock = threading.Condition()  # notified when a stream is let go of
        self._async = async_watch.supported(client)
        self._ssl = async_watch.ssl_context(client) if self._async else None
        self._writers = writers.shared()
        # The first build, held until every served kind was listed (and the Istio rows
        # validated once): kind key -> identity -> member; None once written.
        self._build: dict[str, dict[str, str]] | None = {}
        self.built = False  # the first build is written (watch_metrics.BUILT)
        self._build_kinds: set[str] | None = None  # what the build waits for (after discovery)
        self._build_cut = False  # a resource's first list keeps failing: write without it
        self._build_validated = False  # the first validation's rows are in the build
        self._build_arrived: list[float] = []  # when the build's watch events arrived (lag)

    def start(self) -> None:
        self._start_rbac()
        if not self._async:
            self._spawn(self._start_all, "start")
            return
        with self._lock:
            if not self.stop_event.is_set():
                self._tasks.append(watch_loop.shared().submit(self._start_async()))

    def _start_rbac(self) -> None:
        """The four RBAC resources first, before discovery (they need none) and outside the
        replica's list slots (their lists are small, on a lane of their own: loop.RBAC_LIST_WORKERS):
        a cluster taken over gets its grants from its own RBAC within seconds, however many row
        kinds of other clusters taken with it wait to be listed (until then a revocation there
        waits too)."""
        with self._lock:
            self._expected |= set(RESOURCES)
        self.rbac.start(self.stop_event.is_set)
        for plural in RESOURCES:
            self._spawn_watch(plural, RBAC_API, None)

    async def _start_async(self) -> None:
        """`_start_all` on the event loop: discovery on the loop's list pool."""
        loop = asyncio.get_running_loop()
        for attempt in range(1_000_000):
            try:
                served = await loop.run_in_executor(None, self.client.discover, self.kinds)
                break
            except FleetscopeError as e:
                log.warning("discovery failed: %s", e, extra={"cluster": self.cluster})
                await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
                if self.stop_event.is_set():
                    return
        else:
            return
        points = await loop.run_in_executor(None, self._resume_points)
        if not self.stop_event.is_set():
            self._begin(served, points)

    def _resume_points(self) -> dict[str, str]:
        """The stored resume points when this watch resumes (`resume`); none else, or when
        Redis cannot be read (then every kind is listed, as before)."""
        if not self.resume:
            return {}
        try:
            return store_events.resume_points(self.r, self.cluster)
        except (redis.RedisError, RedisClusterException) as e:
            log.warning("cannot read resume points: %s", e, extra={"cluster": self.cluster})
            return {}

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
        if served is not None:
            self._begin(served, self._resume_points())

    def _begin(self, served: dict[str, str], points: dict[str, str]) -> None:
        """Discovery done: keep the Istio state, start the recomputations and the watches (the
        row kinds with a resume point from it, and then no first build: the rows are stored)."""
        self._build_kinds = set(served)
        with self._lock:
            self._expected |= set(served)
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
            with self._lock:
                self._expected |= set(CONTEXT)
        held = self.mesh.kinds if self.mesh is not None else {}
        for kind in self.kinds:
            rv = points.get(kind.key)
            if rv and kind.key in served and kind.key not in held:
                self._rv[kind.key] = rv
                self.resumed.add(kind.key)
        if self.resumed:
            self._build = None  # the rows are stored: batches from the start
            self.built = True
            log.info(
                "resuming %d kinds from their stored resourceVersions",
                len(self.resumed),
                extra={"cluster": self.cluster},
            )
        if self.mesh is not None:
            self.mesh.start(self.stop_event.is_set, self.owned)
            for res in CONTEXT:
                self._spawn_watch(res, mesh.CORE_API, None)
        for kind in self.kinds:
            if kind.key in served:
                self._spawn_watch(kind.key, served[kind.key], kind)

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
        with self._lock:  # the watch loop unwinds the cancelled streams: let them go first
            self._lock.wait_for(lambda: not self._streams, max(0.0, deadline - time.monotonic()))

    def owned(self) -> bool:
        return self.gate.is_set() and not (self.lost or self.stop_event.is_set())

    def open_gate(self) -> None:
        """The lease is ours now: write what was listed and watched meanwhile, then go on."""
        self.gate.set()
        self._writers.wake(self)
        self.rbac.touch()
        if self.mesh is not None:
            self.mesh.touch()

    def listed(self, now: float | None = None) -> bool:
        """Every resource listed and watching (what `healthy` asks, before anything written);
        never before discovery said which (the RBAC resources start before it)."""
        return self._build_kinds is not None and self._live_all(self._expected, now)

    def _live_all(self, resources: Iterable[str], now: float | None = None) -> bool:
        """Each of `resources` (at least one) listed and watching, none silent past the idle
        timeout."""
        now = time.monotonic() if now is None else now
        with self._lock:  # `_expected` grows under it too
            live, wanted = dict(self._live), list(resources)
        idle = self.settings.watch_idle_timeout_s
        return bool(wanted) and all(now - live.get(res, float("-inf")) < idle for res in wanted)

    def healthy(self, now: float | None = None) -> bool:
        """Every resource listed and watching, none silent past the idle timeout, and the Istio
        config validated once (its rows written)."""
        validated = self.mesh is None or self.mesh_written  # a validation's rows are stored
        return self.gate.is_set() and validated and self.listed(now)

    def rbac_healthy(self, now: float | None = None) -> bool:
        """The cluster's grants are current: the lease is ours, its four RBAC resources are
        listed and watching (none silent past the idle timeout), and its grants were stored at
        least once. The row kinds' and Istio's streams are not asked: one silent stream of a
        row kind stops the objects' heartbeat, but says nothing of what users may see, and a
        cluster whose RBAC goes stale is hidden from everyone (`rbac_max_age_s`; in the
        thirteenth L soak a cluster was hidden so, its RBAC streams well, for minutes)."""
        return self.gate.is_set() and self._live_all(RESOURCES, now) and self.rbac.stored > 0

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
                    lane = watch_loop.shared().rbac_lists if _is_rbac(res, kind) else None
                    await loop.run_in_executor(lane, self._list, res, api_version, plural, kind)
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
            watch_timeout(s),
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
                        self._writers.wake(self)
                    except queue.Full:  # the writer is behind: wait, without stalling the loop
                        await asyncio.sleep(0.05)
        finally:
            stream.close()
            with self._lock:
                self._streams.discard(stream)
                self._lock.notify_all()

    def _event(
        self,
        res: str,
        plural: str,
        kind: Kind | None,
        api_version: str,
        event_type: str,
        obj: dict[str, Any],
    ) -> _Arrived | _Mark | None:
        """One watch event: bookkeeping, RBAC and Istio state; the row change to queue."""
        with self._lock:
            self._live[res] = time.monotonic()
        new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if new_rv:
            self._rv[res] = new_rv
        rows_kind = kind is not None and (self.mesh is None or kind.key not in self.mesh.kinds)
        if event_type == "BOOKMARK":
            return _Mark(res, new_rv) if rows_kind and new_rv else None
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
            return _Arrived(change, time.monotonic(), new_rv)
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
        if failures >= BUILD_CUT_FAILURES and res not in RESOURCES and res not in self._listed:
            self._build_cut = True  # its rows, if any, stay as stored: write the rest
            self._writers.wake(self)
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
        held = self.mesh is not None and kind is not None and kind.key in self.mesh.kinds
        plain = kind if kind is not None and not held else None
        items: list[dict[str, Any]] = []
        pages: list[list[str]] = []
        with contextlib.nullcontext() if _is_rbac(res, kind) else self.list_slots:
            if self.stop_event.is_set():
                return
            if plain is not None:  # rows built a page at a time: one page's objects alive
                read = functools.partial(rows.members, self.cluster, plain, api_version)
                pages, rv = self.client.list_read(api_version, plural, read)
            else:
                items, rv = self.client.list_snapshot(api_version, plural)
        self.stats["lists"] += 1
        if res in self._listed:
            watch_metrics.RELISTS.inc()
        self._listed.add(res)
        if plain is not None:
            self._put(_Replace(plain.key, [m for page in pages for m in page], rv))
        elif kind is None and res in CONTEXT and self.mesh is not None:
            self.mesh.replace(res, items)
        elif kind is None:
            self.rbac.replace(plural, items)
        else:
            assert self.mesh is not None
            self.mesh.replace(kind.key, items)
        self._rv[res] = rv

    def _watch(self, res: str, api_version: str, plural: str, kind: Kind | None, rv: str) -> None:
        s = self.settings
        stream = self.client.watch(
            api_version, plural, rv, watch_timeout(s), s.watch_idle_timeout_s
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
                self._lock.notify_all()

    def _mark_down(self, res: str) -> None:
        with self._lock:
            self._live.pop(res, None)

    def _put(self, item: _Item) -> None:
        while not self.stop_event.is_set():
            try:
                self._queue.put(item, timeout=0.5)
            except queue.Full:
                continue
            self._writers.wake(self)
            return

    # -- writing: batches of changes, one MULTI/EXEC each, by the shared writers -------------

    def pending(self) -> bool:
        """Something is queued and may be written now (collector.watch.writers)."""
        return self.gate.is_set() and not self.stop_event.is_set() and not self._queue.empty()

    def drain(self) -> bool:
        """Write one batch of what is queued, in order (a take-over writes nothing before the
        lease is ours: `open_gate` wakes the writers); True when more is waiting."""
        if not self.gate.is_set() or self.stop_event.is_set():
            return False
        items: list[_Item] = []
        while len(items) < BATCH_MAX:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        if self._build is not None:
            items = self._hold(items)
        self._write_items(items)
        return self.pending()

    def _hold(self, items: list[_Item]) -> list[_Item]:
        """Fold `items` into the first build while it is held; write it once complete. What
        the build cannot hold (a change of a kind not listed yet) writes the build first; the
        items from there on are returned, to be written as batches."""
        build = self._build
        assert build is not None
        for n, it in enumerate(items):
            if isinstance(it, _Replace):
                build[it.kind_key] = {rows.identity(m): m for m in it.members}
                self._fold(it)
                continue
            if isinstance(it, _Validated):
                self._build_validated = True
                continue
            if isinstance(it, _Mark):
                self._fold(it)
                continue
            change = it.change if isinstance(it, _Arrived) else it
            kind = build.get(rows.split_identity(change.identity)[1])
            if kind is None:
                self._flush_build()
                return items[n:]
            if change.member is None:
                kind.pop(change.identity, None)
            else:
                kind[change.identity] = change.member
            if isinstance(it, _Arrived):
                self._build_arrived.append(it.at)
                self._fold(it)
        want = self._build_kinds
        if want is not None and (self._build_cut or build.keys() >= want):
            self._flush_build()
        return []

    def _flush_build(self) -> None:
        """Write the first build in one write (store_events.first_build); batches from now on."""
        build, self._build = self._build, None
        arrived, self._build_arrived = self._build_arrived, []
        points = dict(self._carry)
        if build and not self._written(
            lambda: store_events.first_build(
                self.r, self.cluster, build, self.fence, self.retention, points
            )
        ):
            return
        self._carry.clear()
        self.built = True
        if self._build_validated:
            self.mesh_written = True
        now = time.monotonic()
        for at in arrived:
            watch_metrics.LAG.observe(now - at)

    def _write_items(self, items: list[_Item]) -> None:
        """Write `items` in order: batches of changes, and a relisted kind's rows. The resume
        points are folded in queue order as they go (`_carry`), so each write carries the
        points of exactly what is written by then, bookmarks included."""
        pending: list[store_events.Change | _Arrived] = []
        replaced: dict[str, list[str]] = {}  # consecutive lists: one read of the rows for all
        for n, it in enumerate(items):
            if isinstance(it, _Replace):
                self._write_arrived(pending)
                pending = []
                replaced[it.kind_key] = it.members
                self._fold(it)  # the stored rows equal the list once written (or already do)
                if n + 1 == len(items) or not isinstance(items[n + 1], _Replace):
                    self._write(store_events.kinds_changes(self.r, self.cluster, replaced))
                    replaced = {}
            elif isinstance(it, _Validated):
                self._write_arrived(pending)
                pending = []
                self.mesh_written = True
            elif isinstance(it, _Mark):
                self._fold(it)
            else:
                self._fold(it)
                pending.append(it)
        self._write_arrived(pending)

    def _fold(self, it: _Item) -> None:
        """Note the resume point `it` carries (`_carry`, folded in queue order: the next write
        stores every point noted before it, the first build's included)."""
        if isinstance(it, _Replace | _Mark) and it.rv:
            self._carry[it.kind_key] = it.rv
        elif isinstance(it, _Arrived) and it.rv:
            self._carry[rows.split_identity(it.change.identity)[1]] = it.rv

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
        """Apply `changes` with the resume points carried so far (retried until written or
        stopped); True once written. Only this cluster's one writer thread at a time runs it
        (collector.watch.writers), so `_carry` needs no lock."""
        if not changes:
            return False
        points = dict(self._carry)
        written = self._written(
            lambda: store_events.apply_changes(
                self.r, self.cluster, changes, self.fence, None, self.retention, points
            )
        )
        if written:
            self._carry.clear()
        return written

    def _written(self, write: Callable[[], store_events.EventStats]) -> bool:
        """Run `write` until it is done or the watch stops; True once written."""
        while not self.stop_event.is_set():
            try:
                stats = write()
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
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        identity = rows.identity_of(namespace, kind.key, name)
        return store_events.Change(identity, None)
    return store_events.Change.of(rows.member(cluster, kind, api_version, obj))


def _is_rbac(res: str, kind: Kind | None) -> bool:
    """One of the four RBAC resources (not a row kind): listed on the RBAC lane, outside the
    list slots, so a take-over stores grants before its row lists."""
    return kind is None and res in RESOURCES
