"""Collector metrics (prometheus-client): what this worker's syncs did (duration, requests,
errors), by `what` (objects | rbac) and never by cluster, so their size does not grow with the
fleet. Per-cluster and fleet-wide freshness (lag, stale clusters) is the query service's, which
computes it from the sync status in Redis once, however many workers run (query/fleet_metrics.py).

A Celery worker runs syncs in prefork children, so `prepare_worker` switches prometheus-client
to multiprocess mode (a fresh directory under FLEETSCOPE_METRICS_DIR, or a temporary one) before
anything imports it, and `serve` exposes the merged values of all children on
`worker_metrics_port`. Outside a worker the default registry is used.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from common import promdir
from common.buildinfo import BuildInfoCollector
from common.settings import Settings

if TYPE_CHECKING:
    from collector.sync import SyncResult

log = logging.getLogger(__name__)


def _factories() -> dict[str, Callable[[], Any]]:
    from prometheus_client import Counter, Histogram

    labels = ["what"]
    return {
        "duration": lambda: Histogram(
            "fleetscope_collector_sync_duration_seconds",
            "Duration of one cluster sync (what = objects | rbac), failed ones included.",
            labels,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        ),
        "requests": lambda: Counter(
            "fleetscope_collector_leaf_requests",
            "HTTP requests sent to leaf API servers by syncs.",
            labels,
        ),
        "errors": lambda: Counter(
            "fleetscope_collector_sync_errors", "Failed cluster syncs.", labels
        ),
        "unchanged": lambda: Counter(
            "fleetscope_collector_sync_unchanged",
            "Object syncs that listed exactly what the stored rows were built from (no rows "
            "built: sync_rebuild_after_s).",
        ),
        "validation": lambda: Histogram(
            "fleetscope_collector_validation_cpu_seconds",
            "CPU time of validating one cluster's Istio config (full syncs with Istio objects).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        ),
    }


_metrics = promdir.Lazy(_factories)
"""The metric objects, created on first use (after `prepare_worker`, if any)."""


def record_sync(result: SyncResult) -> None:
    """Count a sync; a metric that cannot be recorded is logged, never the sync's failure."""
    try:
        _record(result)
    except Exception as e:
        log.warning("sync metrics not recorded: %s", e)


def _record(result: SyncResult) -> None:
    m = _metrics.get()
    m["duration"].labels(result.what).observe(result.duration_s)
    m["requests"].labels(result.what).inc(result.requests)
    if not result.ok:
        m["errors"].labels(result.what).inc()
    if result.unchanged:
        m["unchanged"].inc()
    if result.validated:
        m["validation"].observe(result.validation_cpu_s)


def prepare_worker(settings: Settings) -> str:
    """Switch this process (and its future children) to multiprocess mode; returns the dir.

    Must run before prometheus_client is imported (Celery's `worker_init`, in the parent)."""
    if os.environ.get(promdir.ENV):
        return os.environ[promdir.ENV]
    base = settings.metrics_dir or tempfile.gettempdir()
    path = promdir.reset(promdir.private_dir(base, "collector"))
    os.environ[promdir.ENV] = path
    return path


def serve(settings: Settings) -> None:
    """Expose /metrics on `worker_metrics_port` (0 = off) from the worker's parent process."""
    port = settings.worker_metrics_port
    if not port:
        return
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    if os.environ.get(promdir.ENV):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(BuildInfoCollector())
    try:
        start_http_server(port, addr="0.0.0.0", registry=registry)
    except OSError as e:
        # The worker still works; say plainly why its /metrics is missing.
        log.error(
            "worker metrics cannot listen on port %d: %s (set FLEETSCOPE_WORKER_METRICS_PORT)",
            port,
            e.strerror or e,
        )
