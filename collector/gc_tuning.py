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
cluster (docs/operations.md, "Soak"). So a Celery task that did not succeed, or that returned
`FAILED` (a failed sync, recorded and retried by collector.tasks itself), is followed by a full
collection (`after_task`): a few milliseconds, on failures only.

Every task, failed or not, is followed by a trim of the C heap (common.heap): an L cluster's
sync frees ~12 MiB that glibc keeps below the heap's top (a child at 106 MiB right after a
sync, 94 MiB after the trim, 2-7 ms; a full collection there finds nothing), so a busy child
otherwise sat at whatever its last sync left until its minute's trim, and its RSS between
tasks depended on when it was read. Every child and prefork parent also trims once a minute.

A prefork worker's parent syncs nothing: once its pool runs it goes back to CPython's
thresholds (`pool_parent_ready`), so what a broker failover leaves it is collected as it goes;
a reconnection also runs one full collection (collector.broker), since at those thresholds the
oldest generation of a mostly frozen heap is rarely reached.
"""

from __future__ import annotations

import gc
from typing import Any

from common import heap

THRESHOLDS = (20_000, 20, 20)
DEFAULT_THRESHOLDS = gc.get_threshold()
"""CPython's own (700, 10, 10), read before `tune`."""
SUCCESS = "SUCCESS"
"""Celery's state of a task that returned (every other state after a run is a failure, a
retry, or a rejection: each raised)."""
FAILED = "failed"
"""What a task returns when it failed and dealt with that itself (recorded, and retried or
logged): its garbage is collected as a raised failure's is."""


def tune() -> None:
    """Freeze what exists now and raise the thresholds (idempotent)."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def pool_parent_ready(pool: Any) -> None:
    """A prefork worker's parent, once its pool runs: CPython's own thresholds again. It syncs
    nothing (its children do, and tune themselves), but a broker failover leaves it garbage
    with reference cycles (the connection errors and their tracebacks, in kombu's retries)
    that the raised thresholds kept for a long while: with them a parent grew ~0.7 MiB per
    Redis outage (76 -> 80 MiB over 6 outages), without them it settled at 78 MiB after two
    (2026-11-27, a prefork worker against a redis-server stopped for 8 s every 40 s). A solo
    or threads pool runs the syncs in this process: it stays tuned."""
    if type(pool).__module__ == "celery.concurrency.prefork":
        gc.set_threshold(*DEFAULT_THRESHOLDS)
        start_trimmer()


def after_task(state: str | None, retval: Any = None) -> None:
    """Free the reference cycles a failed or retried task left behind (a full collection),
    then, after any task, hand the C heap's free pages back to the kernel."""
    if state != SUCCESS or retval == FAILED:
        gc.collect()
    # What a sync built and dropped stays in the child's heap until trimmed (~12 MiB after an
    # L cluster's sync; ~15 MiB per child when a Redis failover failed every sync in flight)
    heap.trim()


def start_trimmer() -> heap.Trimmer:
    """Trim the C heap every minute in this process (common.heap), for a sync worker's child
    and a prefork parent: a sync builds and drops tens of megabytes, and glibc keeps what is
    freed below the heap's top for reuse rather than returning it. Once per process: a child
    forked from a parent whose trimmer runs starts its own (threads do not survive a fork)."""
    if _trimmer and _trimmer[0].is_alive():
        return _trimmer[0]
    t = heap.Trimmer()
    t.start()
    _trimmer[:] = [t]
    return t


_trimmer: list[heap.Trimmer] = []
