"""The watcher's debounced recomputations (grants, Istio validation): one loop for both."""

from __future__ import annotations

import logging
import threading
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
) -> None:
    """Run `work` once `dirty` is set, at most once per `debounce_s` (later changes join the
    batch), when `ready()`; one of `errors` is logged and retried a second later."""
    while not stop.is_set():
        if not dirty.wait(0.5):
            continue
        if stop.wait(debounce_s):
            return
        dirty.clear()
        if not ready():
            continue
        try:
            work()
        except errors as e:
            log.warning("could not %s: %s; retrying", what, e, extra={"cluster": cluster})
            dirty.set()
            stop.wait(1.0)
