"""Soak, "a day in the life" (issue #41): the whole stack at a fleet preset under load, churn and
a seeded series of faults, checked by invariants throughout and at the end.

    ./dev bench soak [--preset L] [--duration-s 1800] [--out soak.json]

Stack (bench.soak_stack): Redis with a replica and three Sentinels, two prefork Celery workers,
beat, two `fleetscope watch` replicas, two query processes, kubesim's fleet in this process.
Load, churn, freshness probes, RBAC changes, watch streams and walks: bench.soak_load. Faults,
one every 2-3 minutes scaled to the duration: bench.soak_faults. Invariants: bench.soak_invariants
and, at the end, bench.soak_oracle. Writes `--out` (JSON) and a PNG next to it; exit status 1
if any invariant fails.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import soak_faults, soak_invariants, soak_load, soak_oracle, soak_report
from bench.heaptrace import heapmaps
from bench.soak_stack import Stack, rss_kib, start_stack
from common.index import syncstatus
from common.rbac.authorizer import UserInfo
from common.redis_client import connect
from kubesim.gen.fleet import preset_fleet
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim
from tests.reliability.stack import http_json

HARNESS = "kubesim+loadgen"
PRINT_EVERY_S = 10.0
"""How often the run prints its progress (and, with `--heaptrace`, reads every process's
smaps): RSS is sampled more often (`--sample-every-s`, 2 s), so that each 2-minute window's
lowest sample is what the process comes back to between requests, not the luck of twelve
samples landing inside them."""
LEAF_TIMEOUT_S = 5
"""FLEETSCOPE_LEAF_TIMEOUT_S of the stack (the product's default is 10 s): below the slow-leaf
fault's latency (soak_faults.SLOW_LATENCY_S), so a slow leaf's reads time out, and well above
what kubesim, sharing this process (and its GIL) with the load, takes for a leaf under no
fault (a 2 s timeout gave a 504 of an unfaulted leaf in the twelfth L run)."""
"""This process: kubesim's fleet and every record of the run (growing with the run by design):
sampled and reported, not held to the RSS invariant."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="S", help="kubesim fleet preset: S, M or L")
    p.add_argument("--duration-s", type=float, default=1800)
    p.add_argument("--seed", type=int, default=1, help="fleet and fault order")
    p.add_argument("--rate", type=float, default=20, help="API requests per second")
    p.add_argument("--transitions-per-s", type=float, default=20)
    p.add_argument("--unchanged-per-s", type=float, default=20, help="status-unchanged updates")
    p.add_argument("--rbac-every-s", type=float, default=60, help="a RoleBinding removed/added")
    p.add_argument("--walk-every-s", type=float, default=20)
    p.add_argument(
        "--sample-every-s",
        type=float,
        default=2,
        help="RSS samples (a floor is the lowest of a 2-minute window's samples)",
    )
    p.add_argument("--revocation-bound-s", type=float, default=5.0)
    p.add_argument("--freshness-target-s", type=float, default=2.0)
    p.add_argument("--settle-timeout-s", type=float, default=300)
    p.add_argument(
        "--query-memo-mib",
        type=int,
        default=128,
        help="FLEETSCOPE_QUERY_MEMO_MIB of the query workers: memos that fill within the warm-up",
    )
    p.add_argument(
        "--query-memo-idle-s",
        type=float,
        default=120,
        help="FLEETSCOPE_QUERY_MEMO_IDLE_S of the query workers: memos that settle within the "
        "warm-up (with the default, 600 s, they settle after about 10 minutes)",
    )
    p.add_argument(
        "--heaptrace",
        metavar="DIR",
        help="diagnosis: the second query process's workers, the first Celery worker's "
        "prefork children and the first watcher replica dump their heap's make-up into DIR "
        "every 150 s (bench.heaptrace; "
        "read with python -m bench.heaptrace.diff), and every "
        "RSS sample, at most one each 10 s, records each process's RSS by mapping kind "
        "(heapmaps.smaps_kib)",
    )
    p.add_argument(
        "--heaptrace-frames",
        type=int,
        default=0,
        help="with --heaptrace: trace allocations (tracemalloc) with this many frames; makes the "
        "traced workers several times slower (and so the whole load)",
    )
    p.add_argument(
        "--heaptrace-census",
        action="store_true",
        help="with --heaptrace: also count the live objects by type (gc.get_objects() from a "
        "thread of its own, which can fail a request the traced worker is building: a 500)",
    )
    p.add_argument("--out", default="soak.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    workdir = Path(tempfile.mkdtemp(prefix="fleetscope-soak-"))
    fleet = preset_fleet(args.preset, args.seed)
    sim = KubeSim.start(fleet, kubeconfig_dir=workdir / "clusters")
    try:
        sim.warm()
        soak_load.add_wide_user(sim)
        gc.collect()
        gc.freeze()  # kubesim's fleet lives here: no full collections pausing it (and the probes)
        stack = start_stack(
            sim,
            workdir,
            registry_interval_s=10,
            watch_bookmark_s=5,
            leaf_timeout_s=LEAF_TIMEOUT_S,
            log_level="WARNING",
            access_log="json",  # the query processes' own durations, in their logs
            query_memo_mib=args.query_memo_mib,
            query_memo_idle_s=args.query_memo_idle_s,
            heaptrace=Path(args.heaptrace).resolve() if args.heaptrace else None,
            heaptrace_frames=args.heaptrace_frames,
            heaptrace_census=args.heaptrace_census,
        )
        try:
            result = run(args, sim, stack, fleet)
        finally:
            stack.stop()
    finally:
        sim.stop()
    out = Path(args.out)
    result["plot"] = str(
        soak_report.plot(
            out.with_suffix(".png"),
            [tuple(f) for f in result["freshness_samples"]],
            result["error_rate"],
            result["faults"],
        )
    )
    out.write_text(json.dumps(result, indent=1))
    failed = soak_report.verdicts(result["invariants"])
    print(json.dumps({k: result[k] for k in ("invariants", "faults", "errors")}, indent=1))
    print(f"soak: {'FAILED ' + ', '.join(failed) if failed else 'every invariant held'}; {out}")
    return 1 if failed else 0


def run(args: argparse.Namespace, sim: KubeSim, stack: Stack, fleet: Any) -> dict[str, Any]:
    admin = soak_load.ADMIN
    t0 = time.monotonic()

    def ready() -> dict[str, Any]:
        return http_json(stack.bases[0] + "/api/v1/status", admin)[1] or {}

    if not soak_faults.wait_until(lambda: collected(stack, sim), 3600, 2):
        raise RuntimeError(f"the stack did not collect the fleet: {ready()}")
    soak_faults.wait_until(lambda: ready().get("state") == "ready", 120, 2)
    ready_s = round(time.monotonic() - t0)
    # The load starts once the watchers have built every cluster: a day in the life of a
    # running stack, not its first start (both replicas listing 100 clusters each at once).
    if not soak_faults.wait_until(lambda: stack.watched() == len(sim.clusters), 1800, 2):
        raise RuntimeError(f"the watchers did not build every cluster: {stack.watched()}")
    built_s = round(time.monotonic() - t0)
    print(f"ready after {ready_s} s, watched after {built_s} s", flush=True)
    namespaces = soak_load.app_namespaces(sim)
    probe_ns, churn_ns = namespaces[1::5], [n for i, n in enumerate(namespaces) if i % 5 != 1]
    rec = soak_load.Record()
    threads: list[soak_load.Looping] = [
        soak_load.Load(rec, stack.bases, soak_load.targets(sim, probe_ns), args.rate),
        soak_load.Churn(rec, sim, churn_ns, args.transitions_per_s, args.unchanged_per_s),
        soak_load.Freshness(rec, sim, stack.bases, probe_ns, stack.leaf_faults),
        soak_load.RbacChurn(
            rec, sim, stack.bases, stack.leaf_faults, args.rbac_every_s, args.revocation_bound_s
        ),
        soak_load.Walks(rec, stack.bases, args.walk_every_s),
    ]
    threads += [
        soak_load.Streams(rec, stack.bases[i % len(stack.bases)], who, soak_load.CALLERS[who])
        for i, who in enumerate(("admin", "team-00", "wide"))
    ]
    for t in threads:
        t.start()
    faults = soak_faults.schedule(args.duration_s, args.seed)
    injected: list[soak_faults.Injected] = []
    samples: list[dict[str, Any]] = []
    next_sample = next_check = next_print = next_smaps = 0.0
    while (now := rec.now_s()) < args.duration_s:
        if faults and faults[0].at_s <= now:
            f = faults.pop(0)
            injected.append(soak_faults.inject(stack, f, rec.now_s))
            print(f"[{now:6.0f}s] fault {f.kind} -> {injected[-1].target}", flush=True)
        if now >= next_check:
            next_check = now + 2
            recover(stack, injected, rec, ready)
        if now >= next_sample:
            next_sample = now + args.sample_every_s
            procs = {n: [p, rss_kib(p)] for n, p in stack.processes().items()}
            procs[HARNESS] = [0, rss_kib(_self_pid())]
            data = stack.redis_data_kib()
            samples.append({"t_s": round(now, 1), "procs": procs, "redis_data_kib": data})
            if args.heaptrace and now >= next_smaps:  # where each process's RSS lies
                next_smaps = now + PRINT_EVERY_S
                samples[-1]["smaps_kib"] = {
                    n: heapmaps.smaps_kib(p) for n, (p, _) in procs.items() if p
                }
            if now >= next_print:
                next_print = now + PRINT_EVERY_S
                print(f"[{now:6.0f}s] {progress(rec)}", flush=True)
        time.sleep(0.2)
    for t in threads:
        t.stop()
    for t in threads:
        t.join(90)
    soak_faults.wait_until(lambda: not recover(stack, injected, rec, ready), 120, 2)
    result = finish(args, sim, stack, fleet, rec, injected, samples)
    result["started_s"] = {"ready": ready_s, "watched": built_s}
    return result


def collected(stack: Stack, sim: KubeSim) -> bool:
    """Every cluster registered, its objects and RBAC synced."""
    r = connect(stack.redis.url, 10)
    try:
        syncs = syncstatus.read_all(r, syncstatus.registered_clusters(r))
    finally:
        r.close()
    return len(syncs) == len(sim.clusters) and all(
        s.state == "ok" and s.last_success and s.rbac_synced_at for s in syncs.values()
    )


def recover(stack: Stack, injected: list[Any], rec: Any, ready: Any) -> int:
    """Marks the faults the stack came back from (ended, every process whole, ready, every
    cluster outside a leaf fault built by a watcher replica again: a killed replica's clusters
    are not watched until taken over and listed, nor a Redis failover's relisted ones); returns
    how many are still pending."""
    pending = [f for f in injected if f.recovered_s is None and f.ended_s is not None]
    if pending and stack.whole() and ready().get("state") == "ready" and watched(stack):
        for f in pending:
            if f.kind == "leaf-removed" and not collected_again(stack, f.target, f.detail):
                continue
            f.recovered_s, f.survived = round(rec.now_s(), 1), True
            if f.kind == "watcher":  # who built the killed one's clusters: survivor or successor
                f.detail["built_by"] = stack.built_by()
    pending = [f for f in pending if f.recovered_s is None]
    return len(pending) + sum(1 for f in injected if f.ended_s is None)


def watched(stack: Stack) -> bool:
    """Every cluster outside a leaf fault built by a watcher replica."""
    return stack.watched() >= len(stack.sim.clusters) - len(stack.leaf_faults)


def collected_again(stack: Stack, cluster: str, detail: dict[str, Any]) -> bool:
    """A re-registered leaf is back once its objects and RBAC were synced after its
    re-registration (`detail["ended_at"]`, wall clock) and the watchers hold every cluster
    again: until then its objects' reads are rightly 404s (not indexed yet)."""
    since = detail.get("ended_at")
    if since is None:
        return True
    r = connect(stack.redis.url, 10)
    try:
        s = syncstatus.read_all(r, [cluster]).get(cluster)
    finally:
        r.close()
    return soak_faults.synced_since(s, since) and stack.watched() == len(stack.sim.clusters)


def progress(rec: soak_load.Record) -> str:
    codes: dict[int, int] = {}
    for _, _, code, *_ in rec.requests:
        codes[code] = codes.get(code, 0) + 1
    fresh = [p[1] for p in rec.freshness[-20:] if p[1] is not None]
    return (
        f"requests {codes}, churn {dict(rec.churn)}, freshness last20 max "
        f"{max(fresh, default=0):.2f}s, walks {len(rec.walks)}, streams {rec.streams['connects']}"
    )


def _self_pid() -> int:
    import os

    return os.getpid()


def finish(
    args: argparse.Namespace,
    sim: KubeSim,
    stack: Stack,
    fleet: Any,
    rec: soak_load.Record,
    injected: list[soak_faults.Injected],
    samples: list[dict[str, Any]],
) -> dict[str, Any]:
    """The end checks and the report, every invariant a number with its verdict."""
    faults = [f.to_json() for f in injected]
    leaves = soak_oracle.Leaves(sim)
    r = connect(stack.redis.url, 10)
    try:
        diff, settle_s = soak_oracle.wait_settled(leaves, r, args.settle_timeout_s)
    finally:
        r.close()
    users = {u.name: UserInfo(u.name, u.groups) for u in fleet_users(fleet)}
    users[soak_load.WIDE_USER] = UserInfo(soak_load.WIDE_USER)
    t0 = time.monotonic()
    walks = soak_oracle.walks_against_oracle(leaves, stack.bases, users)
    oracle_s = round(time.monotonic() - t0, 1)
    print(f"settled in {settle_s} s, oracle walks in {oracle_s} s", flush=True)
    missed = {c for w in walks.values() for c, _ in w.get("missing_by_cluster", [])}
    r = connect(stack.redis.url, 10)
    try:
        rbac_diff = soak_oracle.rbac_diagnosis(r, sim, sorted(missed))
    finally:
        r.close()
    history = history_duplicates(stack.bases[0], sorted(rec.probed))
    spans = soak_invariants.failovers(faults)
    errors = soak_invariants.errors_by_class(rec.requests, faults)
    fresh = soak_invariants.freshness(rec.freshness, spans, soak_invariants.leaf_spans(faults))
    rss = soak_invariants.rss_flat(samples, warmup_s=args.duration_s * 0.2, skip=[HARNESS])
    harness = soak_invariants.rss_flat(samples, warmup_s=args.duration_s * 0.2)[HARNESS]
    revoked = soak_invariants.revocation_violations(rec.revocations, args.revocation_bound_s, spans)
    p99 = fresh["p99_s"]
    inv = {
        "unexpected_errors": _inv(soak_invariants.unexpected(errors), 0),
        "walk_rows_twice": _inv(soak_invariants.walk_duplicates(rec.walks), 0),
        "revocation_violations": _inv(revoked, 0),
        "freshness_p99_s": {
            "value": p99,
            "ok": p99 is not None and p99 <= args.freshness_target_s,
        },
        "rows_lost": _inv(diff["lost"], 0),
        "index_differs_from_leaves": _inv(
            diff["wrong"] + diff["extra"] + len(diff["inconsistent"]), 0
        ),
        "walks_differ_from_oracle": _inv(soak_oracle.oracle_failures(walks), 0),
        "history_duplicate_transitions": _inv(history["duplicates"], 0),
        "processes_rss_growing": _inv(sum(1 for v in rss.values() if not v["flat"]), 0),
        "faults_not_survived": _inv(sum(1 for f in injected if not f.survived), 0),
    }
    return {
        "preset": args.preset,
        "duration_s": args.duration_s,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "invariants": inv,
        "requests_by_kind": soak_report.requests_by_kind(rec.requests),
        "requests": len(rec.requests),
        "errors": errors,
        "answers_not_200": rec.failed,
        "faults": faults,
        "faults_injected": len(injected),
        "faults_survived": sum(1 for f in injected if f.survived),
        "rows_lost": diff["lost"],
        "settle": {"seconds": settle_s, **diff},
        "oracle_walks": walks,
        "oracle_walks_s": oracle_s,
        "oracle_rbac_diff": rbac_diff,
        "history": history,
        "freshness": fresh,
        "revocations": rec.revocations,
        "walks": rec.walks,
        "streams": dict(rec.streams),
        "churn": dict(rec.churn),
        "rss": rss,
        "rss_not_judged": sorted(n for n, v in rss.items() if not v["judged"]),
        "redis_data": soak_invariants.redis_data(samples),
        "rss_harness": harness,
        "rss_samples": samples,
        "freshness_samples": rec.freshness,
        "error_rate": soak_report.error_rate(rec.requests),
    }


def _inv(value: int, want: int) -> dict[str, Any]:
    return {"value": value, "ok": value == want}


def history_duplicates(base: str, probed: list[tuple[str, str]]) -> dict[str, int]:
    """Duplicate transitions over the probe objects' histories (each probe is a transition)."""
    dupes = entries = 0
    for c, ns in probed:
        path = f"/api/v1/objects/{c}/{ns}/Kustomization/apps/history?limit=500"
        code, body = http_json(base + path, soak_load.ADMIN)
        if code == 200:
            entries += len(body["items"])
            dupes += soak_invariants.duplicate_transitions(body["items"])
    return {"objects": len(probed), "entries": entries, "duplicates": dupes}


if __name__ == "__main__":
    raise SystemExit(main())
