"""Fault injection per cluster, switched at run time: latency, 500 and 429 errors, down
(connection refused), continue-token expiry, stalled watches. Other clusters stay healthy."""

from __future__ import annotations

import json

import pytest
import requests

from kubesim.server import KubeSim

NS = "/api/v1/namespaces"


def test_error_rate_500_and_recovery(kubesim: KubeSim, http: requests.Session) -> None:
    kubesim.set_fault("cluster-000", error_rate=1.0)
    resp = http.get(kubesim.url("cluster-000") + NS)
    assert resp.status_code == 500 and resp.json()["reason"] == "InternalError"
    assert http.get(kubesim.url("cluster-001") + NS).status_code == 200
    kubesim.set_fault("cluster-000")
    assert http.get(kubesim.url("cluster-000") + NS).status_code == 200


def test_429_with_retry_after(kubesim: KubeSim, http: requests.Session) -> None:
    kubesim.set_fault("cluster-000", error_rate=1.0, status=429, retry_after_s=7)
    resp = http.get(kubesim.url("cluster-000") + NS)
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "7"
    assert resp.json()["details"]["retryAfterSeconds"] == 7


def test_partial_error_rate_fails_some_requests(kubesim: KubeSim, http: requests.Session) -> None:
    kubesim.set_fault("cluster-000", error_rate=0.5)
    codes = [http.get(kubesim.url("cluster-000") + NS).status_code for _ in range(40)]
    assert 0 < codes.count(500) < 40 and codes.count(200) == 40 - codes.count(500)


def test_down_is_connection_refused_then_back(kubesim: KubeSim, http: requests.Session) -> None:
    port = kubesim.port("cluster-001")
    kubesim.set_fault("cluster-001", down=True)
    with pytest.raises(requests.ConnectionError):
        http.get(kubesim.url("cluster-001") + NS, timeout=5)
    assert http.get(kubesim.url("cluster-000") + NS).status_code == 200
    kubesim.set_fault("cluster-001")
    assert kubesim.port("cluster-001") == port
    assert http.get(kubesim.url("cluster-001") + NS).status_code == 200


def test_latency_makes_a_short_client_timeout_expire(
    kubesim: KubeSim, http: requests.Session
) -> None:
    kubesim.set_fault("cluster-000", latency_s=2.0)
    with pytest.raises(requests.ReadTimeout):
        http.get(kubesim.url("cluster-000") + NS, timeout=0.3)
    assert http.get(kubesim.url("cluster-001") + NS, timeout=5).status_code == 200


def test_expire_continue(kubesim: KubeSim, http: requests.Session) -> None:
    first = http.get(kubesim.url("cluster-000") + NS, params={"limit": 1}).json()
    kubesim.set_fault("cluster-000", expire_continue=True)
    params = {"limit": 1, "continue": first["metadata"]["continue"]}
    resp = http.get(kubesim.url("cluster-000") + NS, params=params)
    assert resp.status_code == 410 and resp.json()["reason"] == "Expired"
    assert http.get(kubesim.url("cluster-000") + NS, params={"limit": 1}).status_code == 200


def test_stalled_watch_is_open_but_silent(kubesim: KubeSim, http: requests.Session) -> None:
    path = "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations"
    rv = str(kubesim.resource_version("cluster-000"))
    kubesim.set_fault("cluster-000", stall_watch=True)
    kubesim.set_ready("cluster-000", "Kustomization", "app-0001", "apps", False)
    params = {
        "watch": "1",
        "resourceVersion": rv,
        "timeoutSeconds": "1",
        "allowWatchBookmarks": "1",
    }
    with http.get(kubesim.url("cluster-000") + path, params=params, stream=True) as resp:
        assert resp.status_code == 200
        stalled = [line for line in resp.iter_lines() if line]
    kubesim.set_fault("cluster-000")
    with http.get(kubesim.url("cluster-000") + path, params=params, stream=True) as resp:
        events = [json.loads(line) for line in resp.iter_lines() if line]
    assert stalled == [] and events[0]["type"] == "MODIFIED"


def test_request_log_records_faulted_requests(kubesim: KubeSim, http: requests.Session) -> None:
    kubesim.clear_request_log()
    kubesim.set_fault("cluster-000", error_rate=1.0)
    http.get(kubesim.url("cluster-000") + NS, params={"limit": "5"})
    (record,) = kubesim.request_log("cluster-000")
    assert (record.method, record.path, record.query, record.status) == (
        "GET",
        NS,
        {"limit": "5"},
        500,
    )
