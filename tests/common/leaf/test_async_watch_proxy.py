"""Watch streams (common.leaf.async_watch) through an HTTP proxy on loopback (tests.support.
httpproxy), against kubesim: an https server through a CONNECT tunnel, an http one with
absolute-form requests, the proxy's credentials from the kubeconfig's `proxy-url` sent to the
proxy only, lists through the same proxy, `no_proxy` honoured; and a watch line far bigger than
a chunk or a read arrives whole."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.watch import loop as watch_loop
from common.errors import FleetscopeError
from common.leaf import async_watch
from common.leaf.client import ClusterConfig, LeafClient
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.httpproxy import HttpProxy, basic
from tests.support.waiting import wait_for

KS = "kustomize.toolkit.fluxcd.io/v1"
USER, PASSWORD = "egress", "pr0xy-SECRET-p@ss"


def run(coro: Any) -> Any:
    return watch_loop.shared().submit(coro).result(30)


@pytest.fixture
def proxy() -> Iterator[HttpProxy]:
    with HttpProxy(credentials=(USER, PASSWORD)) as p:
        yield p


@pytest.fixture(params=[True, False], ids=["https-connect", "http-absolute-form"])
def sim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeSim]:
    fleet = generate_fleet(clusters=1, namespaces=3, seed=5)
    yield from sims.running(fleet, tmp_path, bookmark_interval_s=0.2, tls=request.param)


def proxied(sim: KubeSim, proxy_url: str, no_proxy: str = "") -> LeafClient:
    """A client of the sim's cluster whose kubeconfig names `proxy_url`."""
    c = sim.clusters[0]
    kubeconfig = copy.deepcopy(sim.kubeconfig(c))
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = proxy_url
    config = ClusterConfig(c, "dir", "test", kubeconfig)
    if no_proxy:
        config.configuration().no_proxy = no_proxy
    return LeafClient(config, timeout_s=5)


def quote_password() -> str:
    return PASSWORD.replace("@", "%40")


def test_watch_goes_through_the_proxy_with_its_credentials(sim: KubeSim, proxy: HttpProxy) -> None:
    client = proxied(sim, proxy.url(f"{USER}:{quote_password()}"))
    tls = client.configuration.host.startswith("https")
    assert async_watch.supported(client)
    items, rv = client.list_snapshot(KS, "kustomizations")  # the list through the proxy too
    assert items and rv
    listed = proxy.connections
    assert listed >= 1
    opened: list[async_watch.AsyncWatchStream] = []
    seen: list[tuple[str, str]] = []

    async def read() -> None:
        stream = await async_watch.open_watch(
            client, async_watch.ssl_context(client), KS, "kustomizations", rv, 300, 30
        )
        opened.append(stream)
        async for kind, obj in stream:
            seen.append((kind, obj["metadata"].get("name", "")))

    done = watch_loop.shared().submit(read())
    wait_for(lambda: opened, what="the watch open")
    item = items[0]["metadata"]
    sim.set_ready(sim.clusters[0], "Kustomization", item["namespace"], item["name"], False)
    wait_for(lambda: ("MODIFIED", item["name"]) in seen, what="the event through the proxy")
    wait_for(lambda: any(k == "BOOKMARK" for k, _ in seen), what="a bookmark")
    opened[0].close()
    done.result(10)

    assert proxy.connections == listed + 1  # the watch: one connection of its own
    watch = [s for s in proxy.seen if "watch=1" in s.target or s.method == "CONNECT"][-1]
    assert watch.proxy_auth == basic(USER, PASSWORD)  # user info percent-decoded
    port = sim.port(sim.clusters[0])
    if tls:
        assert watch.method == "CONNECT" and watch.target.endswith(f":{port}")
    else:
        assert watch.method == "GET"
        assert watch.target.startswith(f"http://127.0.0.1:{port}/apis/{KS}/kustomizations?")
        head = watch.forwarded_head.decode("latin-1").lower()
        assert "proxy-authorization" not in head  # the proxy's, not the server's
        assert "authorization: bearer" in head
    assert proxy.refused == 0
    client.close()


def test_wrong_proxy_credentials_fail_the_watch(sim: KubeSim, proxy: HttpProxy) -> None:
    client = proxied(sim, proxy.url(f"{USER}:wrong"))

    async def open_() -> None:
        await async_watch.open_watch(
            client, async_watch.ssl_context(client), KS, "kustomizations", "0", 5, 5
        )

    with pytest.raises(FleetscopeError) as caught:  # 407 to the CONNECT, or as the answer
        run(open_())
    assert proxy.refused == 1
    assert "wrong" not in str(caught.value)
    client.close()


def test_no_proxy_bypasses_it(sim: KubeSim, proxy: HttpProxy) -> None:
    client = proxied(sim, proxy.url(), no_proxy="127.0.0.1")
    assert async_watch.supported(client)

    async def open_and_close() -> None:
        stream = await async_watch.open_watch(
            client, async_watch.ssl_context(client), KS, "kustomizations", "0", 5, 5
        )
        stream.close()

    run(open_and_close())
    assert proxy.connections == 0
    client.close()


def test_socks_and_tls_proxies_keep_threads(sim: KubeSim, proxy: HttpProxy) -> None:
    client = proxied(sim, proxy.url())
    assert async_watch.supported(client)
    for url in ("socks5://127.0.0.1:1080", "https://127.0.0.1:3129"):
        client.configuration.proxy = url
        assert not async_watch.supported(client)
    client.close()


def test_a_line_bigger_than_any_chunk_arrives_whole(sim: KubeSim) -> None:
    """A 3 MiB status message: one watch line read in many pieces, parsed once."""
    c = sim.clusters[0]
    config = ClusterConfig(c, "dir", "test", sim.kubeconfig(c))
    client = LeafClient(config, timeout_s=5)
    items, rv = client.list_snapshot(KS, "kustomizations")
    message = "m" * (3 * 1024 * 1024)
    got: list[dict[str, Any]] = []
    opened: list[async_watch.AsyncWatchStream] = []

    async def read() -> None:
        stream = await async_watch.open_watch(
            client, async_watch.ssl_context(client), KS, "kustomizations", rv, 300, 30
        )
        opened.append(stream)
        async for kind, obj in stream:
            if kind == "MODIFIED":
                got.append(obj)

    done = watch_loop.shared().submit(read())
    wait_for(lambda: opened, what="the watch open")
    for item in items[:2]:
        meta = item["metadata"]
        sim.set_ready(c, "Kustomization", meta["namespace"], meta["name"], False, message=message)
    wait_for(lambda: len(got) == 2, what="both big events")
    opened[0].close()
    done.result(10)
    assert [o["status"]["conditions"][0]["message"] for o in got] == [message, message]
    client.close()
