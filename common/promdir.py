"""prometheus-client's multiprocess files, shared safely by the processes of one host.

A Celery worker (its prefork children) and the query service (its gunicorn workers and stream
process) each add up their processes' metrics from files in one directory. Each process tree
gets a directory of its own under `FLEETSCOPE_METRICS_DIR` (`fleetscope-<role>-<pid>`), emptied
when that tree starts: until 2026-11-28 the query service emptied `FLEETSCOPE_METRICS_DIR`
itself, so on a host where a worker shared it (`fleetscope demo`, the soak, one VM) the worker's
directory went with it and a worker child started after that could not create its metrics.

`Lazy` creates a process's metric objects on first use, one at a time: one that could not be
created (its file could not be opened) is tried again at the next use, while those created
are kept (creating a registered metric again raises `DuplicateTimeseries` at every use after,
which failed every sync of that child).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from typing import Any

ENV = "PROMETHEUS_MULTIPROC_DIR"


def private_dir(base: str, role: str, pid: int | None = None) -> str:
    """This process tree's directory under `base` (not created)."""
    return os.path.join(base, f"fleetscope-{role}-{os.getpid() if pid is None else pid}")


def reset(path: str) -> str:
    """Empty (or create) `path`: files of an earlier run under the same pid would add up."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)
    return path


class Lazy:
    """Metric objects made by `factories` (name -> constructor) on first use (`get`)."""

    def __init__(self, factories: Callable[[], dict[str, Callable[[], Any]]]) -> None:
        self._factories = factories
        self._made: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._wanted = -1

    def get(self) -> dict[str, Any]:
        """Every metric, created where missing; raises when one cannot be created (the others
        stay, and it is tried again at the next call)."""
        if len(self._made) == self._wanted:
            return self._made
        with self._lock:
            factories = self._factories()
            self._wanted = len(factories)
            missing = [n for n in factories if n not in self._made]
            if missing and os.environ.get(ENV):
                # the directory removed under a running process (a tmp cleaner): made again
                os.makedirs(os.environ[ENV], exist_ok=True)
            for name in missing:
                self._made[name] = factories[name]()
        return self._made
