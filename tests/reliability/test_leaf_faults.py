"""Leaf faults during sync, injected in kubesim: down, slow beyond the timeout, 500s, 429 with
Retry-After, 410 on every continue, stalled watches. The failing cluster keeps its last good rows,
served and marked stale, its error shows in /api/v1/status and in list answers, the other
clusters sync normally, no sync hammers a failing leaf, and it recovers by itself."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from collector.jobs import Collector, collect_once
from common.errors import ClusterUnreachable
from common.index import syncstatus
from kubesim.server import KubeSim
from tests.support.small_fleet import get_json, rows_of

SICK = "cluster-001"
FAULTS: dict[str, tuple[dict[str, Any], str]] = {
    # fault -> (kubesim fault, what the recorded error says)
    "down": ({"down": True}, "connection failed"),
    "slow": ({"latency_s": 3.0}, "timed out"),
    "500": ({"error_rate": 1.0, "status": 500}, "HTTP 500"),
    "429": ({"error_rate": 1.0, "status": 429, "retry_after_s": 17}, "HTTP 429"),
    "410": ({"expire_continue": True}, "kept expiring (410)"),
}


def change_sick_cluster(sim: KubeSim) -> None:
    """A leaf change the failed sync cannot pick up: the old rows must stay as they were."""
    obj = sim.list(SICK, "Kustomization")[0]["metadata"]
    sim.set_ready(SICK, "Kustomization", obj["namespace"], obj["name"], False, "", "broken")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_failing_leaf_keeps_last_good_rows_marked_stale_then_recovers(
    fault: str, sim: KubeSim, collector: Collector, r: redis.Redis, api
) -> None:
    first = collect_once(collector)
    assert all(o.ok for o in first), [(o.objects.error, o.rbac.error) for o in first]
    good = {c: rows_of(r, c) for c in sim.clusters}
    change_sick_cluster(sim)
    spec, error_text = FAULTS[fault]
    sim.set_fault(SICK, **spec)
    sim.clear_request_log()

    outcomes = {o.cluster: o for o in collect_once(collector)}
    assert not outcomes[SICK].objects.ok and not outcomes[SICK].rbac.ok
    assert all(outcomes[c].ok for c in sim.clusters if c != SICK), "others are unaffected"
    assert rows_of(r, SICK) == good[SICK], "the last good snapshot stays, whole"
    sick = syncstatus.read_all(r, [SICK])[SICK]
    assert sick.state == "error" and error_text in sick.last_error
    assert sick.rbac_error and sick.rbac_synced_at is not None, "old grants kept until max age"

    # No retry storm inside a sync: each sync stops at its first failing request; an expired
    # continue token restarts the list a bounded number of times (3) before giving up.
    log = sim.request_log(SICK)
    if fault == "410":
        assert 0 < sum(1 for rec in log if rec.query.get("continue")) <= 2 * 3
    else:
        assert len(log) <= 2, log

    status, body = get_json(api, "/api/v1/status")
    assert status == 200 and body["state"] == "degraded", body
    by_name = {c["cluster"]: c for c in body["clusters"]}
    assert by_name[SICK]["stale"] and error_text in by_name[SICK]["lastError"]
    assert all(not by_name[c]["stale"] for c in sim.clusters if c != SICK)
    status, page = get_json(api, "/api/v1/objects", cluster=SICK, limit=500)
    assert status == 200 and len(page["items"]) == len(good[SICK]), "stale rows stay visible"
    assert [s["cluster"] for s in page["freshness"]["stale"]] == [SICK]
    assert page["freshness"]["degraded"] is True

    sim.set_fault(SICK)  # the leaf recovers; the next scheduled round heals by itself
    assert all(o.ok for o in collect_once(collector))
    assert rows_of(r, SICK) != good[SICK], "the change made during the fault arrives"
    status, body = get_json(api, "/api/v1/status")
    assert body["state"] == "ready" and all(not c["lastError"] for c in body["clusters"])


def test_stalled_watches_do_not_stall_a_sync(
    sim: KubeSim, collector: Collector, r: redis.Redis
) -> None:
    """Syncs list with pagination and never wait on a watch: a leaf whose watches hang open
    and silent is collected normally (the watcher's own handling is tests/watch/)."""
    sim.set_fault(SICK, stall_watch=True)
    outcomes = collect_once(collector)
    assert all(o.ok for o in outcomes)
    assert len(rows_of(r, SICK)) > 0
    assert not any(rec.query.get("watch") for rec in sim.request_log(SICK))


def test_429_retry_after_sets_the_retry_delay(sim: KubeSim, collector: Collector) -> None:
    sim.set_fault(SICK, error_rate=1.0, status=429, retry_after_s=17)
    with pytest.raises(ClusterUnreachable) as err:
        collector.sync_objects(SICK)
    assert err.value.delay_s == 17, "the leaf's Retry-After is honoured (tasks retry no sooner)"
