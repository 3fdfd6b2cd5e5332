"""bench.loadgen.merge: several load runs' results combined as if run back to back."""

from __future__ import annotations

from typing import Any

from bench import loadgen


def run_of(latencies_ms: list[float], seconds: float) -> dict[str, Any]:
    """A run's result as loadgen reports it, from every request's latency."""
    lat = sorted(latencies_ms)
    step = len(lat) / loadgen.QUANTILES
    return {
        "tool": "wrk",
        "requests": len(lat),
        "rps": len(lat) / seconds,
        "p50_ms": lat[len(lat) // 2],
        "p90_ms": lat[int(len(lat) * 0.9)],
        "p99_ms": lat[int(len(lat) * 0.99)],
        "max_ms": lat[-1],
        "errors": 1,
        "quantiles_ms": [lat[int(step * (i + 0.5))] for i in range(loadgen.QUANTILES)],
    }


def test_merge_adds_up_requests_and_weights_latencies_by_requests() -> None:
    fast = run_of([1.0 + i / 10_000 for i in range(20_000)], seconds=2.0)  # 10,000 req/s
    slow = run_of([10.0 + i / 1_000 for i in range(2_000)], seconds=2.0)  # 1,000 req/s
    merged = loadgen.merge([fast, slow])
    assert merged["requests"] == 22_000
    assert merged["rps"] == 5_500.0  # 22,000 requests over the 4 s the two runs took
    assert merged["errors"] == 2
    assert merged["max_ms"] == slow["max_ms"]
    # 20,000 of 22,000 requests took < 3 ms: the median is a fast one, p99 a slow one
    assert 1.0 <= merged["p50_ms"] < 3.0
    assert 2.9 < merged["p90_ms"] < 3.0  # the slow run starts at the 90.9th percentile
    assert abs(merged["p99_ms"] - 11.78) < 0.01  # the slow run's own 89th percentile
    assert len(merged["quantiles_ms"]) == loadgen.QUANTILES


def test_merge_of_one_run_is_that_run() -> None:
    one = run_of([float(i) for i in range(1, 501)], seconds=1.0)
    assert loadgen.merge([one]) == one
