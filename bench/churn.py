"""Writes during a read benchmark: a fleet that does not stand still (`bench.query --churn*`).

Churn models (issue #38), every write through the watcher's writer (`store_events.apply_changes`),
with everything derived from the rows:

- `steady`: 20 status transitions a second (a random row turns unhealthy, or healthy again, its
  lastTransitionTime now) plus 500 status-unchanged updates a second (a random row gets a new
  message, as a Flux object's `Ready` message does on every reconcile; its status, reason,
  revision and labels stay). The updates are written as a watcher writes them: batched per
  cluster, 10 batches a second (the rows' resourceVersion is not stored, so an update that
  changed nothing visible would be dropped by the writer: the message is what changes);
- `storm`: 100 status transitions a second, nothing else.

`--churn N` (N generations raised a second, no rows written) and `--churn N --churn-rows` (N
transitions a second) are the older, cruder models. The rates reached are reported (a busy
machine may not reach them). A probe (`Probe`) asks the profile being measured once right after
each write and records that request's latency: the cost of the first page after a write.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import requests

from common import redis_client
from common.index import keys, rows
from common.index.write import store_events
from common.redis_client import text

TICK_S = 0.1
"""Status-unchanged updates are written in batches this often (per cluster: one write each)."""
WRITER_NICE = -10
"""The writer child's niceness increment (below 0 needs root or CAP_SYS_NICE; else it stays)."""


@dataclass(frozen=True)
class Model:
    name: str
    transitions_per_s: float
    updates_per_s: float = 0.0
    generations_only: bool = False
    """The old `--churn N` without `--churn-rows`: generations raised, nothing written."""


MODELS = {
    "steady": Model("steady", 20.0, 500.0),
    "storm": Model("storm", 100.0),
}


def model_of(args: Any) -> Model | None:
    """The model the command line asks for (None: a still fleet)."""
    if getattr(args, "churn_model", None):
        return MODELS[args.churn_model]
    if args.churn > 0:
        return Model(f"churn {args.churn:g}", args.churn, generations_only=not args.churn_rows)
    return None


@dataclass
class Probe:
    """One request to the profile being measured right after each write (coalesced: writes
    landing while a probe request runs are answered by the next one); latencies kept apart for
    writes that changed a status and those that did not."""

    target: tuple[str, dict[str, str]] | None = None
    after_transition_ms: list[float] = field(default_factory=list)
    after_update_ms: list[float] = field(default_factory=list)
    _wake: threading.Event = field(default_factory=threading.Event)
    _kind: str = "transition"

    def written(self, kind: str) -> None:
        if self.target is not None:
            self._kind = kind
            self._wake.set()

    def aim(self, url: str | None, headers: dict[str, str] | None = None) -> None:
        """Probe `url` from now on (None: stop probing)."""
        self.target = (url, headers or {}) if url else None

    def reset(self) -> None:
        """Forget what was recorded."""
        self.after_transition_ms, self.after_update_ms = [], []

    def p99s(self) -> dict[str, Any]:
        """The recorded latencies' p99 (ms) and counts, per kind of write."""
        out: dict[str, Any] = {}
        for kind, got in (
            ("transition", self.after_transition_ms),
            ("update", self.after_update_ms),
        ):
            if got:
                out[f"after_{kind}_p99_ms"] = round(p99(got), 2)
                out[f"after_{kind}_n"] = len(got)
        return out

    def run(self, stop: threading.Event) -> None:
        session = requests.Session()
        while not stop.is_set():
            if not self._wake.wait(0.2):
                continue
            self._wake.clear()
            target, kind = self.target, self._kind
            if target is None:
                continue
            t0 = time.perf_counter()
            try:
                session.get(target[0], headers=target[1], timeout=30).raise_for_status()
            except requests.RequestException:
                continue
            ms = (time.perf_counter() - t0) * 1e3
            if self.target is target:  # not re-aimed meanwhile
                out = self.after_transition_ms if kind == "transition" else self.after_update_ms
                out.append(ms)


