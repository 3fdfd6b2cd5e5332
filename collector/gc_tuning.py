"""Garbage-collector settings for the collector's processes (sync workers, `collect --once`,
the watcher).

A sync holds a cluster's listed objects (tens of thousands of small dicts) while it builds rows,
and several syncs run side by side in one process. CPython's default thresholds (700, 10, 10)
then run a full collection every few thousand allocations, each walking every live object of
every sync in flight (what that cost at fleet L: docs/benchmarks.md, History, "collection ...
with relations"). Objects created at start-up (modules, the kind registry) are frozen out of
the collections, and collections run less often; a successful sync creates almost no reference
cycles, so memory does not grow for it.

A failed one does: its exception's traceback holds the frames it went through (urllib3's hold
the exception again: a cycle), and Celery keeps a copy of it (billiard's picklable traceback,
every frame's code positions). Only the cycle collector frees those, and at these thresholds a
full collection is ~8 M allocations away, which a worker child whose syncs fail fast (a cluster
that is down) reaches only after a long while: such a child grew ~5 MiB per flap cycle of one
cluster (docs/operations.md, "Soak"). So a Celery task that did not succeed is followed by a
full collection (`after_task`): a few milliseconds, on failures only.
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)
SUCCESS = "SUCCESS"
"""Celery's state of a task that returned (every other state after a run is a failure, a
retry, or a rejection: each raised)."""


def tune() -> None:
    """Freeze what exists now and raise the thresholds (idempotent)."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def after_task(state: str | None) -> None:
    """Free the reference cycles a failed or retried task left behind (a full collection);
    nothing after a success."""
    if state != SUCCESS:
        gc.collect()
