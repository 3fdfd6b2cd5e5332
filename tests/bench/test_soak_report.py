"""The soak's report: answers counted by kind and status, the error rate per 10 s, the failed
invariants named, and the PNG written (a real file matplotlib drew, faults marked)."""

from __future__ import annotations

from pathlib import Path

from bench import soak_report

ANSWERS = [(1.0, "list", 200, ""), (2.0, "list", 503, "x"), (12.0, "facets", 200, "")]


def test_requests_by_kind_and_status() -> None:
    assert soak_report.requests_by_kind(ANSWERS) == {
        "facets": {"200": 1},
        "list": {"200": 1, "503": 1},
    }


def test_error_rate_per_bucket() -> None:
    assert soak_report.error_rate(ANSWERS) == [(0.0, 0.5), (10.0, 0.0)]


def test_verdicts_name_the_failed_invariants() -> None:
    invariants = {"a": {"value": 0, "ok": True}, "b": {"value": 3, "ok": False}}
    assert soak_report.verdicts(invariants) == ["b"]


def test_the_plot_is_a_png(tmp_path: Path) -> None:
    freshness = [(1.0, 0.2, "c"), (2.0, None, "c"), (3.0, 0.4, "c")]
    faults = [{"kind": "leaf-down", "at_s": 2.0}]
    path = soak_report.plot(
        tmp_path / "soak.png", freshness, soak_report.error_rate(ANSWERS), faults
    )
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000
