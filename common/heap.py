"""The C heap of a long-running threaded process (glibc only; elsewhere these do nothing).

glibc's malloc gives each thread that contends for the heap an arena of its own, up to 8 per
core, and keeps what is freed inside it for reuse by that arena. A query worker's request
threads build and drop answers of megabytes (pages, facets, group counts) on whichever arena
they hold, so the freed memory is spread over many arenas and the process's RSS climbs with
time although the live data does not (docs/operations.md, "Memory of a query worker").
`limit_arenas` caps the arenas (as `MALLOC_ARENA_MAX` does, which wins when set), and `Trimmer`
hands free pages back to the kernel now and then (`malloc_trim`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)
M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
TRIM_EVERY_S = 60.0


@functools.cache  # find_library runs ldconfig: once per process, not per trim
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
        return None  # not glibc (musl, macOS)
    return libc


def limit_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas for threads created from now on; True when applied. An
    operator's `MALLOC_ARENA_MAX` is left as it is."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1)


def trim() -> bool:
    """Return the heap's free pages to the kernel; True when some were."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


class Trimmer(threading.Thread):
    """Calls `before` (when given: what frees memory first) and then `trim` every `every_s`
    seconds until `stop` (a daemon thread)."""

    def __init__(
        self,
        every_s: float = TRIM_EVERY_S,
        before: Callable[[], object] | None = None,
        name: str = "heap-trim",
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.every_s = every_s
        self.before = before
        self.stopped = threading.Event()
        self.trims = 0

    def run(self) -> None:
        if _libc() is None and self.before is None:
            return
        while not self.stopped.wait(self.every_s):
            if self.before is not None:
                try:
                    self.before()
                except Exception:  # the thread must outlive a failed round
                    log.exception("%s: round failed", self.name)
            trim()
            self.trims += 1

    def stop(self) -> None:
        self.stopped.set()
