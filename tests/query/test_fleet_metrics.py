"""The query service's /metrics: build info, fleet freshness computed from the sync status in
Redis (fleet-wide gauges plus one lag series per cluster), and histograms without a cluster
label, so the series count does not grow with the fleet beyond one per cluster."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from common.buildinfo import version
from common.index.syncstatus import ClusterSync
from common.settings import Settings
from query.fleet_metrics import fleet_families
from tests.support.http import make_app
from tests.support.query_fleet import CLUSTERS, Seeded, mark_synced

SETTINGS = Settings(stale_after_s=100.0, rbac_max_age_s=50.0, metrics_cluster_labels=True)
NOW = 1_000_000.0


def _samples(syncs: list[ClusterSync]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in fleet_families(syncs, SETTINGS, NOW)
        for s in family.samples
    }


def test_fleet_gauges_count_stale_uncollected_and_hidden_clusters() -> None:
    syncs = [
        ClusterSync("fresh", "ok", NOW - 10, NOW - 10, objects=5, rbac_synced_at=NOW - 5),
        ClusterSync("old", "ok", NOW - 300, NOW - 300, objects=7, rbac_synced_at=NOW - 60),
        ClusterSync("failing", "error", NOW - 20, NOW - 1, objects=1, rbac_synced_at=NOW - 1),
        ClusterSync("new", "pending"),
    ]
    got = _samples(syncs)
    assert got[("fleetscope_fleet_state", (("state", "rebuilding"),))] == 1
    assert got[("fleetscope_fleet_state", (("state", "ready"),))] == 0
    assert got[("fleetscope_fleet_clusters", (("state", "ok"),))] == 2
    assert got[("fleetscope_fleet_clusters", (("state", "pending"),))] == 1
    assert got[("fleetscope_fleet_uncollected_clusters", ())] == 1
    assert got[("fleetscope_fleet_stale_clusters", ())] == 2  # too old, and last sync failed
    assert got[("fleetscope_fleet_rbac_stale_clusters", ())] == 2  # 60 s old, and never
    assert got[("fleetscope_fleet_max_sync_lag_seconds", ())] == 300
    assert got[("fleetscope_fleet_max_rbac_age_seconds", ())] == 60
    assert got[("fleetscope_fleet_objects", ())] == 13
    assert got[("fleetscope_cluster_sync_lag_seconds", (("cluster", "old"),))] == 300
    assert ("fleetscope_cluster_sync_lag_seconds", (("cluster", "new"),)) not in got


def test_an_empty_fleet_is_rebuilding_with_zero_lag() -> None:
    got = _samples([])
    assert got[("fleetscope_fleet_state", (("state", "rebuilding"),))] == 1
    assert got[("fleetscope_fleet_max_sync_lag_seconds", ())] == 0


def _families(client) -> dict[str, object]:
    text = client.get("/metrics").get_data(as_text=True)
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_route_serves_build_info_and_fleet_gauges(seeded: Seeded, redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url,
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        metrics_cluster_labels=True,  # the per-cluster gauges are opt-in (tests/security)
    )
    client = make_app(settings).test_client()
    client.get("/api/v1/objects", headers={"X-Remote-User": "root", "X-Remote-Group": "admins"})
    mark_synced(seeded.r, "c02", last_success=time.time() - 1000)
    families = _families(client)
    [info] = families["fleetscope_build_info"].samples  # type: ignore[attr-defined]
    assert info.labels["version"] == version() and info.value == 1
    assert info.labels["row_builder"] in ("compiled", "python")
    lag = {
        s.labels["cluster"]: s.value
        for s in families["fleetscope_cluster_sync_lag_seconds"].samples
    }  # type: ignore[attr-defined]
    assert set(lag) == set(CLUSTERS) and lag["c02"] >= 1000 > lag["c00"]
    [stale] = families["fleetscope_fleet_stale_clusters"].samples  # type: ignore[attr-defined]
    assert stale.value == 1
    for family in families.values():
        if family.type == "histogram":  # type: ignore[attr-defined]
            assert all("cluster" not in s.labels for s in family.samples)  # type: ignore[attr-defined]
    assert "fleetscope_query_request_duration_seconds" in families


def test_metrics_without_redis_still_answer(seeded: Seeded) -> None:
    from tests.support.http import make_app

    app = make_app(Settings(redis_url="redis://127.0.0.1:1/0", auth_mode="anonymous"))
    families = _families(app.test_client())
    assert "fleetscope_build_info" in families
    assert "fleetscope_fleet_state" not in families


def test_object_gauges_come_from_the_count_tables_at_a_bounded_rate(seeded: Seeded) -> None:
    """`fleetscope_objects{kind,status}` and `fleetscope_cluster_objects{cluster,status}` equal
    the rows; re-read only for clusters written since, and not more often than the refresh."""
    from collections import Counter

    from common.index import keys
    from query.fleet_metrics import ObjectCounts, object_families
    from tests.support.index_fleet import make_row, write_rows

    counts = ObjectCounts(seeded.r, refresh_s=0)
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in object_families(counts.current(CLUSTERS))
        for s in family.samples
    }
    by_kind = Counter((r["kind"], r["status"]) for r in seeded.rows)
    for (kind, status), n in by_kind.items():
        assert got[("fleetscope_objects", (("kind", kind), ("status", status)))] == n
    per_cluster = Counter((r["cluster"], r["status"]) for r in seeded.rows)
    for (cluster, status), n in per_cluster.items():
        assert got[("fleetscope_cluster_objects", (("cluster", cluster), ("status", status)))] == n
    assert counts.reads == len(CLUSTERS)
    counts.current(CLUSTERS)
    assert counts.reads == len(CLUSTERS)  # nothing written: no table read again
    write_rows(seeded.r, [make_row("c01", "team-01", "Kustomization", "extra", "unhealthy")])
    tables = counts.current(CLUSTERS)
    assert counts.reads == len(CLUSTERS) + 1
    assert tables["c01"][("Kustomization", "unhealthy")] == by_kind_in(seeded, "c01") + 1
    slow = ObjectCounts(seeded.r, refresh_s=3600)
    slow.current(CLUSTERS)
    seeded.r.incr(keys.generation("c02"))
    slow.current(CLUSTERS)
    assert slow.reads == len(CLUSTERS)  # within the refresh interval: the cached tables


def by_kind_in(seeded: Seeded, cluster: str) -> int:
    return sum(
        1
        for r in seeded.rows
        if r["cluster"] == cluster and (r["kind"], r["status"]) == ("Kustomization", "unhealthy")
    )
