"""Prometheus metrics of the query service, correct under gunicorn's several workers.

With `FLEETSCOPE_METRICS_DIR` set, query.gunicorn_conf exports it as PROMETHEUS_MULTIPROC_DIR
before any worker imports prometheus_client, and /metrics aggregates every worker's files.
Gauges computed at scrape time (build info, fleet freshness: query/fleet_metrics.py) are added
by the worker answering the scrape, so they appear once, not once per worker.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from common import promdir

REQUEST_LATENCY = Histogram(
    "fleetscope_query_request_duration_seconds",
    "Query API request latency by route and status code",
    ["route", "status"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)
RBAC_CACHE = Counter(
    "fleetscope_query_rbac_cache_total",
    "Access resolutions served from the in-process cache (hit) or needing Redis reads (miss)",
    ["result"],
)
REDIS_ERRORS = Counter("fleetscope_query_redis_errors_total", "Requests failed by Redis errors")
ROWS_SCANNED = Counter(
    "fleetscope_query_rows_scanned_total", "Rows Redis examined to answer list and facet queries"
)
MEMO_BYTES = Gauge(
    "fleetscope_query_memo_bytes",
    "Estimated bytes the memos of a query process hold, the largest live process's (0 without "
    "FLEETSCOPE_QUERY_MEMO_MIB); set at each idle sweep",
    multiprocess_mode="livemax",
)
LEAF_CLIENTS = Gauge(
    "fleetscope_query_leaf_clients",
    "Leaf clients (a kubeconfig and its open TLS connections) the query workers hold for "
    "detail reads, summed over the live workers",
    multiprocess_mode="livesum",
)


CLUSTER_LABEL = "cluster"


class _Without:
    """A collector passing on `source`'s samples except those carrying `label`."""

    def __init__(self, source: Any, label: str) -> None:
        self.source, self.label = source, label

    def collect(self) -> Iterator[Any]:
        for family in self.source.collect():
            family.samples = [s for s in family.samples if self.label not in s.labels]
            yield family


def render(scraped: Iterable[Any] = (), cluster_labels: bool = True) -> tuple[bytes, str]:
    """The exposition text: every worker's metrics in multiprocess mode, else this process's,
    then the `scraped` collectors (computed now, in this process only). Without
    `cluster_labels`, no sample with a `cluster` label (whichever process wrote it into a shared
    metrics directory) is shown."""
    if os.environ.get(promdir.ENV):
        source = CollectorRegistry()
        multiprocess.MultiProcessCollector(source)  # type: ignore[no-untyped-call]
    else:
        source = REGISTRY
    registry = CollectorRegistry()
    registry.register(source if cluster_labels else _Without(source, CLUSTER_LABEL))
    for collector in scraped:
        registry.register(collector if cluster_labels else _Without(collector, CLUSTER_LABEL))
    return generate_latest(registry), CONTENT_TYPE_LATEST
