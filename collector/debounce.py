"""The watcher's debounced recomputations (grants, Istio validation): one loop for both."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def run_debounced(
    stop: threading.Event,
    dirty: threading.Event,
    debounce_s: float,
    ready: Callable[[], bool],
    work: Callable[[], object],
    errors: tuple[type[BaseException], ...],
    what: str,
    cluster: str,
    leading: bool = False,
) -> None:
    """Run `work` once `dirty` is set, at most once per `debounce_s` (later changes join the
    batch), when `ready()`; one of `errors` is logged and retried a second later.

    By default every run waits `debounce_s` after the first change (trailing edge). With
    `leading`, a change after a quiet window runs at once and only changes within
    `debounce_s` of the last run wait for the rest of the window: the same bound on runs, without
    the wait on a lone change (a revoked RoleBinding)."""
    last = float("-inf")
    while not stop.is_set():
        if not dirty.wait(0.5):
            continue
        wait_s = max(0.0, last + debounce_s - time.monotonic()) if leading else debounce_s
        if wait_s > 0 and stop.wait(wait_s):
            return
        dirty.clear()
        if not ready():
            continue
        last = time.monotonic()
        try:
            work()
        except errors as e:
            log.warning("could not %s: %s; retrying", what, e, extra={"cluster": cluster})
            dirty.set()
            stop.wait(1.0)
