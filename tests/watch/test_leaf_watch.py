"""LeafClient.watch against kubesim over HTTPS: events and bookmarks arrive as they happen, an
expired resourceVersion raises WatchExpired, and close() from another thread ends a blocked read."""

from __future__ import annotations

import threading

import pytest

from common.leaf.client import WatchExpired
from kubesim.server import KubeSim
from tests.support.waiting import wait_for
from tests.watch.harness import KS, client_for


def test_events_then_close_from_another_thread(sim: KubeSim) -> None:
    c = sim.clusters[0]
    client = client_for(sim, c)
    items, rv = client.list_snapshot(KS, "kustomizations")
    assert items and rv
    stream = client.watch(KS, "kustomizations", rv, timeout_s=300, idle_s=60)
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def read() -> None:
        for kind, obj in stream:
            seen.append((kind, obj["metadata"].get("name", "")))
        done.set()

    t = threading.Thread(target=read)
    t.start()
    sim.set_ready(c, "Kustomization", "app-0000", "apps", False, reason="Failed")
    wait_for(lambda: ("MODIFIED", "apps") in seen, what="the event")
    wait_for(lambda: any(k == "BOOKMARK" for k, _ in seen), what="a bookmark")
    stream.close()
    t.join(10)
    assert done.is_set() and not t.is_alive()
    assert client.requests == 2  # one list page, one watch
    client.close()


def test_expired_resource_version(sim: KubeSim) -> None:
    c = sim.clusters[1]
    client = client_for(sim, c)
    _, rv = client.list_snapshot(KS, "kustomizations")
    sim.set_ready(c, "Kustomization", "app-0000", "apps", False)
    sim.compact(c)
    with pytest.raises(WatchExpired):
        for _ in client.watch(KS, "kustomizations", rv, timeout_s=5, idle_s=5):
            pass
    client.close()
