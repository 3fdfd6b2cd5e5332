"""The soak's invariants, each a number: pure checks over what the run recorded (answers, walks,
freshness probes, revocations, history pages, RSS samples) and, at the end, the index against
every leaf (the full-sync oracle of tests/watch/harness.py) and every user's walk against an
oracle built from the leaves' rows and RBAC (the authorizer itself, as tests/support/query_fleet
decides it)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

Window = tuple[float, float]

REDIS_FAILOVER_GRACE_S = 10.0
"""After a promotion, clients reconnect; their 503s in this time are still the failover's."""
WATCHER_TAKEOVER_S = 25.0
"""A killed watcher replica's leases expire (FLEETSCOPE_WATCH_LEASE_TTL_S, 15 s) before another
replica (its replacement or the survivor) takes its clusters and lists them again: a failover of
the watchers. It lasts until every cluster is built again (the fault's `recovered_s`: the soak
waits for the watchers' `fleetscope_watch_built` to count the whole fleet) plus this grace, and
at least this long from the kill (a record without the recovery)."""
WATCHER_GRACE_S = 5.0
"""After every cluster is built again, the query workers' fleet views refresh."""
KILLED_WORKER_S = 5.0
"""Requests in flight on a killed gunicorn worker lose their connection."""
LEAF_FAULTS = ("leaf-down", "leaf-slow", "leaf-removed")
"""Leaf faults whose detail reads may fail with 502 or 504: a leaf down or slower than the
leaf timeout, and a removed leaf until the registry's reconcile drops it (the query service
has no credentials for a cluster the registry still lists)."""
REREGISTERED_GRACE_S = 15.0
"""After a re-registered leaf is collected again (its fault's `recovered_s`: the soak waits for
its object and RBAC syncs after the re-registration, and for the watchers to hold it), the
query workers' fleet views take up to their refresh to see its rows; until then its objects'
reads may be 404s."""


def windows(faults: Iterable[dict[str, Any]], kind: str, after_s: float) -> list[Window]:
    """[start, end] of every fault of `kind`: to its recovery (else its end) plus `after_s`."""
    out = []
    for f in faults:
        if f["kind"] == kind:
            end = f.get("recovered_s") or f.get("ended_s") or f["at_s"]
            out.append((f["at_s"], end + after_s))
    return out


def failovers(faults: Sequence[dict[str, Any]]) -> list[Window]:
    """Redis failovers and watcher take-overs: until each fault's recovery plus its grace."""
    watchers = [
        (a, max(b, a + WATCHER_TAKEOVER_S)) for a, b in windows(faults, "watcher", WATCHER_GRACE_S)
    ]
    return windows(faults, "redis-primary", REDIS_FAILOVER_GRACE_S) + watchers


def inside(t: float, spans: Iterable[Window], until: float | None = None) -> bool:
    """`t` (or the span from `t` to `until`) meets one of `spans`."""
    end = t if until is None else until
    return any(a <= end and t <= b for a, b in spans)


def classify(
    t: float,
    kind: str,
    code: int,
    error: str,
    faults: Sequence[dict[str, Any]],
    done: float | None = None,
) -> str | None:
    """The class of an answer that is not a 200 (None for a 200), asked at `t` and answered
    at `done` (in flight when a fault began counts as during it); classes starting with
    `unexpected` break the invariant."""
    if code == 200:
        return None
    failover = windows(faults, "redis-primary", REDIS_FAILOVER_GRACE_S)
    if code == 503 and error and inside(t, failover, done):
        return "503 json during redis failover"
    if code == 0 and inside(t, windows(faults, "query-worker", KILLED_WORKER_S), done):
        return "connection lost to a killed query worker"
    leaf = [w for k in LEAF_FAULTS for w in windows(faults, k, 5.0)]
    if kind in ("detail", "relations") and code in (502, 504) and inside(t, leaf, done):
        return f"{code} {kind} of a faulted leaf"
    removed = windows(faults, "leaf-removed", REREGISTERED_GRACE_S)
    if kind in ("detail", "relations", "history") and code == 404 and inside(t, removed, done):
        return "404 of an unregistered leaf"
    if code == 0 or code >= 500:
        return f"unexpected {code} {error}".strip()
    return f"unexpected {code} {kind} {error}".strip()


Answer = tuple[float, str, int, str, float]
"""(asked at s, kind, status, error, answered at s)"""


def errors_by_class(requests: Iterable[Answer], faults: Sequence[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t, kind, code, error, done in requests:
        c = classify(t, kind, code, error, faults, done)
        if c:
            out[c] = out.get(c, 0) + 1
    return out


def unexpected(errors: dict[str, int]) -> int:
    return sum(n for c, n in errors.items() if c.startswith("unexpected"))


def walk_duplicates(walks: Iterable[dict[str, Any]]) -> int:
    """Rows shown more than once, over every walk."""
    return sum(w["rows"] - w["distinct"] for w in walks)


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(len(s) * p) - 1)]


