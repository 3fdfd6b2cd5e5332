"""Fixtures for the reliability tests: the small fleet of tests.support.small_fleet (kubesim, the
real collector over HTTPS into the test Redis, the query app in `header` mode)."""

from __future__ import annotations

from tests.support import small_fleet

sim, settings, collector, api = (
    small_fleet.sim,
    small_fleet.settings,
    small_fleet.collector,
    small_fleet.api,
)
