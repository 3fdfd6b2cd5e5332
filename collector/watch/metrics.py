"""The watcher's metrics (prometheus-client, the process's default registry), served on
`watch_metrics_port` by `fleetscope watch`. None has a per-cluster label: their size does not
grow with the fleet (the query service reports per-cluster freshness from the sync status).

| metric | type | meaning |
|---|---|---|
| `fleetscope_watch_leases` | gauge | clusters this replica holds the lease of (and watches) |
| `fleetscope_watch_events_total` | counter | watch events received (bookmarks excluded); `rate()` is events per second |
| `fleetscope_watch_relists_total` | counter | lists after a cluster's first one (410 Gone, a broken stream) |
| `fleetscope_watch_expired_total` | counter | watches the API server ended with 410 Gone (resourceVersion too old) |
| `fleetscope_watch_event_lag_seconds` | histogram | from an event's arrival to its change committed in Redis |
| `fleetscope_watch_leases_lost_total` | counter | cluster leases this replica lost while watching (expired or taken: a stall) |
"""

from __future__ import annotations

import logging

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server

from common.buildinfo import BuildInfoCollector
from common.settings import Settings

log = logging.getLogger(__name__)

LEASES = Gauge("fleetscope_watch_leases", "Clusters whose lease this watcher replica holds.")
BUILT = Gauge(
    "fleetscope_watch_built",
    "Clusters of this replica whose first build is written: watched live from then on.",
)
EVENTS = Counter("fleetscope_watch_events", "Watch events received (bookmarks excluded).")
RELISTS = Counter(
    "fleetscope_watch_relists", "Lists after a cluster's first (410 Gone, a broken stream)."
)
EXPIRED = Counter(
    "fleetscope_watch_expired", "Watches ended by 410 Gone (resourceVersion too old)."
)
LEASES_LOST = Counter(
    "fleetscope_watch_leases_lost",
    "Cluster leases lost while watching (not renewed in time, or taken by another replica).",
)
LAG = Histogram(
    "fleetscope_watch_event_lag_seconds",
    "From a watch event's arrival to its change committed in Redis.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
_served = False


def serve(settings: Settings) -> bool:
    """Expose /metrics on `watch_metrics_port` (0 = off) on every interface; False when off or
    the port cannot be had (logged: the watcher goes on without it)."""
    global _served
    port = settings.watch_metrics_port
    if not port or _served:
        return _served
    build = BuildInfoCollector()
    REGISTRY.register(build)  # before the server: its first scrape may come at once
    try:
        start_http_server(port, addr="0.0.0.0")
    except OSError as e:
        REGISTRY.unregister(build)
        # The watcher still works; say plainly why its /metrics is missing.
        log.error(
            "watcher metrics cannot listen on port %d: %s (set FLEETSCOPE_WATCH_METRICS_PORT)",
            port,
            e.strerror or e,
        )
        return False
    _served = True
    return True
