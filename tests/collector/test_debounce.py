"""The watcher's debounced recomputation (collector.debounce.Debounced) on the shared timer:
with a leading edge (the RBAC compiler) a lone change runs at once and a burst during a run folds
into one more run; with a trailing edge a change waits the window."""

from __future__ import annotations

import threading
from collections.abc import Callable

from collector.debounce import Debounced
from tests.support.waiting import wait_for


def debounced(debounce_s: float, work: Callable[[], object], leading: bool) -> Debounced:
    return Debounced(
        debounce_s, lambda: True, work, (OSError,), "work", "c", lambda: False, leading=leading
    )


def test_leading_runs_a_lone_change_without_waiting_the_window() -> None:
    runs: list[int] = []
    d = debounced(600.0, lambda: runs.append(1), leading=True)
    d.mark()
    wait_for(lambda: runs, 30, "the run (a trailing debounce would wait 600 s)")
    assert runs == [1]


def test_trailing_waits_the_window() -> None:
    runs: list[int] = []
    ran = threading.Event()
    d = debounced(600.0, lambda: (runs.append(1), ran.set()), leading=False)
    d.mark()
    assert not ran.wait(0.5)  # a lower bound on a wait that the window makes 600 s
    assert runs == []


def test_leading_folds_a_burst_into_one_more_run() -> None:
    runs: list[int] = []
    release = threading.Event()

    def work() -> None:
        runs.append(1)
        if len(runs) == 1:
            release.wait(30)

    d = debounced(0.2, work, leading=True)
    d.mark()
    wait_for(lambda: runs, 30, "the first run")
    for _ in range(5):  # changes while the first run works
        d.mark()
    release.set()
    wait_for(lambda: len(runs) == 2, 30, "one more run for the burst")
    assert len(runs) == 2
