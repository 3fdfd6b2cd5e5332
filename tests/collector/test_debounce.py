"""The watcher's debounced recomputation with a leading edge (the RBAC compiler): a lone change
runs at once, a burst during a run folds into one more run."""

from __future__ import annotations

import threading

from collector.debounce import run_debounced
from tests.support.waiting import wait_for


def start(
    debounce_s: float, work: object, leading: bool
) -> tuple[threading.Event, threading.Event, threading.Thread]:
    stop, dirty = threading.Event(), threading.Event()
    t = threading.Thread(
        target=run_debounced,
        args=(stop, dirty, debounce_s, lambda: True, work, (OSError,), "work", "c"),
        kwargs={"leading": leading},
        daemon=True,
    )
    t.start()
    return stop, dirty, t


def test_leading_runs_a_lone_change_without_waiting_the_window() -> None:
    runs: list[int] = []
    stop, dirty, t = start(600.0, lambda: runs.append(1), leading=True)
    dirty.set()
    wait_for(lambda: runs, 30, "the run (a trailing debounce would wait 600 s)")
    stop.set()
    t.join(10)
    assert runs == [1]


def test_leading_folds_a_burst_into_one_more_run() -> None:
    runs: list[int] = []
    release = threading.Event()

    def work() -> None:
        runs.append(1)
        if len(runs) == 1:
            release.wait(30)

    stop, dirty, t = start(0.2, work, leading=True)
    dirty.set()
    wait_for(lambda: runs, 30, "the first run")
    for _ in range(5):  # changes while the first run works
        dirty.set()
    release.set()
    wait_for(lambda: len(runs) == 2, 30, "one more run for the burst")
    stop.set()
    t.join(10)
    assert len(runs) == 2
