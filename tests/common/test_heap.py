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
    for t in trimmers:
        if isinstance(t, heap.Trimmer):
            t.stop()
