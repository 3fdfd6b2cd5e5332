"""Fleet freshness as Prometheus gauges, computed from the sync status in Redis at scrape time.

The query service exports them (one read of every cluster's status per scrape), so they exist
once however many Celery workers run, and keep moving while no worker does. Fleet-wide gauges
are what dashboards and paging alerts use; the two per-cluster gauges (one series per cluster)
say which cluster an alert is about.

Object counts (`fleetscope_objects{kind,status}`, `fleetscope_cluster_objects{cluster,status}`)
come from the clusters' count tables (the writer's `counts` hashes, never the rows), re-read
at most every `COUNTS_REFRESH_S` and then only for clusters whose generation moved.
`fleetscope_cluster_objects` has one series per cluster and status, and like every series with a
`cluster` label exists only with FLEETSCOPE_METRICS_CLUSTER_LABELS=true.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import redis

from common import redis_client
from common.index import keys, rows, syncstatus
from common.index.syncstatus import STATES, ClusterSync
from common.kinds.status import STATUSES as STATUSES_ALL
from common.settings import Settings

COUNTS_REFRESH_S = 15.0


class ObjectCounts:
    """Rows per (cluster, kind, status) from the count tables, refreshed at a bounded rate (one
    per process, shared by scrapes)."""

    def __init__(self, r: redis.Redis, refresh_s: float = COUNTS_REFRESH_S) -> None:
        self.r, self.refresh_s = r, refresh_s
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._gens: dict[str, Any] = {}
        self.tables: dict[str, Counter[tuple[str, str]]] = {}
        self.reads = 0  # count hashes read so far (what the tests count)

    def current(self, clusters: list[str]) -> dict[str, Counter[tuple[str, str]]]:
        with self._lock:
            if time.monotonic() - self._at < self.refresh_s:
                return self.tables
            gens = (
                dict(
                    zip(
                        clusters,
                        redis_client.mget(self.r, [keys.generation(c) for c in clusters]),
                        strict=True,
                    )
                )
                if clusters
                else {}
            )
            moved = [c for c in clusters if c not in self.tables or gens[c] != self._gens.get(c)]
            if moved:
                replies = redis_client.pipelined(
                    self.r, [("HGETALL", keys.counts(c)) for c in moved]
                )
                self.reads += len(moved)
                for c, reply in zip(moved, replies, strict=True):
                    self.tables[c] = _table(reply)
            self.tables = {c: self.tables[c] for c in clusters}
            self._gens, self._at = gens, time.monotonic()
            return self.tables


def _table(reply: Any) -> Counter[tuple[str, str]]:
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    out: Counter[tuple[str, str]] = Counter()
    for f, n in pairs:
        kind, status, _suspended = rows.parse_count_field(f)
        out[(kind, status)] += int(n)
    return out


class FleetCollector:
    """A prometheus-client collector over `syncstatus` and the count tables; yields nothing
    while Redis is down (`fleetscope_query_redis_errors_total` and /readyz say so)."""

    def __init__(
        self, r: redis.Redis, settings: Settings, counts: ObjectCounts | None = None
    ) -> None:
        self.r, self.settings, self.counts = r, settings, counts

    def collect(self) -> Iterator[Any]:
        try:
            clusters = syncstatus.registered_clusters(self.r)
            syncs = list(syncstatus.read_all(self.r, clusters).values())
            tables = self.counts.current(clusters) if self.counts is not None else None
        except redis_client.ERRORS:
            return
        yield from fleet_families(syncs, self.settings, time.time())
        if tables is not None:
            yield from object_families(tables)


def object_families(tables: dict[str, Counter[tuple[str, str]]]) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily

    fleet: Counter[tuple[str, str]] = Counter()
    per_cluster = GaugeMetricFamily(
        "fleetscope_cluster_objects",
        "Rows stored for the cluster by status (from its count table).",
        labels=["cluster", "status"],
    )
    for cluster, table in sorted(tables.items()):
        fleet.update(table)
        by_status: Counter[str] = Counter()
        for (_kind, status), n in table.items():
            by_status[status] += n
        for status in STATUSES_ALL:
            per_cluster.add_metric([cluster, status], float(by_status[status]))
    objects = GaugeMetricFamily(
        "fleetscope_objects",
        "Rows stored for all clusters by kind and status (from the count tables).",
        labels=["kind", "status"],
    )
    for (kind, status), n in sorted(fleet.items()):
        objects.add_metric([kind, status], float(n))
    yield objects
    yield per_cluster


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
    refused = GaugeMetricFamily(
        "fleetscope_registry_refused_clusters",
        "Registered clusters the registry refuses to sync: credentials holding more than inline "
        "material (reason=credentials) or a name two sources claim (reason=conflict).",
        labels=["reason"],
    )
    refused.add_metric(["credentials"], float(sum(1 for s in syncs if s.record.error)))
    conflicts = sum(1 for s in syncs if s.record.conflict and not s.record.error)
    refused.add_metric(["conflict"], float(conflicts))
    yield refused
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
