"""The watcher re-validates a cluster's Istio config after events, dependents included: deleting a
Gateway turns the VirtualServices naming it unhealthy, re-creating it heals them, and a Service
appearing clears a host warning, each within the freshness target (polled, not slept)."""

from __future__ import annotations

from collections.abc import Callable

import redis

from common.index import keys, rows
from kubesim.server import KubeSim
from tests.support.waiting import wait_for
from tests.watch.harness import Running, full_sync_members, stored

NS = "app-0001"
GATEWAY = {
    "apiVersion": "networking.istio.io/v1",
    "kind": "Gateway",
    "metadata": {"name": "shop-gw", "namespace": NS},
    "spec": {
        "selector": {"istio": "shop-ingress"},
        "servers": [
            {
                "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                "hosts": ["shop.example.com"],
            }
        ],
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "shop", "namespace": NS},
    "spec": {"ports": [{"port": 80, "name": "http"}], "selector": {"app": "shop"}},
}
VIRTUAL_SERVICE = {
    "apiVersion": "networking.istio.io/v1",
    "kind": "VirtualService",
    "metadata": {"name": "shop", "namespace": NS},
    "spec": {
        "hosts": ["shop.example.com"],
        "gateways": ["shop-gw"],
        "http": [{"route": [{"destination": {"host": "shop"}}]}],
    },
}


def vs_member(r: redis.Redis, cluster: str) -> str | None:
    prefix = rows.sort_key(NS, "VirtualService", "shop").encode()
    found = r.zrangebylex(keys.rows(cluster), b"[" + prefix, b"[" + prefix + b"\xff")
    return found[0].decode() if found else None


def vs_row(r: redis.Redis, cluster: str) -> rows.Row | None:
    member = vs_member(r, cluster)
    return rows.decode(cluster, member) if member else None


def test_deleting_a_gateway_revalidates_the_virtualservices_naming_it(
    sim: KubeSim, rb: redis.Redis, start_replica: Callable[..., Running]
) -> None:
    c = sim.clusters[0]
    run = start_replica("a")
    wait_for(lambda: run.healthy(c), what="watched")
    wait_for(lambda: stored(rb, c) == full_sync_members(sim, c), what="listed")
    sim.apply(c, SERVICE)
    sim.apply(c, GATEWAY)
    sim.apply(c, VIRTUAL_SERVICE)
    wait_for(
        lambda: (vs_row(rb, c) or {}).get("status") == "healthy", what="the VS checked healthy"
    )

    sim.delete(c, "gateways.networking.istio.io", NS, "shop-gw")
    wait_for(lambda: (vs_row(rb, c) or {}).get("status") == "unhealthy", what="the VS re-checked")
    row = vs_row(rb, c)
    assert row is not None and row["reason"] == "KIA1102" and "shop-gw" in row["message"]
    unhealthy = {m.decode() for m in rb.zrange(keys.by_status(c, "unhealthy"), 0, -1)}
    assert vs_member(rb, c) in unhealthy  # the indexes follow the re-checked row

    sim.apply(c, GATEWAY)
    wait_for(lambda: (vs_row(rb, c) or {}).get("status") == "healthy", what="the VS healed")
    # A destination host with no Service is a warning: the row stays healthy but says so.
    sim.delete(c, "Service", NS, "shop")
    wait_for(lambda: (vs_row(rb, c) or {}).get("warnings", 0) > 0, what="the host warning")
    row = vs_row(rb, c)
    assert row is not None and row["status"] == "healthy" and "shop" in row["message"]
    # What the watcher stored is what a full sync would store now.
    wait_for(lambda: stored(rb, c) == full_sync_members(sim, c), what="watch equals full sync")
