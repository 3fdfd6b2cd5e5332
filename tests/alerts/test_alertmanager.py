"""Delivery to a real Alertmanager (v2 API): what fires arrives with its labels, annotations
and generatorURL, a resolved alert ends there, firing alerts come back after Alertmanager
restarts (re-sent from fleetscope's state), every URL of an HA list is sent to, a down
Alertmanager is reported and retried, and credentials never reach the logs."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from common.alerts import deliver
from common.alerts.state import iso
from common.redis_server import free_port
from common.settings import Settings
from tests.support.alert_index import Harness, put, row, rules_file
from tests.support.alertmanager import Alertmanager

RULES = """
rules:
  - name: KustomizationFailing
    match: {kind: Kustomization, status: unhealthy}
    for: 10s
    severity: critical
    labels: {team: "{{ .namespace }}"}
    annotations: {summary: "{{ .name }} on {{ .cluster }}: {{ .message }}"}
  - name: KustomizationFailingLong
    match: {kind: Kustomization, status: unhealthy}
    for: 1h
  - name: PodinfoEverywhere
    match: {kind: HelmRelease, status: unhealthy, name: podinfo}
    minClusters: 2
    annotations: {summary: "{{ .name }} fails on {{ .clusters }} clusters"}
"""


@pytest.fixture
def rb(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def settings(redis_url: str, *urls: str) -> Settings:
    return Settings(redis_url=redis_url, alertmanager_url=urls, alert_interval_s=30)


def by_name(am: Alertmanager) -> dict[str, dict]:
    return {a["labels"]["alertname"] + "/" + a["labels"]["name"]: a for a in am.alerts()}


def test_firing_alerts_arrive_and_resolve(
    rb: redis.Redis, redis_url: str, tmp_path: Path, alertmanager: Alertmanager
) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES), "http://fleetscope.example")
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "unhealthy", "boom", ago_s=60))
    put(rb, "c2", row("c2", "apps", "HelmRelease", "podinfo", "unhealthy", ago_s=60))
    put(rb, "c3", row("c3", "apps", "HelmRelease", "podinfo", "unhealthy", ago_s=60))
    h.run()
    s = settings(redis_url, alertmanager.url)
    got = deliver.deliver(rb, s)
    assert got.failed == {} and got.sent == 2
    alerts = by_name(alertmanager)
    assert sorted(alerts) == ["KustomizationFailing/apps", "PodinfoEverywhere/podinfo"]
    ks = alerts["KustomizationFailing/apps"]  # not KustomizationFailingLong: its `for` is 1h
    assert ks["labels"] == {
        "alertname": "KustomizationFailing",
        "severity": "critical",
        "cluster": "c1",
        "namespace": "team-a",
        "kind": "Kustomization",
        "name": "apps",
        "team": "team-a",
    }
    assert ks["annotations"] == {"summary": "apps on c1: boom"}
    assert ks["generatorURL"] == (
        "http://fleetscope.example/?cluster=c1&namespace=team-a&kind=Kustomization&name=apps"
    )
    assert ks["status"]["state"] == "active"
    ends = ks["endsAt"]
    assert ends > iso(time.time() + 90)  # four intervals ahead, as Prometheus does
    pod = alerts["PodinfoEverywhere/podinfo"]
    assert "cluster" not in pod["labels"]
    assert pod["annotations"] == {"summary": "podinfo fails on 2 clusters"}

    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "healthy"))
    h.run()
    assert deliver.deliver(rb, s).resolved_done == 1
    assert sorted(by_name(alertmanager)) == ["PodinfoEverywhere/podinfo"]
    assert deliver.pending(rb, s, time.time())[1] == []  # the resolved one was sent once


def test_alerts_come_back_after_alertmanager_restarts(
    rb: redis.Redis, redis_url: str, tmp_path: Path, alertmanager: Alertmanager
) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "unhealthy", ago_s=60))
    h.run()
    s = settings(redis_url, alertmanager.url)
    deliver.deliver(rb, s)
    assert len(alertmanager.alerts()) == 1
    alertmanager.restart()
    assert alertmanager.alerts() == []
    h.run()  # nothing changed in the index: the firing set is re-sent from Redis
    deliver.deliver(rb, s)
    assert [a["labels"]["name"] for a in alertmanager.alerts()] == ["apps"]


def test_a_down_alertmanager_is_reported_and_the_others_still_get_alerts(
    rb: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    alertmanager: Alertmanager,
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "unhealthy", ago_s=60))
    h.run()
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "healthy"))
    h.run()
    down = f"http://user:SECRET-pw@127.0.0.1:{free_port()}"
    s = settings(redis_url, down, alertmanager.url)
    with caplog.at_level(logging.WARNING):
        got = deliver.deliver(rb, s)
    assert list(got.failed) == [0]  # by position: a URL may hold credentials
    assert "SECRET-pw" not in caplog.text and "127.0.0.1" in caplog.text
    # The resolved alert waits until every Alertmanager took it.
    assert len(deliver.pending(rb, s, time.time())[1]) == 1
    assert deliver.deliver(rb, settings(redis_url, alertmanager.url)).resolved_done == 1


def test_bearer_token_comes_from_its_file(
    rb: redis.Redis, redis_url: str, tmp_path: Path, alertmanager: Alertmanager
) -> None:
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    s = Settings(
        redis_url=redis_url,
        alertmanager_url=(alertmanager.url,),
        alertmanager_bearer_token_file=str(token),
    )
    session = deliver._session(s)
    assert session.headers["Authorization"] == "Bearer tok-123"
    assert session.trust_env is False
