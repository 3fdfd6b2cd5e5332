"""The list response body built from cached per-row JSON: the same JSON as decoding the rows,
on cache hits and misses, `blockedBy` spliced in per caller, with the cache bounded."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from common.index import edges, rows
from common.rbac.grants import Access
from query import body
from tests.support import rowfactory


def member(name: str, message: str = "ok") -> bytes:
    row = rowfactory.row(
        "c1",
        "team-a",
        "Kustomization",
        name,
        "unhealthy",
        apiVersion="kustomize.toolkit.fluxcd.io/v1",
        reason="Failed",
        message=message,
        lastTransitionTime="2026-11-20T10:00:00Z",
        revision="main@sha1:0123456789abcdef",
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


def test_blockedby_is_spliced_in_only_for_callers_who_may_list_the_node() -> None:
    blocker = edges.encode_blocker("GitRepository", "flux-system", "platform", False)
    blocked = rows.with_blocked(member("b").decode(), blocker).encode()
    page = [("c1", member("a")), ("c1", blocked)]
    expected = [rows.decode(c, m) for c, m in page]
    assert expected[1]["blockedBy"]["name"] == "platform"
    platform = Access.build(frozenset(), {"flux-system": frozenset({"GitRepository"})})
    other = Access.build(frozenset({"Kustomization"}), {})
    for _ in range(2):  # a miss, then hits: the cached text serves both callers
        assert [json.loads(t) for t in body.row_texts(page, {"c1": platform})] == expected
        without = [json.loads(t) for t in body.row_texts(page, {"c1": other})]
        assert "blockedBy" not in without[1]
        assert without[1] == {k: v for k, v in expected[1].items() if k != "blockedBy"}
        assert body.row_texts(page, {"c2": platform}) == body.row_texts(page)  # other cluster
        assert "blockedBy" not in body.row_texts(page)[1]


@pytest.mark.parametrize("hours", [0, 1, 22.5, 23, 24, 24 + 1 / 3600, 25.5, 50])
def test_transitions24h_slides_with_time_as_the_rows_count_it(
    monkeypatch: pytest.MonkeyPatch, hours: float
) -> None:
    """A cached row's `transitions24h` is counted as of each request, equal to
    common.index.rows.transitions_24h at that moment (a transition exactly 24 hours old still
    counts), from times stored in any order."""
    t0 = 1_790_000_000
    times = (t0 - 7200, t0, t0 - 3600, t0 - 86400, t0 - 5400)
    recent = f"{t0 - 9000}," + ",".join(map(str, times)) + ",junk"  # failingSince first
    stored = rows.with_recent(member("flappy").decode(), recent).encode()
    now = t0 + hours * 3600
    # body's own clock only: patching the time module's would reach every thread of the session
    monkeypatch.setattr(body, "time", SimpleNamespace(time=lambda: now))
    body.row_texts([("c1", stored)])  # cached before, asked at `now`: the count still slides
    got = json.loads(body.row_texts([("c1", stored)])[0])["transitions24h"]
    assert got == rows.transitions_24h(recent, now)
    assert got == sum(1 for t in times if t >= now - 86400)
