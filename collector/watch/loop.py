"""The watcher's shared machinery: one asyncio event-loop thread that holds every open watch
stream of the process (common.leaf.async_watch), and a small thread pool for the lists (a list
is seconds of blocking HTTP and parsing: it must not stall the loop), and two more for the RBAC
resources' lists, which go first.

A replica watching 100 clusters keeps ~3,000 streams open; on threads that was ~3,000 threads
(and their stacks); here it is one thread, plus `LIST_WORKERS` for lists (the writers and the
recomputations are shared too: collector.watch.writers, collector.debounce).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

LIST_WORKERS = 8  # list threads a process (a replica also bounds its lists: LIST_CONCURRENCY)
RBAC_LIST_WORKERS = 2
"""Threads listing the RBAC resources, apart from the other lists: a replica taking 100 clusters
at once queues hundreds of lists, and a cluster's grants (what a revocation changes) must not
wait behind the row kinds of the clusters taken before it."""
TLS_READ_BUFFER = 4 * 1024
"""Bytes of asyncio's receive buffer per TLS connection (its default, 256 KiB, zero-filled per
connection, made each watched cluster's streams cost megabytes of resident memory:
docs/benchmarks.md, "watch_latency"; at 32 KiB, a replica holding 50 clusters of fleet M kept
62 MiB of them for ~2,000 streams; at 8 KiB, 16 MiB; at 4 KiB, 8 MiB less again: 297 -> 289 MiB
RSS, idle CPU no higher); ~99 % of a generated cluster's objects fit in 4 KiB (median 0.8), and a
bigger event is read in several calls."""
T = TypeVar("T")

_lock = threading.Lock()
_shared: WatchLoop | None = None


class WatchLoop:
    """An event loop running in its own daemon thread; `submit` coroutines from any thread."""

    def __init__(self) -> None:
        if getattr(asyncio.sslproto.SSLProtocol, "max_size", 0) > TLS_READ_BUFFER:
            asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
        self.loop = asyncio.new_event_loop()
        self.lists = concurrent.futures.ThreadPoolExecutor(
            LIST_WORKERS, thread_name_prefix="watch-list"
        )
        self.loop.set_default_executor(self.lists)
        self.rbac_lists = concurrent.futures.ThreadPoolExecutor(
            RBAC_LIST_WORKERS, thread_name_prefix="watch-rbac-list"
        )
        self.thread = threading.Thread(target=self.loop.run_forever, name="watch-loop", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; cancelling the returned future cancels it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


def shared() -> WatchLoop:
    """The process's watch loop (started on first use, lives as long as the process)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = WatchLoop()
        return _shared