LEAF_GRACE_S = 15.0
"""A leaf back from a fault (up again, fast again, registered again) is listed again first."""


def leaf_spans(faults: Iterable[dict[str, Any]]) -> dict[str, list[Window]]:
    """cluster -> the times it was under a leaf fault, until its recovery plus LEAF_GRACE_S:
    its changes cannot be seen then (down, unregistered) or only as slowly as it answers."""
    out: dict[str, list[Window]] = {}
    for f in faults:
        if f["kind"].startswith("leaf-"):
            end = f.get("recovered_s") or f.get("ended_s") or f["at_s"]
            out.setdefault(f["target"], []).append((f["at_s"], end + LEAF_GRACE_S))
    return out


def fleetscope_share(probe: Sequence[Any]) -> float:
    """A freshness probe is (made at s, made -> visible s or None, cluster, made -> the leaf sent
    its watch event s or None: no watch stream got it, e.g. seen by a re-list); records of runs
    before the leaf's stamp have the first three. What a probe measures of fleetscope: from the leaf's watch event to the list API when the
    leaf stamped its delivery (the simulator's own delay left out: it runs every leaf of the
    fleet in one process, which a real fleet's leaves do not share), else from the change
    itself (end to end, the conservative figure); infinite when never seen."""
    seen = probe[1]
    if seen is None:
        return math.inf
    leaf = probe[3] if len(probe) > 3 else None
    return seen - leaf if leaf is not None and leaf <= seen else seen


def freshness(
    samples: Iterable[Sequence[Any]],
    spans: Sequence[Window],
    leaves: dict[str, list[Window]] | None = None,
) -> dict[str, Any]:
    """p50/p99 of what fleetscope takes (`fleetscope_share`) outside `spans` and outside the
    probed cluster's own leaf faults (`leaves`): the invariant's figure; beside it the same
    probes end to end (change -> visible, the simulator's delay in it), the simulator's delay
    (change -> the leaf sent the event) and the probes the leaf never stamped. A change never
    seen counts as infinite."""
    leaves = leaves or {}
    samples = list(samples)
    outside = [
        p for p in samples if not inside(p[0], spans) and not inside(p[0], leaves.get(p[2], []))
    ]
    kept = [fleetscope_share(p) for p in outside]
    ends = [math.inf if p[1] is None else p[1] for p in outside]
    leaf = [p[3] for p in outside if len(p) > 3 and p[3] is not None]
    every = [fleetscope_share(p) for p in samples]
    return {
        "n": len(kept),
        "excluded": len(every) - len(kept),
        "never_seen": sum(1 for v in every if v == math.inf),
        "p50_s": _num(percentile(kept, 0.5)),
        "p99_s": _num(percentile(kept, 0.99)),
        "p99_all_s": _num(percentile(every, 0.99)),
        "end_to_end_p50_s": _num(percentile(ends, 0.5)),
        "end_to_end_p99_s": _num(percentile(ends, 0.99)),
        "leaf_delivered_p50_s": _num(percentile(leaf, 0.5)) if leaf else None,
        "leaf_delivered_p99_s": _num(percentile(leaf, 0.99)) if leaf else None,
        "unstamped": sum(1 for p in outside if p[1] is not None and (len(p) < 4 or p[3] is None)),
    }


def _num(v: float) -> float | None:
    return None if v == math.inf else round(v, 3)


def revocation_violations(
    revocations: Iterable[dict[str, Any]], bound_s: float, spans: Sequence[Window]
) -> int:
    """Revocations not effective within `bound_s`, plus every answer after the bound that
    still showed a revoked row. A late one is excused when one of `spans` (a failover) meets
    its bound, from the change to `bound_s` after it: one made just before the primary was
    killed cannot take effect while there is none (the fifteen-minute L soak of 2026-12-02,
    a RoleBinding deleted 30 ms before a failover, effective 6.8 s later)."""
    bad = 0
    for r in revocations:
        late = r["revoked_s"] is None or r["revoked_s"] > bound_s
        bad += late and not inside(r["at_s"], spans, r["at_s"] + bound_s)
        bad += r["seen_after_bound"]
    return bad


def duplicate_transitions(entries: Sequence[dict[str, Any]]) -> int:
    """Entries (newest first) recording the same state as the one before them: a transition
    recorded twice (by the watcher and a sync, or by two replicas)."""

    def state(e: dict[str, Any]) -> tuple[Any, ...]:
        marker = e["source"] if e["source"] in ("created", "deleted") else ""
        return (e["status"], e["suspended"], e["reason"], e["revision"], marker)

    return sum(1 for newer, older in itertools.pairwise(entries) if state(newer) == state(older))


