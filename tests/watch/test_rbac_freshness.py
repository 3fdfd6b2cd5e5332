"""A watched cluster's grants count as current (the RBAC heartbeat: `rbac_synced_at`) while its
four RBAC resources are listed and watching and its grants were stored once, whatever its row
kinds' streams do: a silent row-kind stream stops the objects' heartbeat only. A cluster whose
RBAC goes stale is hidden from every user (`rbac_max_age_s`), so an unrelated stream must not
take its RBAC heartbeat with it (in the thirteenth L soak one cluster was hidden so for
minutes)."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from collector.watch.cluster import ClusterWatch
from collector.watch.rbac import RESOURCES, RbacState
from common.kinds.registry import builtin_registry

REG = builtin_registry()

IDLE_S = 30.0
NOW = 1000.0


def bare_watch(live: dict[str, float], stored: int = 1) -> Any:
    """A ClusterWatch with only what `healthy` and `rbac_healthy` read (this module's seam)."""
    w: Any = ClusterWatch.__new__(ClusterWatch)
    w.gate = threading.Event()
    w.gate.set()
    w._lock = threading.Condition()
    w._live = dict(live)
    w._expected = {"kustomize.toolkit.fluxcd.io/Kustomization", *RESOURCES}
    w._build_kinds = {"kustomize.toolkit.fluxcd.io/Kustomization"}  # discovery done
    w.settings = SimpleNamespace(watch_idle_timeout_s=IDLE_S)
    w.mesh, w.mesh_written = None, False
    w.rbac = SimpleNamespace(stored=stored)
    return w


def test_a_silent_row_kind_stream_leaves_the_rbac_heartbeat_alone() -> None:
    fresh = dict.fromkeys(RESOURCES, NOW - 1)
    w = bare_watch({**fresh, "kustomize.toolkit.fluxcd.io/Kustomization": NOW - 2 * IDLE_S})
    assert not w.healthy(NOW)  # the objects' heartbeat stops
    assert w.rbac_healthy(NOW)  # the grants' goes on


def test_a_silent_rbac_stream_stops_the_rbac_heartbeat() -> None:
    live = {**dict.fromkeys(RESOURCES, NOW - 1), "kustomize.toolkit.fluxcd.io/Kustomization": NOW}
    assert bare_watch(live).rbac_healthy(NOW)
    for res in RESOURCES:
        silent = bare_watch({**live, res: NOW - 2 * IDLE_S})
        assert not silent.rbac_healthy(NOW), res
        missing = bare_watch({k: v for k, v in live.items() if k != res})
        assert not missing.rbac_healthy(NOW), res


def test_no_rbac_heartbeat_before_the_grants_were_stored_or_while_the_lease_is_not_ours() -> None:
    live = {**dict.fromkeys(RESOURCES, NOW - 1), "kustomize.toolkit.fluxcd.io/Kustomization": NOW}
    assert not bare_watch(live, stored=0).rbac_healthy(NOW)
    gated = bare_watch(live)
    gated.gate.clear()  # a take-over before the other replica let go
    assert not gated.rbac_healthy(NOW)


def test_only_a_stored_compile_counts(redis_url: str) -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = RbacState(
        redis.Redis(port=port, socket_connect_timeout=1), "c1", REG, 0.0, lambda: True
    )
    for plural in RESOURCES:
        state.replace(plural, [])
    with pytest.raises(redis.ConnectionError):
        state.compile_and_store()  # Redis unreachable (failing over)
    assert state.compiles == 1 and state.stored == 0
    state.r = redis.Redis.from_url(redis_url)
    state.compile_and_store()
    assert state.stored == 1
    state.r.close()
