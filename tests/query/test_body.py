"""The list response body built from cached per-row JSON: the same JSON as decoding the rows,
on cache hits and misses, with the cache bounded."""

from __future__ import annotations

import json

import pytest

from common.index import rows
from query import body


def member(name: str, message: str = "ok") -> bytes:
    row = rows.Row(
        cluster="c1",
        namespace="team-a",
        kind="Kustomization",
        apiVersion="kustomize.toolkit.fluxcd.io/v1",
        name=name,
        status="unhealthy",
        suspended=False,
        reason="Failed",
        message=message,
        warnings=0,
        lastTransitionTime="2026-11-20T10:00:00Z",
        revision="main@sha1:0123456789abcdef",
        uiUrl=None,
    )
    return rows.encode(row).encode()


def test_rows_render_as_their_decoded_json_on_hits_and_misses() -> None:
    page = [("c1", member("a")), ("c2", member("b", 'quote " and ünï')), ("c1", member("c"))]
    expected = [rows.decode(c, m) for c, m in page]
    body.row_texts(page[1:2])  # one row cached, two not
    for _ in range(2):
        assert [json.loads(t) for t in body.row_texts(page)] == expected
    resp = body.page_response(page, {"continue": None, "freshness": {"degraded": False}})
    assert resp.mimetype == "application/json"
    assert json.loads(resp.get_data()) == {
        "items": expected,
        "continue": None,
        "freshness": {"degraded": False},
    }


def test_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body, "ROWS_CACHED", 4)
    monkeypatch.setattr(body, "_rows", {})
    for i in range(10):
        page = [("c1", member(f"r{i}-{j}")) for j in range(3)]
        assert [json.loads(t)["name"] for t in body.row_texts(page)] == [
            f"r{i}-{j}" for j in range(3)
        ]
        assert len(body._rows) <= 4
