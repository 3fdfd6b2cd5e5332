"""`fleetscope alerts` against a stand-in API: one table line per alert (a cross-cluster one
says on how many clusters), a refused rules file warned about on stderr, leaf text printed
without control characters, `-o json` the API's document."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fakeapi import FakeApi

BODY = {
    "items": [
        {
            "rule": "KsFailing",
            "severity": "critical",
            "cluster": "c1",
            "namespace": "apps",
            "kind": "Kustomization",
            "name": "web",
            "labels": {},
            "annotations": {"summary": "web is down\x1b[2J\x1b]0;owned\x07"},
            "startsAt": "2020-01-01T00:00:00.000Z",
        },
        {
            "rule": "PodinfoEverywhere",
            "severity": "warning",
            "clusters": ["c1", "c2", "c3"],
            "namespace": "apps",
            "kind": "HelmRelease",
            "name": "podinfo",
            "labels": {},
            "annotations": {},
            "message": "install failed",
            "startsAt": "2020-01-01T00:00:00.000Z",
        },
    ],
    "rules": {"count": 2, "lastEvaluation": None, "error": "rules.yaml: rules[0] (X): for: bad"},
    "freshness": {},
}


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi({"/api/v1/alerts": (200, BODY)})
    yield fake
    fake.close()


def test_alerts_table(api: FakeApi, cli) -> None:
    res = cli("alerts", "--server", api.url, "--as", "me")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].split() == [
        "ALERT",
        "SEVERITY",
        "CLUSTER",
        "NAMESPACE",
        "KIND",
        "NAME",
        "AGE",
        "SUMMARY",
    ]
    assert lines[1].split()[:6] == ["KsFailing", "critical", "c1", "apps", "Kustomization", "web"]
    assert lines[1].endswith("web is down [2J ]0;owned")
    assert "3 clusters" in lines[2] and lines[2].endswith("install failed")
    assert "\x1b" not in res.out and "\x07" not in res.out
    assert "alert rules refused: rules.yaml: rules[0] (X): for: bad" in res.err
    assert api.paths() == ["/api/v1/alerts"]


def test_alerts_json_is_the_api_document(api: FakeApi, cli) -> None:
    res = cli("alerts", "-o", "json", "--server", api.url, "--as", "me")
    assert res.code == 0, res.err
    assert res.json() == BODY
