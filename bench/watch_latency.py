"""Benchmark: watch latency at a fleet preset, printed as JSON.

    ./dev bench watch_latency [--preset M] [--changes 100] [--revokes 30] [--replicas 1]

kubesim (in this process) serves the fleet; `--replicas` `fleetscope watch` processes (the first
with `--reconcile`) build the index from lists and watches, sharing the clusters (the run waits
until their shares settle, within one); the query service runs under gunicorn. Measured, for
changes on random clusters after the build with bookmarks at kubesim's default interval: an
object change in kubesim -> visible in `GET /api/v1/objects` (p50/p99) and a deleted
RoleBinding -> its team no longer sees the namespace through the list API (p50/p99), each split
at the moment the leaf sent the watch event (kubesim's delivery stamp) into the simulator's own
delay (`leaf_delivered_s`) and fleetscope's (`from_leaf_delivery_s`, what the freshness targets
bound); and the watcher's CPU seconds and peak RSS (from /proc) for the initial build and for
the steady state, per replica with the clusters it holds and its thread count.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
import requests

from bench.services import ROOT, bench_env, gunicorn
from common.index import keys, syncstatus
from common.redis_server import start_redis_server
from kubesim.gen.fleet import preset_fleet
from kubesim.server import KubeSim

POLL_S = 0.02


def proc_stats(pid: int) -> dict[str, float]:
    """CPU seconds (user+system) and current/peak RSS of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tick
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    rss = int(status["VmRSS"].split()[0]) / 1024
    hwm = int(status["VmHWM"].split()[0]) / 1024
    return {
        "cpu_s": round(cpu, 2),
        "rss_mib": round(rss, 1),
        "peak_rss_mib": round(hwm, 1),
        "threads": int(status["Threads"].strip()),
    }


def held(r: redis.Redis, clusters: list[str]) -> dict[str, int]:
    """Replica name -> clusters whose lease it holds."""
    out: dict[str, int] = {}
    for v in r.mget([keys.lease(c) for c in clusters]):
        if v is not None:
            name = v.decode().split(":")[0]
            out[name] = out.get(name, 0) + 1
    return out


