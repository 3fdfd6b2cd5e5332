"""Fixtures of the attack tests: the reliability suite's small kubesim fleet collected into the
test Redis (the leaves count every request they receive), and an app served over real HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from collector.jobs import Collector, collect_once
from kubesim.server import KubeSim
from tests.cli.conftest import cli, home  # noqa: F401 (fixtures)
from tests.query.conftest import make_app, seeded  # noqa: F401 (a fixture)
from tests.reliability.conftest import collector, settings, sim  # noqa: F401 (fixtures)
from tests.support.http import serve


def leaf_requests(fleet: KubeSim) -> int:
    return sum(len(fleet.request_log(c)) for c in fleet.clusters)


@pytest.fixture
def collected(sim: KubeSim, collector: Collector) -> KubeSim:  # noqa: F811
    """The fleet collected once; the leaves' request logs then emptied."""
    assert all(o.ok for o in collect_once(collector))
    sim.clear_request_log()
    return sim


@pytest.fixture
def host(collected: KubeSim, settings) -> Iterator[str]:  # noqa: F811
    """The query app (header mode, trusting loopback) on a real HTTP server: `HOST:PORT`."""
    with serve(make_app(settings)) as h:
        yield h


Headers = list[tuple[str, str | bytes]]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any  # the JSON document, or None when the answer is not JSON


def request(
    host: str, target: str, headers: Headers | None = None, http_host: str | None = None
) -> Answer:
    """GET `target` byte for byte, each header as given (repeated ones repeated; bytes values
    sent as they are), with `http_host` as the Host header when given."""
    name, port = host.rsplit(":", 1)
    conn = http.client.HTTPConnection(name, int(port), timeout=10)
    try:
        conn.putrequest("GET", target, skip_host=http_host is not None, skip_accept_encoding=True)
        if http_host is not None:
            conn.putheader("Host", http_host)
        for k, v in headers or []:
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
