"""Garbage-collector settings for the collector's processes (sync workers, `collect --once`,
the watcher).

A sync holds a cluster's listed objects (tens of thousands of small dicts) while it builds rows,
and several syncs run side by side in one process. CPython's default thresholds (700, 10, 10)
then run a full collection every few thousand allocations, each walking every live object of
every sync in flight (what that cost at fleet L: docs/benchmarks.md, History, "collection ...
with relations"). Objects created at start-up (modules, the kind registry) are frozen out of
the collections, and collections run less often; the collector creates almost no reference
cycles, so memory does not grow for it.
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)


def tune() -> None:
    """Freeze what exists now and raise the thresholds (idempotent)."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
