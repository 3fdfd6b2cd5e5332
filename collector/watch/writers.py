"""The watcher's writer threads: a few per process, shared by every watched cluster.

Each cluster keeps its own queue of row changes (collector.watch.cluster); `wake(cluster)` puts
the cluster in line, and a writer thread takes one cluster at a time and drains a batch of it
(`drain()`: one MULTI/EXEC, in queue order), then puts it back in line when more is waiting. A
cluster is never held by two writers at once, so its writes stay in order; clusters take turns,
so a long first build does not hold up another cluster's live changes for more than a batch.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Protocol

log = logging.getLogger(__name__)
WRITERS = 4  # writer threads a process (Redis round trips overlap; the GIL bounds the rest)


class Drained(Protocol):
    cluster: str

    def drain(self) -> bool:
        """Write one batch of what is queued; True when more is waiting."""

    def pending(self) -> bool:
        """Something is queued and may be written now."""


class WriterPool:
    """`WRITERS` daemon threads draining the clusters put in line by `wake`."""

    def __init__(self, threads: int = WRITERS) -> None:
        self._line: deque[Drained] = deque()
        self._queued: set[int] = set()  # id() of the clusters in line or being drained
        self._cond = threading.Condition()
        self.threads = [
            threading.Thread(target=self._run, name=f"watch-writer-{i}", daemon=True)
            for i in range(threads)
        ]
        for t in self.threads:
            t.start()

    def wake(self, cluster: Drained) -> None:
        """`cluster` has something to write: put it in line (once)."""
        with self._cond:
            if id(cluster) in self._queued:
                return  # in line, or being drained: its writer looks again before letting go
            self._queued.add(id(cluster))
            self._line.append(cluster)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._line:
                    self._cond.wait()
                cluster = self._line.popleft()
            try:
                more: bool | None = cluster.drain()
            except Exception:  # a bug in one cluster's batch must not end a shared writer
                log.exception("writer failed", extra={"cluster": cluster.cluster})
                more = None  # out of line until its next change
            with self._cond:
                # Looked at under the lock: an item queued after this look wakes it again.
                if more or (more is not None and cluster.pending()):
                    self._line.append(cluster)
                    self._cond.notify()
                else:
                    self._queued.discard(id(cluster))


_lock = threading.Lock()
_shared: WriterPool | None = None


def shared() -> WriterPool:
    """The process's writer pool (started on first use, lives as long as the process)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = WriterPool()
        return _shared
