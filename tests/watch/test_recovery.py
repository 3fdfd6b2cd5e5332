"""Recovery: a relist after 410 (history compacted while the watch was behind), the scheduled
full sync repairing an event the watcher never received, and the generation fence between them."""

from __future__ import annotations

from collections.abc import Callable

import redis

from collector.clusters import ClusterSource
from collector.jobs import Collector
from common.index import keys, rows
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import REG, Running, consistent, full_sync_members, stored


def test_relist_after_410(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    # Watches end every second, so the watcher re-watches from its last resourceVersion.
    run = start_replica("a", wsettings.replace(watch_timeout_s=1.0))
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what="watched")
    watch = run.replica.watches[c]
    lists_before = watch.stats["lists"]
    sim.set_fault(c, stall_watch=True)  # the watcher falls behind: no events, no bookmarks
    sim.set_ready(c, "Kustomization", "app-0002", "apps", False, reason="Stalled", message="x")
    sim.compact(c)  # and its resourceVersion is now older than the server keeps
    sim.set_fault(c)
    wait_for(lambda: watch.stats["expired"] >= 1, what="a 410 on re-watch")
    wait_for(lambda: watch.stats["lists"] > lists_before, what="a relist")
    wait_for(
        lambda: (
            rows.status_of(row_of(rb, c, "app-0002", "Kustomization", "apps") or "h") == "unhealthy"
        )
    )
    wait_for(lambda: stored(rb, c) == full_sync_members(sim, c), what="rows equal a full sync")
    assert consistent(rb, c)
    relists = [
        rec
        for rec in sim.request_log(c)
        if rec.path.endswith("/kustomizations") and "watch" not in rec.query
    ]
    assert len(relists) >= 2  # the first list and the one after 410


def test_full_sync_repairs_a_dropped_event(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    run = start_replica("a")
    c = sim.clusters[1]
    wait_for(lambda: run.healthy(c), what="watched")
    sim.set_fault(c, stall_watch=True)  # the open watches stay open and deliver nothing
    sim.set_ready(c, "Kustomization", "app-0000", "apps", False, reason="BuildFailed", message="y")
    gateway = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "missed", "namespace": "app-0000"},
        "spec": {},
    }
    sim.apply(c, gateway)
    assert row_of(rb, c, "app-0000", "Gateway", "missed") is None  # dropped by the watch
    gen = int(rb.get(keys.generation(c)) or 0)
    collector = Collector(wsettings, rb, REG, ClusterSource(wsettings))
    result = collector.sync_objects(c)  # the scheduled safety net
    assert result.ok and result.added == 2 and result.removed == 1
    assert row_of(rb, c, "app-0000", "Gateway", "missed") is not None
    assert rows.status_of(row_of(rb, c, "app-0000", "Kustomization", "apps") or "") == "unhealthy"
    assert stored(rb, c) == full_sync_members(sim, c)
    assert consistent(rb, c)
    assert int(rb.get(keys.generation(c)) or 0) > gen
    # The watcher resumes, and a later event lands on top of the repaired rows.
    sim.set_fault(c)
    sim.set_ready(c, "Kustomization", "app-0000", "apps", True, reason="Succeeded", message="ok")
    # The stalled streams end only at their timeout; a new event needs a fresh watch.
    watch = run.replica.watches[c]
    for stream in list(watch._streams):
        stream.close()  # a broken stream: the watcher relists
    wait_for(
        lambda: (
            rows.status_of(row_of(rb, c, "app-0000", "Kustomization", "apps") or "") == "healthy"
        )
    )
    wait_for(lambda: stored(rb, c) == full_sync_members(sim, c), what="rows equal a full sync")


def test_a_cluster_down_for_a_while_is_resumed_without_a_relist(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    """The API server goes away (streams cut, reconnects refused) and comes back: the watches
    resume from their last resourceVersion, as client-go's reflector does, and the server
    replays what changed meanwhile; nothing is listed again."""
    run = start_replica("a")
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what="watched")
    watch = run.replica.watches[c]
    lists_before = watch.stats["lists"]
    sim.clear_request_log(c)
    sim.set_fault(c, down=True)
    wait_for(lambda: not watch.listed(), what="the streams cut")
    sim.set_ready(c, "Kustomization", "app-0003", "apps", False, reason="Failed", message="z")
    sim.set_fault(c)
    wait_for(
        lambda: (
            rows.status_of(row_of(rb, c, "app-0003", "Kustomization", "apps") or "h") == "unhealthy"
        ),
        what="the change made while down",
    )
    wait_for(lambda: watch.listed(), what="every stream open again")
    assert watch.stats["broken"] >= 1
    assert watch.stats["lists"] == lists_before
    lists = [rec for rec in sim.request_log(c) if "watch" not in rec.query]
    assert lists == [], [rec.path for rec in lists]
    assert stored(rb, c) == full_sync_members(sim, c)


def test_watches_ask_for_timeouts_spread_over_twice_the_setting(
    sim: KubeSim, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    # As client-go's reflector: each watch asks for between FLEETSCOPE_WATCH_TIMEOUT_S and
    # twice it, so a replica's streams (opened together) do not all end and reopen together.
    run = start_replica("a", wsettings.replace(watch_timeout_s=300.0))
    c = sim.clusters[0]
    wait_for(lambda: run.healthy(c), what="watched")

    def asked() -> list[int]:
        return [
            int(r.query["timeoutSeconds"])
            for r in sim.request_log(c)
            if r.query.get("watch") in ("1", "true") and "timeoutSeconds" in r.query
        ]

    wait_for(lambda: len(asked()) >= 20, what="the cluster's watches open")
    timeouts = asked()
    assert all(300 <= t < 600 for t in timeouts), timeouts
    assert len(set(timeouts)) >= len(timeouts) // 2, f"not spread: {sorted(timeouts)}"
