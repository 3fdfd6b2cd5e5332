"""The watcher's debounced recomputations (grants, Istio validation): one scheduler for both.

`Debounced.mark()` after a change runs the work at most once per debounce window (changes
within it join the batch), on a small pool shared by every cluster of the process, timed by
one timer thread: a replica holding 100 clusters needs no thread per cluster for them.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
WORKERS = 3  # recompute threads a process (the work is CPU: the GIL bounds it anyway)
RETRY_S = 1.0  # after a failed run, on top of the debounce window


class Timers:
    """One daemon thread calling each `call_later` function, when due, on a small pool."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix="watch-recompute"
        )
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="watch-timers", daemon=True)
        self.thread.start()

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._due, (time.monotonic() + delay_s, next(self._seq), fn))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._due:
                    self._cond.wait()
                    continue
                wait_s = self._due[0][0] - time.monotonic()
                if wait_s > 0:
                    self._cond.wait(wait_s)
                    continue
                fn = heapq.heappop(self._due)[2]
            self.pool.submit(fn)


_lock = threading.Lock()
_shared: Timers | None = None


def shared() -> Timers:
    """The process's timers and recompute pool (started on first use)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = Timers()
        return _shared


class Debounced:
    """`work` run once `mark()` was called, at most once per `debounce_s`, when `ready()`, never
    twice at once, never after `stopped()`; one of `errors` is logged and retried a second
    later.

    By default a run waits `debounce_s` after the first change (trailing edge). With `leading`,
    a change after a quiet window runs at once and only changes within `debounce_s` of the last
    run wait for the rest of the window: the same bound on runs, without the wait on a lone
    change (a revoked RoleBinding)."""

    def __init__(
        self,
        debounce_s: float,
        ready: Callable[[], bool],
        work: Callable[[], object],
        errors: tuple[type[BaseException], ...],
        what: str,
        cluster: str,
        stopped: Callable[[], bool],
        leading: bool = False,
    ) -> None:
        self.debounce_s, self.ready, self.work = debounce_s, ready, work
        self.errors, self.what, self.cluster, self.stopped = errors, what, cluster, stopped
        self._lock = threading.Lock()
        self._dirty = False
        self._busy = False  # scheduled or running: a mark then only sets `_dirty`
        self.leading = leading
        self._last = float("-inf")  # monotonic time of the last run

    def mark(self) -> None:
        """Something changed: run the work after the debounce window."""
        with self._lock:
            self._dirty = True
            if self._busy or self.stopped():
                return
            self._busy = True
            delay_s = self.debounce_s
            if self.leading:
                delay_s = max(0.0, self._last + self.debounce_s - time.monotonic())
        shared().call_later(delay_s, self._run)

    def _run(self) -> None:
        with self._lock:
            if self.stopped():
                self._busy = False
                return
            self._dirty = False
        delay_s = self.debounce_s
        try:
            if self.ready():
                self._last = time.monotonic()
                self.work()
        except self.errors as e:
            log.warning("could not %s: %s; retrying", self.what, e, extra={"cluster": self.cluster})
            delay_s += RETRY_S
            with self._lock:
                self._dirty = True
        except Exception:
            log.exception("could not %s", self.what, extra={"cluster": self.cluster})
        with self._lock:
            again = self._dirty and not self.stopped()
            self._busy = again
        if again:
            shared().call_later(delay_s, self._run)
