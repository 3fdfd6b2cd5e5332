"""common.heap: the arena cap leaves an operator's MALLOC_ARENA_MAX alone and applies on glibc;
the trimmer trims until stopped; a query worker gets both when gunicorn starts it, and so does
the stream process (query.housekeeping), with the memos' idle sweep."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

import pytest

from common import heap
from common.index.read import memo
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
    from query import gunicorn_conf, housekeeping

    calls: list[int] = []
    monkeypatch.setattr(heap, "limit_arenas", lambda n: calls.append(n) or True)
    before = {t.name for t in threading.enumerate() if t.name == "heap-trim"}
    try:
        gunicorn_conf.post_worker_init(object())
    finally:
        gc.unfreeze()
    assert calls == [housekeeping.ARENAS]
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


class _Started(Exception):
    """Raised by a stand-in for the housekeeping: where it is called from is what is tested."""


def test_the_stream_process_runs_the_workers_housekeeping(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the stream process resolves callers' access through the same memos as a worker (new
    # entries at every RBAC change): without the idle sweep and the trims its RSS climbed
    from common.settings import Settings
    from query import housekeeping, stream_server

    started: list[Settings] = []

    def start(settings: Settings) -> list[heap.Trimmer]:
        started.append(settings)
        raise _Started

    monkeypatch.setattr(housekeeping, "start", start)
    with pytest.raises(_Started):
        stream_server.main(["--socket", str(tmp_path / "s.sock"), "--master", str(os.getpid())])
    assert len(started) == 1 and isinstance(started[0], Settings)


def test_the_housekeeping_sweeps_the_memos_at_half_their_idle_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from common.settings import Settings
    from query import housekeeping

    monkeypatch.setattr(heap, "limit_arenas", lambda n: True)
    threads = housekeeping.start(Settings(query_memo_idle_s=90))
    try:
        assert [t.name for t in threads] == ["heap-trim", "memo-sweep"]
        assert threads[1].every_s == 45 and threads[1].before is housekeeping.sweep
        assert all(t.is_alive() for t in threads)
    finally:
        for t in threads:
            t.stop()
    off = housekeeping.start(Settings(query_memo_idle_s=0))
    try:
        assert [t.name for t in off] == ["heap-trim"]
    finally:
        for t in off:
            t.stop()


def test_each_sweep_sets_the_gauge_of_what_the_memos_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import REGISTRY

    from query import housekeeping

    monkeypatch.setattr(memo, "_budget", [2**20])  # sizes are estimated under a budget only
    kept = memo.Memo(10, "facets.raw")
    kept.put("cluster-1", {f"ns-{i}": "x" * 40 for i in range(200)})
    housekeeping.sweep()  # a new round: the entry was used in the last one, and stays
    held = REGISTRY.get_sample_value("fleetscope_query_memo_bytes")
    assert held == memo.held_bytes() and held >= kept.nbytes > 10_000
    housekeeping.sweep()  # unused for a whole round: dropped
    assert len(kept) == 0
    assert REGISTRY.get_sample_value("fleetscope_query_memo_bytes") == memo.held_bytes() < held


def test_a_watcher_replica_caps_its_arenas_before_its_first_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # its threads spread the build's and the re-opened watches' free space over every arena
    # otherwise, and its RSS rose under churn (docs/operations.md, "Memory of a watcher")
    import argparse

    from collector.watch import cli

    threads_then: list[int] = []

    def cap(n: int) -> bool:
        threads_then.append(threading.active_count())
        raise _Started

    def late(*_a: object) -> None:
        raise AssertionError("the replica configured its logging before capping its arenas")

    monkeypatch.setattr(heap, "limit_arenas", cap)
    monkeypatch.setattr(cli.logs, "configure", late)
    before = threading.active_count()
    with pytest.raises(_Started):
        cli.run(argparse.Namespace(name="t", reconcile=False, heartbeat_file=""))
    assert threads_then == [before]
    assert cli.ARENAS == 2