class Churn:
    """The writes of a model, made by a child process (so they take nothing of the load
    generator's interpreter), with a switch (`active`) so one run can measure each profile
    still and then under writes (`--compare-still`), and the probe fed by the child's writes."""

    def __init__(self, redis_url: str, model: Model, seed: int = 1) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.model = model
        self.active = ctx.Event()
        self.active.set()
        self.probe = Probe()
        self._stop = ctx.Event()
        self._counts = ctx.Array("q", 2)  # transitions, updates
        self._rx, tx = ctx.Pipe(duplex=False)
        self._child = ctx.Process(
            target=_writes,
            args=(redis_url, model, seed, self.active, self._stop, self._counts, tx),
            daemon=True,
        )
        self._reader = threading.Thread(target=self._relay, daemon=True)
        self._probe_stop = threading.Event()
        self._probing = threading.Thread(target=self.probe.run, args=(self._probe_stop,))

    def __enter__(self) -> Churn:
        self._child.start()
        self._reader.start()
        self._probing.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.active.set()
        self._child.join(10)
        if self._child.is_alive():
            self._child.terminate()
        self._probe_stop.set()
        self._probing.join()

    def done(self) -> tuple[int, int]:
        """(transitions, updates) written so far."""
        return int(self._counts[0]), int(self._counts[1])

    def _relay(self) -> None:
        """Each write the child reports wakes the probe."""
        while True:
            try:
                kind = self._rx.recv()
            except (EOFError, OSError):
                return
            self.probe.written(kind)


def _writes(
    redis_url: str,
    model: Model,
    seed: int,
    active: Any,
    stop: Any,
    counts: Any,
    tx: Any,
) -> None:
    """The child: a thread per kind of write, paced while `active`. It asks for a higher
    scheduling priority (nice -10, where allowed): the model's writes stand for watchers on
    machines of their own, so on a 2-core machine saturated by the read load they must not be
    what gives way (they reached ~200 of the 500 updates a second at equal priority)."""
    with contextlib.suppress(OSError):
        os.nice(WRITER_NICE)
    r = redis_client.connect(redis_url)
    clusters = sorted(text(c) for c in r.hkeys(keys.CLUSTERS))
    lock = threading.Lock()

    def told(kind: str, slot: int, n: int) -> None:
        counts[slot] += n
        with lock:
            tx.send(kind)

    def transitions(rnd: random.Random) -> None:
        cluster = rnd.choice(clusters)
        if model.generations_only:
            r.incr(keys.generation(cluster))
            r.incr(keys.status_generation(cluster))
        else:
            transition(r, cluster)
        told("transition", 0, 1)

    per_tick = max(1, round(model.updates_per_s * TICK_S))

    def updates(rnd: random.Random) -> None:
        told("update", 1, unchanged_updates(r, clusters, per_tick, rnd))

    loops = [(model.transitions_per_s, transitions)]
    if model.updates_per_s > 0:
        loops.append((1.0 / TICK_S, updates))
    threads = [
        threading.Thread(target=_paced, args=(per_s, step, active, stop, seed + i))
        for i, (per_s, step) in enumerate(loops)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _paced(per_s: float, step: Any, active: Any, stop: Any, seed: int) -> None:
    """Call `step` `per_s` times a second (catching up when late, never more than a second's
    worth at once), while `active`, until `stop`."""
    rnd = random.Random(seed)
    period, due = 1.0 / per_s, time.monotonic()
    while not stop.is_set():
        if not active.is_set():
            active.wait(0.2)
            due = time.monotonic()
            continue
        due = max(due + period, time.monotonic() - 1.0)
        wait = due - time.monotonic()
        if wait > 0 and stop.wait(wait):
            return
        step(rnd)


def transition(r: Any, cluster: str) -> None:
    """A random row of `cluster` turns unhealthy (or healthy again) now."""
    got = r.zrandmember(keys.rows(cluster))
    if not got:
        return
    member = text(got)
    row = rows.decode(cluster, member)
    row["status"] = "healthy" if row["status"] == "unhealthy" else "unhealthy"
    row["lastTransitionTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    new = rows.encode(row, rows.edges_of(member))
    store_events.apply_changes(r, cluster, [store_events.Change.of(new)])


def unchanged_updates(r: Any, clusters: list[str], n: int, rnd: random.Random) -> int:
    """`n` random rows across `clusters` get a new message (status, reason, revision, labels
    and transition time kept), written per cluster as a watcher batches them; the rows
    updated."""
    per = Counter(rnd.choice(clusters) for _ in range(n))
    pipe = r.pipeline(transaction=False)
    for c, k in per.items():
        pipe.zrandmember(keys.rows(c), k)
    stamp = f"{time.time():.3f}"
    done = 0
    for (c, _k), got in zip(per.items(), pipe.execute(), strict=True):
        changes = []
        for raw in got or ():
            member = text(raw)
            row = rows.decode(c, member)
            row["message"] = f"Reconciliation finished at {stamp}, next run in 10m0s"
            changes.append(store_events.Change.of(rows.encode(row, rows.edges_of(member))))
        if changes:
            store_events.apply_changes(r, c, changes)
            done += len(changes)
    return done


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]
