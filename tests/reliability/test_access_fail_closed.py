"""Access data and removals, end to end (kubesim -> collector -> Redis -> query API): RBAC data
older than FLEETSCOPE_RBAC_MAX_AGE_S (default 300) hides that cluster's rows and the status and
list answers say why; a RoleBinding deleted on the leaf stops showing its rows after the next
RBAC sync (the leaf refuses detail reads at once); a deleted cluster's rows disappear."""

from __future__ import annotations

import time

import pytest
import redis

from collector.jobs import Collector, collect_once
from common.errors import ClusterUnreachable
from common.index import keys
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.small_fleet import get_json

TEAM = {"X-Remote-User": "dev-team-00", "X-Remote-Group": "team-00"}


def visible(api, headers: dict[str, str], **filters: str) -> set[tuple[str, str]]:
    status, body = get_json(api, "/api/v1/objects", headers, limit=500, **filters)
    assert status == 200 and body["continue"] is None, body
    return {(row["cluster"], row["namespace"]) for row in body["items"]}


def test_stale_rbac_data_fails_closed_and_says_why(
    sim: KubeSim, collector: Collector, r: redis.Redis, api, settings: Settings
) -> None:
    assert settings.rbac_max_age_s == 300
    assert all(o.ok for o in collect_once(collector))
    assert {c for c, _ in visible(api, TEAM)} == set(sim.clusters)

    sim.set_fault("cluster-001", down=True)
    with pytest.raises(ClusterUnreachable):  # recorded in Redis; the old grants stay
        collector.sync_rbac("cluster-001")
    # Time passes: the last good RBAC sync is now older than the limit.
    r.hset(keys.sync("cluster-001"), "rbac_synced_at", str(time.time() - 301))

    assert "cluster-001" not in {c for c, _ in visible(api, TEAM)}
    _, page = get_json(api, "/api/v1/objects", TEAM, cluster="cluster-001")
    assert page["items"] == [] and page["freshness"]["state"] == "degraded"
    assert [h["cluster"] for h in page["freshness"]["hiddenStaleRbac"]] == ["cluster-001"]
    assert "without fresh access data (rows hidden)" in page["freshness"]["message"]
    _, status = get_json(api, "/api/v1/status", TEAM)
    row = {c["cluster"]: c for c in status["clusters"]}["cluster-001"]
    assert row["rbacFresh"] is False and row["rbacAgeS"] > 300
    assert get_json(api, "/api/v1/objects", None, cluster="cluster-001")[1]["items"] == []

    sim.set_fault("cluster-001")
    collector.sync_rbac("cluster-001")  # the next scheduled RBAC sync
    assert "cluster-001" in {c for c, _ in visible(api, TEAM)}
    assert get_json(api, "/api/v1/status", TEAM)[1]["state"] == "ready"


def test_deleted_rolebinding_stops_showing_rows_after_the_next_rbac_sync(
    sim: KubeSim, collector: Collector, api
) -> None:
    assert all(o.ok for o in collect_once(collector))
    before = visible(api, TEAM, cluster="cluster-000")
    assert ("cluster-000", "app-0000") in before
    obj = sim.list("cluster-000", "Kustomization", namespace="app-0000")[0]["metadata"]
    detail = f"/api/v1/objects/cluster-000/app-0000/Kustomization/{obj['name']}"
    assert get_json(api, detail, TEAM)[0] == 200

    sim.delete("cluster-000", "RoleBinding", "app-0000", "team-view")
    assert get_json(api, detail, TEAM)[0] == 403, "the leaf decides detail reads at once"
    collector.sync_rbac("cluster-000")
    after = visible(api, TEAM, cluster="cluster-000")
    assert after == before - {("cluster-000", "app-0000")}


def test_deleted_cluster_rows_disappear(
    sim: KubeSim, collector: Collector, r: redis.Redis, api
) -> None:
    assert all(o.ok for o in collect_once(collector))
    assert visible(api, {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"})
    assert sim.kubeconfig_dir is not None
    sim.kubeconfig_path("cluster-002").unlink()
    result = collector.reconcile()
    assert result.removed == ["cluster-002"]
    assert not r.exists(*keys.cluster_keys("cluster-002"))
    admin = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
    assert {c for c, _ in visible(api, admin)} == {"cluster-000", "cluster-001"}
    _, status = get_json(api, "/api/v1/status", admin)
    assert status["total"] == 2 and status["state"] == "ready"
    assert "cluster-002" not in [c["cluster"] for c in status["clusters"]]
