"""The soak's faults: a fixed, seeded schedule scaled to the run's length (`schedule`), and what
injects each one into the running stack (`inject`).

At 1,800 s a fault comes every 120-180 s after a 120 s warm-up, the leaf faults hold 120 s, and
the last fault ends at least a quarter of the run before its end (the settle time); a shorter
run scales every one of those times by duration / 1800. The seven kinds come in a seeded
shuffled order, repeated while the window lasts.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from common import redis_client

if TYPE_CHECKING:
    from bench.soak_stack import Stack
    from common.index.syncstatus import ClusterSync

KINDS = (
    "worker-child",
    "watcher",
    "query-worker",
    "redis-primary",
    "leaf-down",
    "leaf-slow",
    "leaf-removed",
)
HELD = {"leaf-down", "leaf-slow", "leaf-removed"}
FULL_S = 1800.0
GAP_S = (120.0, 180.0)
WARMUP_S = 120.0
HOLD_S = 120.0
SLOW_LATENCY_S = 6.0
SETTLE_SHARE = 0.25


@dataclass(frozen=True)
class Fault:
    kind: str
    at_s: float
    hold_s: float
    target: int  # which worker, watcher, query process or leaf cluster (an index, taken modulo)


def scale(duration_s: float) -> float:
    return duration_s / FULL_S


def schedule(duration_s: float, seed: int) -> list[Fault]:
    """The faults of a run of `duration_s`, in time order, none ending in the settle time."""
    rng = random.Random(seed)
    k = scale(duration_s)
    end = duration_s * (1 - SETTLE_SHARE)
    order = list(KINDS)
    rng.shuffle(order)
    out: list[Fault] = []
    if k <= 0:
        return out
    t = WARMUP_S * k
    while True:
        kind = order[len(out) % len(order)]
        hold = HOLD_S * k if kind in HELD else 0.0
        if t + hold > end:
            return out
        out.append(Fault(kind, round(t, 1), round(hold, 1), rng.randrange(1 << 16)))
        t += rng.uniform(*GAP_S) * k


@dataclass
class Injected:
    """What happened to one fault: when it started and ended (run seconds), its target, and
    whether the stack came back from it (`survived`, decided by `check_survived`)."""

    kind: str
    at_s: float
    target: str = ""
    ended_s: float | None = None
    recovered_s: float | None = None
    survived: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def inject(stack: Stack, fault: Fault, now_s: Any) -> Injected:
    """Start `fault`; a held one ends `hold_s` later in a timer thread (run seconds: `now_s()`)."""
    rec = Injected(fault.kind, math.floor(now_s() * 100) / 100)  # never after the kill
    if fault.kind == "worker-child":
        rec.target, rec.detail["pid"] = stack.kill_worker_child(fault.target)
    elif fault.kind == "watcher":
        rec.target, rec.detail["pid"] = stack.kill_watcher(fault.target)
    elif fault.kind == "query-worker":
        rec.target, rec.detail["pid"] = stack.kill_query_worker(fault.target)
    elif fault.kind == "redis-primary":
        rec.target = stack.kill_primary()
    else:
        cluster = stack.sim.clusters[fault.target % len(stack.sim.clusters)]
        rec.target = cluster
        start_leaf_fault(stack, fault.kind, cluster)

        def end() -> None:
            end_leaf_fault(stack, fault.kind, cluster)
            rec.detail["ended_at"] = time.time()  # wall clock: sync statuses' time
            rec.ended_s = round(now_s(), 1)

        timer = threading.Timer(fault.hold_s, end)
        timer.daemon = True
        timer.start()
        stack.leaf_faults[cluster] = fault.kind
        return rec
    rec.ended_s = rec.at_s
    return rec


def start_leaf_fault(stack: Stack, kind: str, cluster: str) -> None:
    if kind == "leaf-down":
        stack.sim.set_fault(cluster, down=True)
    elif kind == "leaf-slow":
        stack.sim.set_fault(cluster, latency_s=SLOW_LATENCY_S)
    else:
        stack.unregister(cluster)


def end_leaf_fault(stack: Stack, kind: str, cluster: str) -> None:
    if kind == "leaf-removed":
        stack.register(cluster)
    else:
        stack.sim.set_fault(cluster)
    stack.leaf_faults.pop(cluster, None)


def synced_since(sync: ClusterSync | None, since: float) -> bool:
    """Whether a cluster's objects and RBAC were both synced at or after `since` (epoch
    seconds), its last object sync a success."""
    if sync is None or sync.state != "ok":
        return False
    return (sync.last_success or 0) >= since and (sync.rbac_synced_at or 0) >= since


def kill9(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def wait_until(cond: Any, timeout_s: float, poll_s: float = 0.5) -> bool:
    """Whether `cond()` came true within `timeout_s`; a Redis error while asking (a failover
    under way) counts as not yet, not as the end of the run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if cond():
                return True
        except redis_client.ERRORS:
            pass
        time.sleep(poll_s)
    return False