def slope_pct_per_10min(points: Sequence[tuple[float, float]], base: float | None = None) -> float:
    """Least-squares slope of (t_s, rss) per 600 s, in percent of `base` (by default the mean
    RSS of the points)."""
    if len(points) < 3:
        return 0.0
    mv = sum(v for _, v in points) / len(points) if base is None else base
    return round(100 * _slope(points) * 600 / mv, 3) if mv else 0.0


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (t, v) per unit of t; 0 when the times do not vary."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / var if var else 0.0


JUDGED_MIN_S = 600.0
"""The least span of samples after warm-up on which a process's RSS slope is judged: the
slope's own unit (per 10 minutes)."""

FLOOR_WINDOW_S = 120.0
"""The windows whose lowest sample makes a process's floor (`floors`): two of the query
workers' heap trims and memo sweeps, sixty samples at the soak's default interval (2 s)."""


def floors(
    points: Sequence[tuple[float, float]], window_s: float = FLOOR_WINDOW_S
) -> list[tuple[float, float]]:
    """The lowest sample of each `window_s` window from the first point on (its time and
    value), for windows holding at least two samples: the RSS a process comes back to between
    requests, after its heap trims. A leak raises it; an answer of megabytes built and dropped
    between two samples does not. Fewer than three such windows: the points themselves."""
    if not points:
        return []
    start = points[0][0]
    windows: dict[int, list[tuple[float, float]]] = {}
    for t, v in points:
        windows.setdefault(int((t - start) // window_s), []).append((t, v))
    lows = [min(w, key=lambda p: p[1]) for w in windows.values() if len(w) >= 2]
    return lows if len(lows) >= 3 else list(points)


def rss_series(samples: Iterable[dict[str, Any]]) -> dict[str, list[tuple[float, int, int, int]]]:
    """name -> [(t_s, pid, kib, rss_kib)], from samples {"t_s", "procs": {name: [pid, kib]}}.
    `kib` is what is judged: the RSS, except for a Redis server's samples with its data
    (`redis_data_kib`: INFO `used_memory`), which count its RSS net of that data: what the
    server holds beyond the data it was given (its allocator's overhead and fragmentation,
    buffers), the part a leak would grow; the data is bounded by the retention settings and
    reported apart (`redis_data`). `rss_kib` is the process's RSS, the base of its slope in
    percent. A Redis server's samples without the data are left out, as is a sample of 0 KiB
    (a process gone between the listing and the read)."""
    out: dict[str, list[tuple[float, int, int, int]]] = {}
    for s in samples:
        data = s.get("redis_data_kib")
        for name, (pid, kib) in s["procs"].items():
            if not kib:  # gone between the listing and the read (killed by a fault)
                continue
            net = kib
            if data is not None and name.startswith("redis-"):
                if name not in data:
                    continue
                net = kib - data[name]
            out.setdefault(name, []).append((s["t_s"], pid, net, kib))
    return out


def redis_data(samples: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per Redis server: its data (INFO `used_memory`, KiB) at the first and last sample, and
    the growth per 10 minutes (least squares): what the history and the change feeds add until
    their retention bounds (`FLEETSCOPE_HISTORY_MAX`, `FLEETSCOPE_WATCH_FEED_MAX`)."""
    series: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for name, kib in (s.get("redis_data_kib") or {}).items():
            series.setdefault(name, []).append((s["t_s"], float(kib)))
    out = {}
    for name, points in series.items():
        out[name] = {
            "first_kib": points[0][1],
            "last_kib": points[-1][1],
            "kib_per_10min": round(_slope(points) * 600, 1),
        }
    return out


def rss_flat(
    samples: Sequence[dict[str, Any]],
    warmup_s: float,
    limit_pct: float = 1.0,
    skip: Sequence[str] = (),
    min_judged_s: float = JUDGED_MIN_S,
) -> dict[str, dict[str, Any]]:
    """Per process name: each of its pids (a process replaced by a fault, or by Celery, starts a
    new series that warms up again) judged on its samples after `warmup_s` when those span at
    least `min_judged_s`; a shorter series is reported, not judged (a slope per 10 minutes read
    off a few minutes is the tail of its warm-up). A series is judged by the least-squares
    slope of its floor (`floors`: each 2-minute window's lowest sample) in percent of its mean
    RSS per 10 minutes; the slope of every sample is reported beside it
    (`slope_all_pct_per_10min`), and the floor's in KiB (`kib_per_10min`). Flat when every
    judged series is under `limit_pct`; the slope shown is the worst judged one (else the last
    pid's)."""
    every = {n: s for n, s in rss_series(samples).items() if n not in skip}
    runs_of: dict[str, list[dict[str, Any]]] = {}
    for name, series in every.items():
        pids = list(dict.fromkeys(p for _, p, _, _ in series))
        runs_of[name] = [_run(pid, series, warmup_s, min_judged_s, limit_pct) for pid in pids]
    levels = _settled_floors(runs_of)
    out = {}
    for name, runs in runs_of.items():
        level = levels.get(role(name))
        if level is not None:
            for i in range(1, len(runs)):
                runs[i] = _replacement(
                    runs[i], every[name], warmup_s, min_judged_s, limit_pct, level
                )
        judged = [r for r in runs if r["judged"]]
        shown = max(judged, key=lambda r: r["slope_pct_per_10min"]) if judged else runs[-1]
        out[name] = {
            **shown,
            "flat": all(r["flat"] for r in judged),
            "judged": bool(judged),
            "series": runs,
        }
    return out


def role(name: str) -> str:
    """What a process is, without its numbers: `query-1.w1` and `query-0.w0` are both
    `query-#.w#`, the same program under the same settings and load."""
    return re.sub(r"\d+", "#", name)


def _settled_floors(runs_of: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Per role: the lowest of its first pids' median floors after warm-up, among those judged
    (their floors span at least the judged span): the level the same program settled at in
    this run, which a replacement started later has not reached while it is still warming."""
    medians: dict[str, list[float]] = {}
    for name, runs in runs_of.items():
        first = runs[0]
        if first["judged"] and first["floors"]:
            values = sorted(v for _, v in first["floors"])
            medians.setdefault(role(name), []).append(values[len(values) // 2])
    return {r: min(v) for r, v in medians.items()}


def _replacement(
    run: dict[str, Any],
    series: Sequence[tuple[float, int, int, int]],
    warmup_s: float,
    min_judged_s: float,
    limit_pct: float,
    level: float,
) -> dict[str, Any]:
    """A pid that replaced one of its name (a fault's kill, or Celery's recycling) warms up
    until its floor first reaches `level`, the floor its role's first pids settled at (with the
    run's warm-up as the least): its memos and heap fill to what the same program holds under
    the same load, which a pid started into a steady load does more slowly than the first ones
    did in the start's burst. Growth beyond that level is judged like any other; a pid still
    below it at the end is reported as warming, not judged. What `warmup_s` alone would have
    judged is kept beside it (`fixed_warmup`)."""
    pid = run["pid"]
    mine = [(t, float(kib)) for t, p, kib, _ in series if p == pid]
    start = mine[0][0] + warmup_s
    after = [(t, v) for t, v in floors(mine) if t >= start]
    if not after:  # it ended within the run's warm-up: too short to judge either way
        return run
    reached = next((t for t, v in after if v >= level), None)
    fixed = {k: run[k] for k in ("span_s", "slope_pct_per_10min", "judged", "flat")}
    if reached is None:
        return {**run, "judged": False, "flat": True, "warming": True,
                "sibling_floor_kib": round(level), "fixed_warmup": fixed,
                "highest_floor_kib": round(max(v for _, v in after))}  # fmt: skip
    again = _run(pid, series, reached - mine[0][0], min_judged_s, limit_pct)
    return {**again, "warm_at_s": round(reached, 1), "sibling_floor_kib": round(level),
            "fixed_warmup": fixed}  # fmt: skip


def _run(
    pid: int,
    series: Sequence[tuple[float, int, int, int]],
    warmup_s: float,
    min_judged_s: float,
    limit_pct: float,
) -> dict[str, Any]:
    mine = [(t, kib, rss) for t, p, kib, rss in series if p == pid]
    start = mine[0][0] + warmup_s
    kept = [(t, float(kib), float(rss)) for t, kib, rss in mine if t >= start]
    points = [(t, kib) for t, kib, _ in kept]
    base = sum(rss for _, _, rss in kept) / len(kept) if kept else None
    span = points[-1][0] - points[0][0] if points else 0.0
    low = floors(points)
    slope = slope_pct_per_10min(low, base)
    judged = span >= min_judged_s and len(points) >= 3
    return {
        "pid": pid,
        "samples": len(points),
        "span_s": round(span, 1),
        "first_kib": points[0][1] if points else None,
        "last_kib": points[-1][1] if points else None,
        "mean_rss_kib": round(base) if base else None,
        "slope_pct_per_10min": slope,
        "slope_all_pct_per_10min": slope_pct_per_10min(points, base),
        "kib_per_10min": round(_slope(low) * 600, 1) if len(low) >= 3 else 0.0,
        "judged": judged,
        "flat": not judged or slope < limit_pct,
        "floors": low,
    }
