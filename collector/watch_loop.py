"""The watcher's shared machinery: one asyncio event-loop thread that holds every open watch
stream of the process (common.leaf.async_watch), and a small thread pool for the lists (a list
is seconds of blocking HTTP and parsing: it must not stall the loop).

A replica watching 100 clusters keeps ~3,000 streams open; on threads that was ~3,000 threads
(and their stacks); here it is one thread, plus `LIST_WORKERS` for lists and a writer, an RBAC
and (with Istio kinds) a validation thread per cluster.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

LIST_WORKERS = 8  # list threads a process (a replica also bounds its lists: LIST_CONCURRENCY)
T = TypeVar("T")

_lock = threading.Lock()
_shared: WatchLoop | None = None


class WatchLoop:
    """An event loop running in its own daemon thread; `submit` coroutines from any thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.lists = concurrent.futures.ThreadPoolExecutor(
            LIST_WORKERS, thread_name_prefix="watch-list"
        )
        self.loop.set_default_executor(self.lists)
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
