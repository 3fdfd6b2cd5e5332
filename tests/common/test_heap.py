"""common.heap: the arena cap leaves an operator's MALLOC_ARENA_MAX alone and applies on glibc;
the trimmer trims until stopped; a query worker gets both when gunicorn starts it."""

from __future__ import annotations

import gc
import threading

import pytest

from common import heap
from tests.support.waiting import wait_for

GLIBC = heap._libc() is not None


def test_an_operators_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert heap.limit_arenas(2) is False


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_the_arena_cap_applies_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert heap.limit_arenas(2) is True


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc_trim")
def test_the_trimmer_trims_until_stopped() -> None:
    t = heap.Trimmer(every_s=0.01)
    t.start()
    wait_for(lambda: t.trims >= 2, 10, "two trims")
    t.stop()
    t.join(5)
    assert not t.is_alive()


def test_a_query_worker_caps_and_trims_its_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    from query import gunicorn_conf

    calls: list[int] = []
    monkeypatch.setattr(heap, "limit_arenas", lambda n: calls.append(n) or True)
    before = {t.name for t in threading.enumerate() if t.name == "heap-trim"}
    try:
        gunicorn_conf.post_worker_init(object())
    finally:
        gc.unfreeze()
    assert calls == [gunicorn_conf.QUERY_ARENAS]
    trimmers = [t for t in threading.enumerate() if t.name == "heap-trim"]
    assert len(trimmers) == len(before) + 1
    sweepers = [t for t in threading.enumerate() if t.name == "memo-sweep"]
    assert sweepers and all(isinstance(t, heap.Trimmer) for t in sweepers)
    assert sweepers[-1].every_s == gunicorn_conf._settings.query_memo_idle_s / 2  # type: ignore[attr-defined]
    for t in trimmers + sweepers:
        if isinstance(t, heap.Trimmer):
            t.stop()


def test_the_trimmer_runs_its_hook_first_and_outlives_its_failure() -> None:
    calls: list[int] = []

    def hook() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first round fails")

    t = heap.Trimmer(every_s=0.01, before=hook, name="test-hook")
    t.start()
    wait_for(lambda: len(calls) >= 3, 10, "three rounds")
    t.stop()
    t.join(5)
    assert not t.is_alive() and t.trims >= 2
