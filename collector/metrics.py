"""Collector metrics (prometheus-client): sync duration, objects, requests, errors, lag.

A Celery worker runs syncs in prefork children, so `prepare_worker` switches prometheus-client
to multiprocess mode (a fresh directory under FLEETSCOPE_METRICS_DIR, or a temporary one) before
anything imports it, and `serve` exposes the merged values of all children on
`worker_metrics_port`. Lag and RBAC age are computed from Redis at scrape time, so they keep
growing while a cluster fails or no worker runs. Outside a worker the default registry is used.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import redis

from common.index import syncstatus
from common.settings import Settings

if TYPE_CHECKING:
    from collector.sync import SyncResult

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_metrics: dict[str, Any] = {}
_lock = threading.Lock()


def _get() -> dict[str, Any]:
    """The metric objects, created on first use (after `prepare_worker`, if any)."""
    with _lock:
        if not _metrics:
            _create()
    return _metrics


def _create() -> None:
    from prometheus_client import Counter, Gauge, Histogram

    labels = ["cluster", "what"]
    _metrics.update(
        duration=Histogram(
            "fleetscope_collector_sync_duration_seconds",
            "Duration of one cluster sync (what = objects | rbac).",
            labels,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        ),
        requests=Counter(
            "fleetscope_collector_leaf_requests",
            "HTTP requests sent to leaf API servers by syncs.",
            labels,
        ),
        errors=Counter("fleetscope_collector_sync_errors", "Failed cluster syncs.", labels),
        objects=Gauge(
            "fleetscope_collector_objects",
            "Rows stored for the cluster by its last successful object sync.",
            ["cluster"],
            multiprocess_mode="mostrecent",
        ),
        last_success=Gauge(
            "fleetscope_collector_last_success_timestamp_seconds",
            "Unix time of the cluster's last successful sync.",
            labels,
            multiprocess_mode="max",
        ),
    )


def record_sync(result: SyncResult) -> None:
    m = _get()
    labels = (result.cluster, result.what)
    m["duration"].labels(*labels).observe(result.duration_s)
    m["requests"].labels(*labels).inc(result.requests)
    if not result.ok:
        m["errors"].labels(*labels).inc()
        return
    m["last_success"].labels(*labels).set(time.time())
    if result.what == "objects":
        m["objects"].labels(result.cluster).set(result.objects)


def prepare_worker(settings: Settings) -> str:
    """Switch this process (and its future children) to multiprocess mode; returns the dir.

    Must run before prometheus_client is imported (Celery's `worker_init`, in the parent)."""
    if os.environ.get(MULTIPROC_ENV):
        return os.environ[MULTIPROC_ENV]
    base = settings.metrics_dir or tempfile.gettempdir()
    path = os.path.join(base, f"fleetscope-collector-{os.getpid()}")
    shutil.rmtree(path, ignore_errors=True)  # stale files of a previous run would add up
    os.makedirs(path)
    os.environ[MULTIPROC_ENV] = path
    return path


def serve(settings: Settings, redis_client: Callable[[], redis.Redis]) -> None:
    """Expose /metrics on `worker_metrics_port` (0 = off) from the worker's parent process."""
    if not settings.worker_metrics_port:
        return
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(LagCollector(redis_client))
    start_http_server(settings.worker_metrics_port, addr="0.0.0.0", registry=registry)


class LagCollector:
    """Seconds since each registered cluster's last successful object sync and RBAC sync."""

    def __init__(self, redis_client: Callable[[], redis.Redis]) -> None:
        self.redis_client = redis_client

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        lag = GaugeMetricFamily(
            "fleetscope_collector_sync_lag_seconds",
            "Seconds since the cluster's last successful object sync (absent: never).",
            labels=["cluster"],
        )
        rbac = GaugeMetricFamily(
            "fleetscope_collector_rbac_age_seconds",
            "Seconds since the cluster's last successful RBAC sync (absent: never).",
            labels=["cluster"],
        )
        try:
            r = self.redis_client()
            syncs = syncstatus.read_all(r, syncstatus.registered_clusters(r))
        except redis.RedisError:
            syncs = {}
        now = time.time()
        for name, s in syncs.items():
            if s.last_success is not None:
                lag.add_metric([name], now - s.last_success)
            age = s.rbac_age_s(now)
            if age is not None:
                rbac.add_metric([name], age)
        yield lag
        yield rbac
