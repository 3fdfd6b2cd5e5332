"""Benchmark: the same list page answered by asking every leaf cluster (the approach fleetscope
replaces) and by fleetscope, at fleet M.

    ./dev bench fanout [--preset M] [--threads 16] [--runs 3]

Fan-out: `fleetscope kubesim --preset M --warm` in its own process; the official `kubernetes`
client lists every Flux/Istio kind on every cluster (pages of 500, impersonating a cluster
admin, `--threads` clusters at once), normalizes rows with common.index.rows, sorts and cuts the
first page of 50. fleetscope: the fleet loaded into Redis (bench.fleetload), the query service
under gunicorn, the same page requested one at a time. Both answers must hold the same rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes
import requests

from bench import report
from bench.collection import start_kubesim
from bench.fleetload import load_fleet
from bench.services import gunicorn
from common.index import rows
from common.kinds.registry import builtin_registry
from common.redis_server import start_redis_server
from kubesim.catalog import Catalog

USER, GROUP, LIMIT = "admin-0", "fleet-admins", 50


def kinds() -> list[tuple[Any, str, str, str]]:
    """(registry kind, group, version, plural) of every kind kubesim serves."""
    registry = builtin_registry()
    out = []
    for res in Catalog.default():
        kind = registry.by_resource(res.group, res.plural)
        if kind is not None:
            out.append((kind, res.group, res.version, res.plural))
    return out


def list_cluster(path: Path, served: list[tuple[Any, str, str, str]]) -> tuple[list[Any], int]:
    """Every row of one cluster, listed as the caller (impersonated); and the request count."""
    api = kubernetes.config.new_client_from_config(config_file=str(path))
    api.set_default_header("Impersonate-User", USER)
    api.set_default_header("Impersonate-Group", GROUP)
    custom = kubernetes.client.CustomObjectsApi(api)
    out, calls = [], 0
    for kind, group, version, plural in served:
        token = None
        while True:
            kw = {"limit": 500, **({"_continue": token} if token else {})}
            page = custom.list_cluster_custom_object(group, version, plural, **kw)
            calls += 1
            for obj in page["items"]:
                out.append(rows.build_row(path.stem, kind, f"{group}/{version}", obj))
            token = page["metadata"].get("continue")
            if not token:
                break
    api.close()
    return out, calls


def fan_out(kube_dir: str, threads: int) -> tuple[list[Any], float, int]:
    served = kinds()
    paths = sorted(Path(kube_dir).glob("*.yaml"))
    started = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda p: list_cluster(p, served), paths))
    every = [row for part, _ in parts for row in part]
    every.sort(key=lambda x: (x["cluster"], *rows.sort_key(x["namespace"], x["kind"], x["name"])))
    page = every[:LIMIT]
    return page, time.monotonic() - started, sum(calls for _, calls in parts)


def fleetscope_page(base: str, runs: int) -> tuple[list[Any], list[float]]:
    s = requests.Session()
    s.trust_env = False
    headers = {"X-Remote-User": USER, "X-Remote-Group": GROUP}
    times, items = [], []
    for _ in range(runs):
        t = time.perf_counter()
        body = s.get(f"{base}/api/v1/objects", params={"limit": LIMIT}, headers=headers).json()
        times.append(time.perf_counter() - t)
        items = body["items"]
    return items, times


def identities(page: list[Any]) -> list[tuple[str, str, str, str]]:
    return [(x["cluster"], x["namespace"], x["kind"], x["name"]) for x in page]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="M")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    os.environ.pop("REQUESTS_CA_BUNDLE", None)  # kubeconfigs carry kubesim's CA
    with tempfile.TemporaryDirectory() as tmp:
        kube_dir = os.path.join(tmp, "clusters")
        sim = start_kubesim(args.preset, args.seed, kube_dir)
        try:
            fan = [fan_out(kube_dir, args.threads) for _ in range(args.runs)]
        finally:
            sim.terminate()
            sim.wait(30)
    server = start_redis_server()
    try:
        loaded = load_fleet(server.url, args.preset, args.seed)
        with gunicorn("query.wsgi:app", server.url, "/healthz") as base:
            fleetscope_page(base, 5)  # warm: scripts loaded, access cached
            ours, times = fleetscope_page(base, 50)
    finally:
        server.stop()
    same = identities(ours) == identities(fan[-1][0])
    fan_s = statistics.median(f[1] for f in fan)
    ours_ms = statistics.median(times) * 1000
    res = {
        "benchmark": "fanout",
        "preset": args.preset,
        **loaded,
        "fanout_median_s": round(fan_s, 2),
        "fanout_requests": fan[-1][2],
        "fleetscope_median_ms": round(ours_ms, 2),
        "fleetscope_p99_ms": round(sorted(times)[int(len(times) * 0.99) - 1] * 1000, 2),
        "ratio": round(fan_s * 1000 / ours_ms),
        "same_rows": same,
        "load_avg": report.load_average(),
    }
    report.record(
        f"fan-out baseline: first page of 50 at fleet {args.preset}, cluster admin",
        res,
        ("approach", "requests to answer", "median latency", "ratio", "same rows"),
        [
            (
                f"ask every leaf (kubernetes client, {args.threads} threads)",
                f"{res['fanout_requests']} leaf API calls",
                f"**{res['fanout_median_s']} s**",
                f"**{res['ratio']}x** slower",
                "",
            ),
            (
                "fleetscope (one HTTP request, Redis)",
                "1",
                f"**{res['fleetscope_median_ms']} ms**",
                "1",
                "yes" if same else "NO",
            ),
        ],
        notes=f"Fan-out: median of {args.runs} runs; fleetscope: median of 50 sequential "
        f"requests; load average {res['load_avg']}.",
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
