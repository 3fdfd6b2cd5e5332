"""Fixtures of the attack tests: the reliability suite's small kubesim fleet (tests.support.
small_fleet) collected into the test Redis (the leaves count every request they receive), and an
app served over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from collector.jobs import Collector, collect_once
from kubesim.server import KubeSim
from tests.support import small_fleet
from tests.support.http import make_app, serve

sim, settings, collector = small_fleet.sim, small_fleet.settings, small_fleet.collector


@pytest.fixture
def collected(sim: KubeSim, collector: Collector) -> KubeSim:
    """The fleet collected once; the leaves' request logs then emptied."""
    assert all(o.ok for o in collect_once(collector))
    sim.clear_request_log()
    return sim


@pytest.fixture
def host(collected: KubeSim, settings) -> Iterator[str]:
    """The query app (header mode, trusting loopback) on a real HTTP server: `HOST:PORT`."""
    with serve(make_app(settings)) as h:
        yield h
