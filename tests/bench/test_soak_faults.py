"""The soak's fault schedule: every kind once in a seeded order at 30 minutes, gaps of 2-3
minutes and leaf faults held 2 minutes, all of it scaled to a shorter run, nothing in the
settle time at the end, and the same seed giving the same schedule."""

from __future__ import annotations

from itertools import pairwise

from bench.soak_faults import HELD, KINDS, schedule


def test_a_30_minute_run_has_every_kind_2_to_3_minutes_apart() -> None:
    faults = schedule(1800, seed=1)
    assert sorted({f.kind for f in faults}) == sorted(KINDS)
    assert faults[0].at_s == 120
    for a, b in pairwise(faults):
        assert 120 <= b.at_s - a.at_s <= 180
    assert all(f.hold_s == (120 if f.kind in HELD else 0) for f in faults)
    assert all(f.at_s + f.hold_s <= 1800 * 0.75 for f in faults)


def test_a_shorter_run_scales_every_time() -> None:
    long, short = schedule(1800, seed=3), schedule(420, seed=3)
    k = 420 / 1800
    assert [f.kind for f in short[: len(KINDS)]] == [f.kind for f in long[: len(KINDS)]]
    for a, b in pairwise(short):
        assert 120 * k - 0.2 <= b.at_s - a.at_s <= 180 * k + 0.2
    assert all(f.hold_s == round(120 * k, 1) for f in short if f.kind in HELD)
    assert all(f.at_s + f.hold_s <= 420 * 0.75 for f in short)
    assert len(short) >= len(KINDS)


def test_the_order_is_seeded() -> None:
    assert schedule(900, seed=5) == schedule(900, seed=5)
    orders = {tuple(f.kind for f in schedule(1800, seed=s)) for s in range(6)}
    assert len(orders) > 1


def test_a_run_too_short_for_any_fault_has_none() -> None:
    assert schedule(0, seed=1) == []
