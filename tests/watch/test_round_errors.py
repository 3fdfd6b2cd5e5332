"""A replica's rounds go on through what they did not expect: a cluster whose watch cannot be
built (its TLS material unreadable: an `ssl.SSLError`, as the kubernetes loader's half-written
temp file gave in CI) is released and taken at a later round while the others are watched, and
a round that fails with a bug is logged and followed by the next (the leases would otherwise
lapse while the process lives on)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from collector.watch import replica as replica_mod
from common.index import keys
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.waiting import wait_for
from tests.watch.harness import Running


def test_a_watch_that_cannot_be_built_is_taken_at_a_later_round(
    sim: KubeSim,
    rb: redis.Redis,
    wsettings: Settings,
    start_replica: Callable[..., Running],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = sim.clusters[0]
    failed = threading.Event()
    real = replica_mod.ClusterWatch

    def built(r: Any, client: Any, *args: Any, **kwargs: Any) -> Any:
        if client.config.name == bad and not failed.is_set():
            failed.set()
            raise ssl.SSLError(185090184, "[X509: NO_CERTIFICATE_OR_CRL_FOUND] no certificate")
        return real(r, client, *args, **kwargs)

    monkeypatch.setattr(replica_mod, "ClusterWatch", built)
    run = start_replica("a", wsettings)
    wait_for(failed.is_set, what="the first build of a watch failed")
    for c in sim.clusters:
        wait_for(lambda c=c: run.healthy(c), what=f"{c} watched")
    assert run.thread.is_alive()
    assert rb.get(keys.lease(bad)) is not None  # taken again, by this replica


def test_a_round_failing_with_a_bug_is_followed_by_the_next(
    sim: KubeSim,
    rb: redis.Redis,
    wsettings: Settings,
    start_replica: Callable[..., Running],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds: list[int] = []
    real = replica_mod.WatchReplica._heartbeats

    def heartbeats(self: replica_mod.WatchReplica) -> None:
        rounds.append(1)
        if len(rounds) == 1:
            raise RuntimeError("a bug in the first round")
        real(self)

    monkeypatch.setattr(replica_mod.WatchReplica, "_heartbeats", heartbeats)
    run = start_replica("a", wsettings)
    for c in sim.clusters:
        wait_for(lambda c=c: run.healthy(c), what=f"{c} watched after a failed round")
    assert len(rounds) >= 2 and run.thread.is_alive()
