"""The soak's report: answers counted by kind and status, the error rate per 10 s, the failed
invariants named, and the PNG written (a real file matplotlib drew, faults marked)."""

from __future__ import annotations

from pathlib import Path

from bench import soak_report

ANSWERS = [
    (1.0, "list", 200, "", 1.1),
    (2.0, "list", 503, "x", 2.1),
    (12.0, "facets", 200, "", 12.1),
]


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
    freshness = [(1.0, 0.2, "c", 0.1), (2.0, None, "c", None), (3.0, 0.4, "c")]
    faults = [{"kind": "leaf-down", "at_s": 2.0}]
    path = soak_report.plot(
        tmp_path / "soak.png", freshness, soak_report.error_rate(ANSWERS), faults
    )
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000


def test_the_docs_table_column_comes_from_soak_json() -> None:
    ok = {"value": 0, "ok": True}
    result = {
        "requests": 3,
        "requests_by_kind": soak_report.requests_by_kind(ANSWERS),
        "faults_injected": 7,
        "faults_survived": 7,
        "rows_lost": 0,
        "errors": {"503 json during redis failover": 1},
        "freshness": {"p50_s": 0.1, "p99_s": 0.5, "p99_all_s": 3.0, "n": 100},
        "revocations": [{"revoked_s": 0.3}, {"revoked_s": None}],
        "invariants": {
            "revocation_violations": {"value": 1, "ok": False},
            "walk_rows_twice": ok,
            "walks_differ_from_oracle": ok,
        },
        "walks": [{}, {}],
        "oracle_walks": {"a": {}, "b": {}},
        "history": {"duplicates": 0, "entries": 40},
        "rss": {
            "beat": {"slope_pct_per_10min": 0.1, "slope_all_pct_per_10min": 1.2, "judged": True},
            "worker-0-child-1": {"slope_pct_per_10min": 2.5, "judged": False, "span_s": 240},
        },
    }
    table = dict(soak_report.cells(result))
    assert table["requests served (by kind)"] == "3: facets 1, list 2"
    assert table["faults injected / survived"] == "7 / 7"
    assert table["freshness p50 / p99 (p99 with failovers)"] == "0.1 / 0.5 s (3.0 s), n=100"
    assert "freshness end to end p50 / p99; the leaf's own delay p50 / p99" not in table  # old
    result["freshness"] |= {
        "end_to_end_p50_s": 0.3,
        "end_to_end_p99_s": 4.0,
        "leaf_delivered_p50_s": 0.2,
        "leaf_delivered_p99_s": 3.5,
        "unstamped": 2,
    }
    table = dict(soak_report.cells(result))
    cell = "0.3 / 4.0 s; 0.2 / 3.5 s (2 unstamped)"
    assert table["freshness end to end p50 / p99; the leaf's own delay p50 / p99"] == cell
    assert table["revocations (max, violations)"] == "1: max 0.3 s, 1"
    assert table["walks, rows twice; oracle walks differing"] == "2, 0; 0 of 2 users"
    assert table["failed invariants"] == "revocation_violations"
    cell = "beat 0.1 (1.2), worker-0-child-1 2.5 (not judged: 4.0 min)"  # floor (every sample)
    assert table["RSS slope per process (% per 10 min)"] == cell
