"""Watch streams on asyncio (common.leaf.async_watch) against kubesim over HTTPS: events and
bookmarks as they happen, close() from another thread, 410 -> WatchExpired, an error answer
translated; and a watched cluster holds its ~30 streams without a thread per watch, also when
it is reached through an HTTP proxy."""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from collector.watch import loop as watch_loop
from common.errors import ClusterError, ClusterUnreachable
from common.leaf import async_watch, registry
from common.leaf.client import LeafClient, WatchExpired
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.httpproxy import HttpProxy
from tests.support.waiting import wait_for
from tests.watch.harness import KS, Running, client_for


def run(coro: Any) -> Any:
    return watch_loop.shared().submit(coro).result(30)


def test_events_then_close_from_another_thread(sim: KubeSim) -> None:
    c = sim.clusters[0]
    client = client_for(sim, c)
    items, rv = client.list_snapshot(KS, "kustomizations")
    assert items and rv
    ctx = async_watch.ssl_context(client)
    assert ctx is not None  # kubesim serves HTTPS: the CA of the kubeconfig is used
    seen: list[tuple[str, str]] = []
    opened: list[async_watch.AsyncWatchStream] = []

    async def read() -> str:
        stream = await async_watch.open_watch(client, ctx, KS, "kustomizations", rv, 300, 60)
        opened.append(stream)
        async for kind, obj in stream:
            seen.append((kind, obj["metadata"].get("name", "")))
        return "ended"

    done = watch_loop.shared().submit(read())
    wait_for(lambda: opened, what="the watch open")
    sim.set_ready(c, "Kustomization", "app-0000", "apps", False, reason="Failed")
    wait_for(lambda: ("MODIFIED", "apps") in seen, what="the event")
    wait_for(lambda: any(k == "BOOKMARK" for k, _ in seen), what="a bookmark")
    opened[0].close()  # from this thread: the loop's read ends quietly
    assert done.result(10) == "ended"
    assert client.requests == 2  # one list page, one watch
    client.close()


def test_expired_resource_version(sim: KubeSim) -> None:
    c = sim.clusters[1]
    client = client_for(sim, c)
    _, rv = client.list_snapshot(KS, "kustomizations")
    sim.set_ready(c, "Kustomization", "app-0000", "apps", False)
    sim.compact(c)

    async def read() -> None:
        ctx = async_watch.ssl_context(client)
        stream = await async_watch.open_watch(client, ctx, KS, "kustomizations", rv, 5, 5)
        async for _ in stream:
            pass

    with pytest.raises(WatchExpired):
        run(read())
    client.close()


def test_error_answer_and_unreachable(sim: KubeSim) -> None:
    c = sim.clusters[0]
    client = client_for(sim, c)
    ctx = async_watch.ssl_context(client)

    async def open_(api_version: str, plural: str) -> None:
        await async_watch.open_watch(client, ctx, api_version, plural, "0", 5, 5)

    with pytest.raises(ClusterError, match="HTTP 404"):
        run(open_(KS, "nosuchresources"))
    sim.set_fault(c, down=True)
    try:
        with pytest.raises(ClusterUnreachable):
            run(open_(KS, "kustomizations"))
    finally:
        sim.set_fault(c)
    client.close()


def test_an_http_proxied_cluster_watches_on_the_loop(sim: KubeSim) -> None:
    client: LeafClient = client_for(sim, sim.clusters[0])
    assert async_watch.supported(client)
    client.configuration.proxy = "http://127.0.0.1:3128"
    assert async_watch.supported(client)  # an HTTP proxy: on the loop too (issue #38)
    client.configuration.proxy = "socks5://127.0.0.1:1080"
    assert not async_watch.supported(client)  # SOCKS: a thread per watch
    client.close()


def test_proxied_replica_has_no_thread_per_watch(
    sim: KubeSim,
    wsettings: Settings,
    rb: Any,
    start_replica: Callable[..., Running],
    tmp_path: Path,
) -> None:
    """Both clusters behind an HTTP proxy (CONNECT, with credentials): every stream goes
    through the proxy, and the replica holds them on its one loop thread."""
    proxied_dir = tmp_path / "proxied"
    proxied_dir.mkdir()
    with HttpProxy(credentials=("egress", "s3cret")) as proxy:
        for c in sim.clusters:
            kubeconfig = copy.deepcopy(sim.kubeconfig(c))
            kubeconfig["clusters"][0]["cluster"]["proxy-url"] = proxy.url("egress:s3cret")
            (proxied_dir / f"{c}.yaml").write_text(yaml.safe_dump(kubeconfig))
        settings = dataclasses.replace(wsettings, clusters_dir=str(proxied_dir))
        registry.reconcile(rb, registry.load_cluster_configs(settings))
        sim.clear_request_log()
        run_ = start_replica("a", settings)
        for c in sim.clusters:
            wait_for(lambda c=c: run_.healthy(c), what=f"{c} watched through the proxy")
        streams = 0
        for c in sim.clusters:
            watch = run_.replica.watches[c]
            assert watch._async
            streams += len(watch._streams)
            threads = [t for t in threading.enumerate() if t.name.startswith(f"{c}:")]
            names = sorted(t.name.split(":", 1)[1] for t in threads if t.is_alive())
            assert set(names) <= {"writer", "rbac", "mesh", "start"}, names
        assert streams >= 40  # ~30 a cluster
        assert len([t for t in threading.enumerate() if t.name == "watch-loop"]) == 1
        tunnels = [s for s in proxy.seen if s.method == "CONNECT"]
        assert proxy.refused == 0
        assert len(tunnels) >= streams  # every watch (and the lists) through the proxy
        watches = sum(
            1
            for c in sim.clusters
            for r in sim.request_log(c)
            if r.query.get("watch") in ("1", "true")
        )
        assert watches >= streams
        run_.stop()


def test_no_thread_per_watch(sim: KubeSim, start_replica: Callable[..., Running], rb: Any) -> None:
    """Every served kind of both clusters watched: per cluster a writer, an RBAC and (with Istio
    kinds) a validation thread, whatever the number of streams (~30 a cluster)."""
    run_ = start_replica("a")
    for c in sim.clusters:
        wait_for(lambda c=c: run_.healthy(c), what=f"{c} watched")
    for c in sim.clusters:
        watch = run_.replica.watches[c]
        streams = len(watch._streams)
        assert streams >= 20, streams  # the kinds, RBAC, Services and Namespaces
        threads = [t for t in threading.enumerate() if t.name.startswith(f"{c}:")]
        names = sorted(t.name.split(":", 1)[1] for t in threads if t.is_alive())
        assert set(names) <= {"writer", "rbac", "mesh", "start"}, names
    loop_threads = [t for t in threading.enumerate() if t.name == "watch-loop"]
    assert len(loop_threads) == 1