def wait_shared(r: redis.Redis, clusters: list[str], replicas: int, timeout_s: float) -> float:
    """Seconds until every cluster is held and the replicas' shares differ by at most one."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        counts = held(r, clusters)
        if (
            len(counts) == replicas
            and sum(counts.values()) == len(clusters)
            and max(counts.values()) - min(counts.values()) <= 1
        ):
            return time.monotonic() - started
        time.sleep(0.5)
    raise RuntimeError(f"the replicas' shares did not settle: {held(r, clusters)}")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(len(s) * p))], 3)


def wait_ready(r: redis.Redis, clusters: list[str], timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        syncs = syncstatus.read_all(r, clusters).values()
        if all(s.state == "ok" and s.last_success and s.rbac_synced_at for s in syncs):
            return time.monotonic() - started
        time.sleep(0.5)
    raise RuntimeError("the watcher did not build the index in time")


def list_rows(base: str, user: str, groups: list[str], **params: str) -> list[dict[str, Any]]:
    headers = {"X-Remote-User": user, "X-Remote-Group": ",".join(groups)}
    resp = requests.get(f"{base}/api/v1/objects", params=params, headers=headers, timeout=10)
    resp.raise_for_status()
    return list(resp.json()["items"])


def until(cond: Any, timeout_s: float = 60.0) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise RuntimeError("change not visible within the timeout")
        time.sleep(POLL_S)
    return time.monotonic() - t0


@dataclass
class Timings:
    """Per change: made -> visible in the list API (end to end), made -> the leaf (kubesim)
    sent the watch event (and, within it, the store's write -> that send), and that send ->
    visible (fleetscope's own share, the freshness figure)."""

    end_to_end: list[float] = field(default_factory=list)
    leaf: list[float] = field(default_factory=list)
    leaf_after_write: list[float] = field(default_factory=list)
    fleetscope: list[float] = field(default_factory=list)
    unstamped: int = 0  # visible without a stamped delivery (e.g. seen by a re-list)

    def add(self, sim: KubeSim, t0: float, visible: float, c: str, obj: dict[str, Any]) -> None:
        self.end_to_end.append(visible - t0)
        meta = obj["metadata"]
        sent = sim.delivery(
            c, obj["kind"], meta.get("namespace", ""), meta["name"], meta["resourceVersion"]
        )
        if sent is None:
            self.unstamped += 1
            return
        self.leaf.append(sent.delivered_s - t0)
        self.leaf_after_write.append(sent.delivered_s - sent.made_s)
        self.fleetscope.append(visible - sent.delivered_s)

    def report(self) -> dict[str, Any]:
        return {
            **summary(self.end_to_end),
            "leaf_delivered_s": summary(self.leaf),
            "leaf_sent_after_its_write_s": summary(self.leaf_after_write),
            "from_leaf_delivery_s": summary(self.fleetscope),
            "unstamped": self.unstamped,
        }


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": pct(values, 0.5),
        "p99": pct(values, 0.99),
        "max": round(max(values), 3),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lag_buckets(ports: list[int]) -> dict[float, float]:
    """The replicas' `fleetscope_watch_event_lag_seconds` cumulative buckets (le -> count)
    and, under -1, the sum of the observations."""
    out: dict[float, float] = {}
    for port in ports:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        for ln in text.splitlines():
            if ln.startswith("fleetscope_watch_event_lag_seconds_bucket"):
                le = ln.split('le="', 1)[1].split('"', 1)[0]
                key = float("inf") if le == "+Inf" else float(le)
                out[key] = out.get(key, 0.0) + float(ln.rsplit(" ", 1)[1])
            elif ln.startswith("fleetscope_watch_event_lag_seconds_sum"):
                out[-1.0] = out.get(-1.0, 0.0) + float(ln.rsplit(" ", 1)[1])
    return out


def lag_summary(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """The watcher's own share over the changes: each event's arrival in the watcher -> its
    row committed in Redis (the queue and the writer), as the histogram's bucket bounds that
    hold p50 and p99, and the mean."""
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total = delta.get(float("inf"), 0.0)
    if not total:
        return {"n": 0}
    bounds = sorted(k for k in delta if k >= 0)

    def upper(p: float) -> float:
        return next(b for b in bounds if delta[b] >= p * total)

    mean = round(delta.get(-1.0, 0.0) / total, 4)
    return {"n": int(total), "p50_le": upper(0.5), "p99_le": upper(0.99), "mean": mean}


def object_changes(sim: KubeSim, base: str, n: int, rnd: random.Random) -> Timings:
    out = Timings()
    apps = len(sim.list(sim.clusters[0], "Namespace")) - 4  # default, kube-, flux-, istio-system
    for i in range(n):
        c = rnd.choice(sim.clusters)
        ns = f"app-{rnd.randrange(apps):04d}"
        msg = f"bench change {i}"
        t0 = time.monotonic()
        obj = sim.set_ready(
            c, "Kustomization", ns, "apps", False, reason="BuildFailed", message=msg
        )
        params = {"cluster": c, "namespace": ns, "kind": "Kustomization"}
        until(
            lambda msg=msg, params=params: any(
                x["message"] == msg for x in list_rows(base, "bench", ["fleet-admins"], **params)
            )
        )
        out.add(sim, t0, time.monotonic(), c, obj)
    return out


def revocations(sim: KubeSim, base: str, n: int, rnd: random.Random) -> Timings:
    out = Timings()
    for _ in range(n):
        c = rnd.choice(sim.clusters)
        bindings = [b for b in sim.list(c, "RoleBinding") if b["metadata"]["name"] == "team-view"]
        b = rnd.choice(bindings)
        ns = b["metadata"]["namespace"]
        group = next(s["name"] for s in b["subjects"] if s["kind"] == "Group")
        params = {"cluster": c, "namespace": ns}
        assert list_rows(base, "dev", [group], **params), "the team should see its namespace"
        t0 = time.monotonic()
        obj = sim.delete(c, "RoleBinding", ns, "team-view")
        until(lambda g=group, p=params: not list_rows(base, "dev", [g], **p))
        out.add(sim, t0, time.monotonic(), c, obj)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="M")
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--revokes", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle-s", type=float, default=30.0, help="idle window for watcher CPU")
    ap.add_argument("--replicas", type=int, default=1, help="watcher processes sharing the fleet")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    server = start_redis_server()
    r = redis.Redis.from_url(server.url)
    with tempfile.TemporaryDirectory() as tmp:
        kc = Path(tmp) / "clusters"
        sim = KubeSim.start(preset_fleet(args.preset, args.seed), kubeconfig_dir=kc)
        sim.warm()
        # This process now holds kubesim's fleet (1.5 M objects at L): left to the collector, a
        # full collection here pauses kubesim, and the latency probes with it, for seconds.
        gc.collect()
        gc.freeze()
        env = {**bench_env(server.url, 0), "FLEETSCOPE_CLUSTERS_DIR": str(kc)}
        metrics_ports = [free_port() for _ in range(args.replicas)]
        env["FLEETSCOPE_LOG_LEVEL"] = "INFO"  # to their own files: see the warnings below
        watchers: list[subprocess.Popen[bytes]] = []
        logs: list[Path] = []  # each replica's log, its warnings shown at the end
        for i in range(args.replicas):
            cmd = [sys.executable, "-m", "fleetscope", "watch", "--name", f"bench{i}"]
            cmd += ["--reconcile"] if i == 0 else []
            log_path = Path(tmp) / f"bench{i}.log"
            with log_path.open("wb") as log_file:
                watchers.append(
                    subprocess.Popen(
                        cmd,
                        cwd=ROOT,
                        env={**env, "FLEETSCOPE_WATCH_METRICS_PORT": str(metrics_ports[i])},
                        stdout=log_file,
                        stderr=log_file,
                    )
                )
            logs.append(log_path)

        def stats() -> list[dict[str, Any]]:
            counts = held(r, sim.clusters)
            return [
                {
                    "replica": f"bench{i}",
                    "clusters": counts.get(f"bench{i}", 0),
                    **proc_stats(w.pid),
                }
                for i, w in enumerate(watchers)
            ]

        try:
            build_s = wait_ready(r, sim.clusters, 900)
            settle_s = wait_shared(r, sim.clusters, args.replicas, 300)
            after_build = stats()
            objects = sum(s.objects for s in syncstatus.read_all(r, sim.clusters).values())
            idle0 = [proc_stats(w.pid)["cpu_s"] for w in watchers]
            time.sleep(args.idle_s)  # an idle window: bookmarks and lease ticks only
            idle_cpu_pct = [
                round(100 * (proc_stats(w.pid)["cpu_s"] - c0) / args.idle_s, 1)
                for w, c0 in zip(watchers, idle0, strict=True)
            ]
            with gunicorn("query.wsgi:app", server.url, "/healthz") as base:
                t0 = time.monotonic()
                cpu0 = [proc_stats(w.pid)["cpu_s"] for w in watchers]
                lag0 = lag_buckets(metrics_ports)
                changes = object_changes(sim, base, args.changes, rnd)
                writer_lag = lag_summary(lag0, lag_buckets(metrics_ports))
                revokes = revocations(sim, base, args.revokes, rnd)
                steady_s = time.monotonic() - t0
                steady = stats()
                for st, c0 in zip(steady, cpu0, strict=True):
                    st["cpu_s_during"] = round(st["cpu_s"] - c0, 2)
        finally:
            for w in watchers:
                w.terminate()
            for w in watchers:
                w.wait(60)
            for i, path in enumerate(logs):
                warnings = [ln for ln in path.read_text().splitlines() if " WARNING " in ln]
                print(f"bench{i}: {len(warnings)} warnings", file=sys.stderr)
                for ln in warnings[:40]:
                    print(f"  {ln}", file=sys.stderr)
                if os.environ.get("BENCH_KEEP_LOGS"):
                    shutil.copy(path, os.environ["BENCH_KEEP_LOGS"] + f".bench{i}.log")
            sim.stop()
            server.stop()
    print(
        json.dumps(
            {
                "benchmark": "watch_latency",
                "preset": args.preset,
                "clusters": len(sim.clusters),
                "rows": objects,
                "replicas": args.replicas,
                "initial_build_s": round(build_s, 1),
                "shares_settled_s": round(settle_s, 1),
                "watchers_after_build": after_build,
                "watchers_idle_cpu_percent": idle_cpu_pct,
                "bookmark_interval_s": sim.bookmark_interval_s,
                "change_visible_s": changes.report(),
                "watcher_arrival_to_committed_s": writer_lag,
                "revoke_effective_s": revokes.report(),
                "watchers_steady": steady,
                "steady_seconds": round(steady_s, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
