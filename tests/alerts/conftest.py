"""The session's real Alertmanager (tests/alerts/alertmanager.py), emptied before each test
that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.alerts.alertmanager import BINARY, Alertmanager


@pytest.fixture(scope="session")
def alertmanager_server() -> Iterator[Alertmanager]:
    if BINARY is None:
        pytest.fail("prometheus-alertmanager is not installed (.ci/run installs it)")
    am = Alertmanager().start()
    yield am
    am.close()


@pytest.fixture
def alertmanager(alertmanager_server: Alertmanager) -> Alertmanager:
    if alertmanager_server.alerts():
        alertmanager_server.clear()
    return alertmanager_server
