"""Fleet freshness as Prometheus gauges, computed from the sync status in Redis at scrape time.

The query service exports them (one read of every cluster's status per scrape), so they exist
once however many Celery workers run, and keep moving while no worker does. Fleet-wide gauges
are what dashboards and paging alerts use; the two per-cluster gauges (one series per cluster)
say which cluster an alert is about, and exist only with FLEETSCOPE_METRICS_CLUSTER_LABELS=true.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import redis

from common import redis_client
from common.index import syncstatus
from common.index.syncstatus import STATES, ClusterSync
from common.settings import Settings


class FleetCollector:
    """A prometheus-client collector over `syncstatus`; yields nothing while Redis is down
    (`fleetscope_query_redis_errors_total` and /readyz say so)."""

    def __init__(self, r: redis.Redis, settings: Settings) -> None:
        self.r, self.settings = r, settings

    def collect(self) -> Iterator[Any]:
        try:
            syncs = list(
                syncstatus.read_all(self.r, syncstatus.registered_clusters(self.r)).values()
            )
        except redis_client.ERRORS:
            return
        yield from fleet_families(syncs, self.settings, time.time())


def fleet_families(syncs: list[ClusterSync], settings: Settings, now: float) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, value=value)

    fleet = syncstatus.fleet_state(syncs, settings.stale_after_s, settings.rbac_max_age_s, now)
    state = GaugeMetricFamily(
        "fleetscope_fleet_state",
        "1 for the fleet's state as /api/v1/status reports it (ready, rebuilding, degraded).",
        labels=["state"],
    )
    for name in ("ready", "rebuilding", "degraded"):
        state.add_metric([name], 1.0 if fleet.state == name else 0.0)
    yield state
    by_state = GaugeMetricFamily(
        "fleetscope_fleet_clusters",
        "Registered clusters by the state of their last object sync.",
        labels=["state"],
    )
    for name in STATES:
        by_state.add_metric([name], float(sum(1 for s in syncs if s.state == name)))
    yield by_state
    collected = [s for s in syncs if s.collected]
    yield gauge(
        "fleetscope_fleet_uncollected_clusters",
        "Registered clusters never collected yet (their rows are missing: rebuilding).",
        float(len(syncs) - len(collected)),
    )
    yield gauge(
        "fleetscope_fleet_stale_clusters",
        "Collected clusters whose last sync failed or is older than FLEETSCOPE_STALE_AFTER_S.",
        float(sum(1 for s in syncs if s.stale(settings.stale_after_s, now))),
    )
    yield gauge(
        "fleetscope_fleet_rbac_stale_clusters",
        "Clusters without access data fresher than FLEETSCOPE_RBAC_MAX_AGE_S (rows hidden).",
        float(sum(1 for s in syncs if not s.rbac_fresh(settings.rbac_max_age_s, now))),
    )
    lags = {s.cluster: now - s.last_success for s in collected if s.last_success is not None}
    ages = {s.cluster: age for s in syncs if (age := s.rbac_age_s(now)) is not None}
    yield gauge(
        "fleetscope_fleet_max_sync_lag_seconds",
        "Seconds since the oldest last successful object sync among collected clusters.",
        max(lags.values(), default=0.0),
    )
    yield gauge(
        "fleetscope_fleet_max_rbac_age_seconds",
        "Seconds since the oldest last successful RBAC sync among clusters that had one.",
        max(ages.values(), default=0.0),
    )
    yield gauge(
        "fleetscope_fleet_objects",
        "Rows stored for all clusters.",
        float(sum(s.objects for s in syncs)),
    )
    if not settings.metrics_cluster_labels:
        return  # cluster names are for operators who opted in (docs/security.md#edges)
    yield _per_cluster(
        "fleetscope_cluster_sync_lag_seconds",
        "Seconds since the cluster's last successful object sync (absent: never).",
        lags,
    )
    yield _per_cluster(
        "fleetscope_cluster_rbac_age_seconds",
        "Seconds since the cluster's last successful RBAC sync (absent: never).",
        ages,
    )


def _per_cluster(name: str, doc: str, values: dict[str, float]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, doc, labels=["cluster"])
    for cluster, value in sorted(values.items()):
        family.add_metric([cluster], value)
    return family
