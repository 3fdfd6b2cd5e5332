"""What every process of the query service runs beside its work: a gunicorn worker
(query.gunicorn_conf) and the stream process (query.stream_server).

- glibc's malloc arenas capped at two (common.heap): threads freeing answers of megabytes on
  many arenas otherwise make a process's RSS climb while its live data does not;
- the C heap's free pages handed back to the kernel every minute;
- with `FLEETSCOPE_QUERY_MEMO_IDLE_S` above 0, every half of it, the memos' entries that no
  caller used since the sweep before the last dropped (memo.sweep_idle), then the heap
  trimmed. Both kinds of process resolve callers' access through the same memos (keyed by the
  grants version, so every RBAC change makes new entries): without the sweep they fill up to
  their caps however seldom those entries are asked again. Each sweep then sets
  `fleetscope_query_memo_bytes` (query.metrics).
"""

from __future__ import annotations

from common import heap
from common.index.read import memo
from common.settings import Settings

ARENAS = 2  # malloc arenas of a query process (common.heap): its threads share two


def start(settings: Settings) -> list[heap.Trimmer]:
    """Cap the arenas and start the housekeeping threads (daemons); returns them."""
    heap.limit_arenas(ARENAS)
    threads = [heap.Trimmer()]
    if settings.query_memo_idle_s > 0:  # memos' idle entries dropped, then the heap trimmed
        threads.append(heap.Trimmer(settings.query_memo_idle_s / 2, sweep, "memo-sweep"))
    for t in threads:
        t.start()
    return threads


def sweep() -> int:
    """One idle sweep of the memos (and the caches and leaf clients tracked with them), then
    the gauge of what the memos hold after it; returns the entries dropped."""
    # imported here, not with this module: query.gunicorn_conf imports it before it exports
    # PROMETHEUS_MULTIPROC_DIR, which prometheus_client must see at its import
    from query import metrics

    dropped = memo.sweep_idle()
    metrics.MEMO_BYTES.set(memo.held_bytes())
    return dropped
