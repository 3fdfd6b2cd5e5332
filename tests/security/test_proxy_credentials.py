"""Attack surface: a leaf cluster reached through an HTTP proxy whose `proxy-url` carries
credentials (`http://user:password@proxy:port`), with the collector's bearer token. Whatever
goes wrong on the way (the proxy refuses the credentials, is down, cuts a stream; the leaf
refuses the token) and on the way that works, neither the proxy's password (nor its Basic form)
nor the bearer token appears in any log record (every logger at DEBUG, tracebacks included) or
in the errors raised (their text, repr and formatted traceback), for the watcher's asyncio
streams (common.leaf.async_watch) and the lists of common.leaf.client."""

from __future__ import annotations

import base64
import copy
import logging
import traceback
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
from tests.support.httpproxy import HttpProxy
from tests.support.waiting import wait_for

KS = "kustomize.toolkit.fluxcd.io/v1"
USER = "egress"
PASSWORD = "pr0xy-SECRET-4242"
WRONG = "wr0ng-SECRET-9999"
BOGUS_TOKEN = "tok-SECRET-b0gus-31337"


@pytest.fixture(params=[True, False], ids=["https-connect", "http-absolute-form"])
def sim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeSim]:
    fleet = generate_fleet(clusters=1, namespaces=2, seed=7)
    yield from sims.running(fleet, tmp_path, bookmark_interval_s=0.2, tls=request.param)


def secrets(sim: KubeSim) -> list[str]:
    out = [PASSWORD, WRONG, BOGUS_TOKEN, sim.collector_token]
    for password in (PASSWORD, WRONG):
        out.append(base64.b64encode(f"{USER}:{password}".encode()).decode())
    return out


def client(sim: KubeSim, proxy_url: str, token: str = "") -> LeafClient:
    c = sim.clusters[0]
    kubeconfig = copy.deepcopy(sim.kubeconfig(c, token))
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = proxy_url
    return LeafClient(ClusterConfig(c, "dir", "test", kubeconfig), timeout_s=3)


def run(coro: Any) -> Any:
    return watch_loop.shared().submit(coro).result(30)


def watch_error(leaf: LeafClient) -> FleetscopeError:
    async def open_and_read() -> None:
        stream = await async_watch.open_watch(
            leaf, async_watch.ssl_context(leaf), KS, "kustomizations", "0", 5, 5
        )
        async for _ in stream:
            pass

    with pytest.raises(FleetscopeError) as caught:
        run(open_and_read())
    return caught.value


def shown(e: BaseException) -> str:
    return "\n".join([str(e), repr(e), *traceback.format_exception(e)])


def test_no_proxy_credentials_or_token_in_logs_or_errors(
    sim: KubeSim, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    with HttpProxy(credentials=(USER, PASSWORD)) as proxy:
        good = proxy.url(f"{USER}:{PASSWORD}")

        # the proxy refuses the credentials: the watch, and a list
        wrong = client(sim, proxy.url(f"{USER}:{WRONG}"))
        errors.append(watch_error(wrong))
        with pytest.raises(FleetscopeError) as listed:
            wrong.list_snapshot(KS, "kustomizations")
        errors.append(listed.value)
        wrong.close()

        # the leaf refuses the token (through the right proxy)
        refused = client(sim, good, token=BOGUS_TOKEN)
        errors.append(watch_error(refused))
        refused.close()

        # the way that works, then the proxy goes away under an open stream
        leaf = client(sim, good)
        _, rv = leaf.list_snapshot(KS, "kustomizations")
        opened: list[async_watch.AsyncWatchStream] = []
        ended: list[BaseException] = []

        async def read() -> None:
            stream = await async_watch.open_watch(
                leaf, async_watch.ssl_context(leaf), KS, "kustomizations", rv, 300, 30
            )
            opened.append(stream)
            try:
                async for _ in stream:
                    pass
            except FleetscopeError as e:
                ended.append(e)

        done = watch_loop.shared().submit(read())
        wait_for(lambda: opened, what="the watch open through the proxy")
        assert proxy.refused == 2  # the wrong credentials' watch and list only
        proxy.stop()
        done.result(10)
        errors.extend(ended)
        assert ended, "the cut stream raised"
        leaf.close()

    # the proxy is down: nothing listens at its address any more
    down = client(sim, good)
    errors.append(watch_error(down))
    with pytest.raises(FleetscopeError) as listed:
        down.list_snapshot(KS, "kustomizations")
    errors.append(listed.value)
    down.close()

    assert len(errors) == 6
    logged = caplog.text + "\n".join(r.getMessage() + repr(r.args) for r in caplog.records)
    for secret in secrets(sim):
        for e in errors:
            assert secret not in shown(e), (secret, shown(e))
        assert secret not in logged, secret
