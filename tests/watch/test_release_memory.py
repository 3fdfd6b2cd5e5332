"""A replica gives back the memory of the watches it drops: one full collection and heap trim
after the last of a batch of retirements (collector.watch.replica.release_memory), not one per
cluster (each walks every live object of the replica)."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import pytest

from collector.watch import replica as replica_mod
from collector.watch.replica import RETIRE_WORKERS, WatchReplica


class FakeClient:
    def close(self) -> None:
        pass


class SlowWatch:
    """A watch whose stop waits for `go` (as a real stop joins its threads)."""

    def __init__(self, go: threading.Event) -> None:
        self.go, self.client = go, FakeClient()

    def stop(self) -> None:
        assert self.go.wait(10)


def bare_replica() -> WatchReplica:
    r: Any = WatchReplica.__new__(WatchReplica)  # only what `_retire` uses
    r._retirer = concurrent.futures.ThreadPoolExecutor(RETIRE_WORKERS)
    r._retiring = []
    r._retire_lock = threading.Lock()
    r._unretired = 0
    return r


def test_memory_is_released_once_after_a_batch_of_retirements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(replica_mod, "release_memory", lambda: calls.append(1))
    rep = bare_replica()
    go = threading.Event()
    for _ in range(RETIRE_WORKERS + 3):  # more than the retiring threads: some wait in line
        rep._retire(SlowWatch(go))  # type: ignore[arg-type]
    assert calls == []
    go.set()
    concurrent.futures.wait(rep._retiring, timeout=10)
    rep._retirer.shutdown()
    assert calls == [1]
    assert rep._unretired == 0
    rep._retirer = concurrent.futures.ThreadPoolExecutor(1)
    rep._retire(SlowWatch(go))  # type: ignore[arg-type]  # a later drop: released again
    concurrent.futures.wait(rep._retiring, timeout=10)
    rep._retirer.shutdown()
    assert calls == [1, 1]


def test_a_failing_stop_still_counts_its_retirement(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(replica_mod, "release_memory", lambda: calls.append(1))
    rep = bare_replica()

    class Broken(SlowWatch):
        def stop(self) -> None:
            raise RuntimeError("boom")

    rep._retire(Broken(threading.Event()))  # type: ignore[arg-type]
    concurrent.futures.wait(rep._retiring, timeout=10)
    rep._retirer.shutdown()
    assert rep._unretired == 0 and calls == [1]
