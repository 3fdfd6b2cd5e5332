"""The soak's fault schedule: every kind once in a seeded order at 30 minutes, gaps of 2-3
minutes and leaf faults held 2 minutes, all of it scaled to a shorter run, nothing in the
settle time at the end, and the same seed giving the same schedule; when a fault counts as
recovered (a re-registered leaf: once collected again); the names its samples give a Celery
worker's children."""

from __future__ import annotations

from itertools import pairwise
from types import SimpleNamespace

from bench.soak_faults import HELD, KINDS, Injected, schedule, synced_since
from common.index.syncstatus import ClusterSync


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


def test_a_re_registered_leaf_is_back_once_its_objects_and_rbac_synced_after_it() -> None:
    since = 1000.0
    assert not synced_since(None, since)  # never synced (the registry dropped its status)
    assert not synced_since(
        ClusterSync("c", "ok", last_success=999.0, rbac_synced_at=1001.0), since
    )
    assert not synced_since(
        ClusterSync("c", "ok", last_success=1001.0, rbac_synced_at=999.0), since
    )
    assert not synced_since(
        ClusterSync("c", "error", last_success=1001.0, rbac_synced_at=1001.0), since
    )
    assert synced_since(ClusterSync("c", "ok", last_success=1000.0, rbac_synced_at=1002.0), since)


class _Stack:
    """Whole, with `built` of its three clusters built by the watchers; c2 under a leaf fault."""

    def __init__(self, built: int = 2) -> None:
        self.sim = SimpleNamespace(clusters=["c1", "c2", "c3"])
        self.leaf_faults = {"c2": "leaf-down"}
        self.built = built

    def whole(self) -> bool:
        return True

    def watched(self) -> int:
        return self.built

    def built_by(self) -> dict[str, int]:
        return {"watcher-0": 0, "watcher-1": self.built}


def test_recovery_waits_for_a_re_registered_leaf_to_be_collected_again(monkeypatch) -> None:
    from bench import soak

    again = {"value": False}
    monkeypatch.setattr(soak, "collected_again", lambda stack, cluster, detail: again["value"])
    killed = Injected("watcher", 10.0, "watcher-0", ended_s=10.0)
    removed = Injected("leaf-removed", 20.0, "c1", ended_s=140.0, detail={"ended_at": 5.0})
    held = Injected("leaf-down", 30.0, "c2")  # not ended yet
    rec = SimpleNamespace(now_s=lambda: 150.0)

    def ready() -> dict[str, str]:
        return {"state": "ready"}

    assert soak.recover(_Stack(), [killed, removed, held], rec, ready) == 2
    assert killed.survived and killed.recovered_s == 150.0
    assert removed.recovered_s is None and not removed.survived
    again["value"] = True
    assert soak.recover(_Stack(), [killed, removed, held], rec, ready) == 1
    assert removed.survived and removed.recovered_s == 150.0


def test_recovery_waits_for_the_watchers_to_build_the_fleet_again() -> None:
    from bench import soak

    killed = Injected("watcher", 10.0, "watcher-0", ended_s=10.0)
    rec = SimpleNamespace(now_s=lambda: 40.0)

    def ready() -> dict[str, str]:
        return {"state": "ready"}

    # the processes are whole at once (the replica restarted); its clusters are not built yet
    assert soak.recover(_Stack(built=1), [killed], rec, ready) == 1
    assert killed.recovered_s is None
    # every cluster but the one under a leaf fault built again
    assert soak.recover(_Stack(built=2), [killed], rec, ready) == 0
    assert killed.survived and killed.recovered_s == 40.0
    # which replica built them (here the survivor, not the killed one's successor) is kept
    assert killed.detail["built_by"] == {"watcher-0": 0, "watcher-1": 2}


def test_a_celery_child_keeps_its_name_when_a_sibling_before_it_goes() -> None:
    """Children were named by their place in pid order: when the first was killed, the second
    took its name and its RSS series was split between two names (each too short to judge).
    A child keeps its slot for its life; a new one takes the slot its predecessor left."""
    from bench.soak_stack import slotted

    slots: dict[int, int] = {}
    assert slotted(slots, [100, 101]) == {100: 0, 101: 1}
    assert slotted(slots, [101, 205]) == {101: 1, 205: 0}  # 100 killed, 205 forked in its place
    assert slotted(slots, [101, 205, 301]) == {101: 1, 205: 0, 301: 2}
    assert slotted(slots, [205, 301, 410]) == {205: 0, 301: 2, 410: 1}
