"""Benchmark: list-page latency and throughput of the query service at a fleet (default L).

    ./dev bench query [--preset L] [--seconds 10] [--connections 16] [--redis-url URL]

Loads the fleet into a private redis-server (bench.fleetload; or reuses `--redis-url` when it
already holds one), serves the query service and a one-Redis-GET Flask endpoint under gunicorn
with the production defaults (`query/gunicorn_conf.py`), and drives each profile with wrk at 16
keep-alive connections. Reports p50/p99 and req/s per profile, the ratio to the one-GET
endpoint, and Redis commands per request (INFO commandstats, scripts' inner calls included).
Targets (design.md): p99 <= 25 ms (name filter <= 100 ms), throughput >= 0.5 x one-GET.
"""

from __future__ import annotations

import argparse
import os
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import redis
import requests

from bench import loadgen, report
from bench.fleetload import load_fleet
from bench.ref_app import KEY as REF_KEY
from bench.services import gunicorn
from common.index import keys
from common.redis_server import start_redis_server

P99_MS, NAME_P99_MS, RATIO = 25.0, 100.0, 0.5
ADMIN = ("admin-0", ("fleet-admins",))
NAME_SUBSTRING = "vm"  # WorkloadEntry `vm`: in ~1% of namespaces, ~0.3% of rows


@dataclass(frozen=True)
class Profile:
    name: str
    user: str
    groups: tuple[str, ...]
    query: str
    p99_target_ms: float = P99_MS
    path: str = "/api/v1/objects"

    def headers(self) -> dict[str, str]:
        h = {"X-Remote-User": self.user}
        if self.groups:
            h["X-Remote-Group"] = ",".join(self.groups)
        return h


def profiles(deep_token: str, related: str = "") -> list[Profile]:
    """The list profiles, then (with `related`, an object's path) its relations at depth 1
    and 3."""
    deep = "limit=50&continue=" + urllib.parse.quote(deep_token)
    relations = [
        Profile(f"relations depth={d} (admin)", *ADMIN, f"depth={d}", P99_MS, related)
        for d in (1, 3)
    ]
    return [
        Profile("cluster admin", *ADMIN, "limit=50"),
        Profile("team member (~1% of namespaces)", "dev-team-00", ("team-00",), "limit=50"),
        Profile("single-namespace user", "solo", (), "limit=50"),
        Profile("status=unhealthy (admin)", *ADMIN, "limit=50&status=unhealthy"),
        Profile(
            f"name~{NAME_SUBSTRING} (admin)",
            *ADMIN,
            f"limit=50&name={NAME_SUBSTRING}",
            NAME_P99_MS,
        ),
        Profile("deep page, 10,000 rows in (admin)", *ADMIN, deep),
        *(relations if related else []),
    ]


def related_object(base: str) -> str:
    """The relations path of a Kustomization with both upstream (its source) and downstream
    (the objects it manages): the first of the admin's list with both."""
    headers = Profile("", *ADMIN, "").headers()
    items = requests.get(
        f"{base}/api/v1/objects", params={"kind": "Kustomization", "limit": "100"}, headers=headers
    ).json()["items"]
    for row in items:
        path = "/".join(
            urllib.parse.quote(row[k] or "_", safe="")
            for k in ("cluster", "namespace", "kind", "name")
        )
        url = f"{base}/api/v1/objects/{path}/relations"
        body = requests.get(url, headers=headers).json()
        if body.get("upstream") and body.get("downstream"):
            return f"/api/v1/objects/{path}/relations"
    raise SystemExit("no Kustomization with upstream and downstream in the first 100")


def deep_token(base: str, rows_in: int = 10_000) -> str:
    """The continue token `rows_in` rows into the admin's list."""
    headers = Profile("", *ADMIN, "").headers()
    token, seen = "", 0
    while seen < rows_in:
        params = {"limit": str(min(500, rows_in - seen))}
        if token:
            params["continue"] = token
        body = requests.get(f"{base}/api/v1/objects", params=params, headers=headers).json()
        seen += len(body["items"])
        token = body["continue"]
    return str(token)


def commandstats(r: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()}


def measure(r: redis.Redis, url: str, headers: dict[str, str], args: Any) -> dict[str, Any]:
    check = requests.get(url, headers=headers, timeout=10)
    check.raise_for_status()
    body = check.json()
    loadgen.run(url, headers, args.warmup, args.connections)
    r.config_resetstat()
    res = loadgen.run(url, headers, args.seconds, args.connections)
    stats = commandstats(r)
    n = max(1, res["requests"])
    stats.pop("info", None)
    res["redis_cmds_per_req"] = round(sum(stats.values()) / n, 1)
    res["evalsha_per_req"] = round(stats.get("evalsha", 0) / n, 2)
    res["items"] = len(body.get("items", [])) if isinstance(body, dict) else 0
    res["load_avg"] = report.load_average()
    return res


def run(args: Any, redis_url: str) -> list[dict[str, Any]]:
    """Each profile right after a one-GET reference run: the machine's load drifts (it is
    shared), so each ratio compares two runs taken side by side."""
    r = redis.Redis.from_url(redis_url)
    r.set(REF_KEY, "x" * 100)
    results, refs = [], []
    with (
        gunicorn("query.wsgi:app", redis_url, "/healthz") as base,
        gunicorn("bench.ref_app:app", redis_url, "/ref") as ref,
    ):
        token = deep_token(base)
        for p in profiles(token, related_object(base)):
            if args.profiles and not any(p.name.startswith(x) for x in args.profiles):
                continue
            one_get = measure(r, f"{ref}/ref", {}, args)
            refs.append(one_get)
            res = measure(r, f"{base}{p.path}?{p.query}", p.headers(), args)
            res["ratio_to_one_get"] = round(res["rps"] / one_get["rps"], 2)
            res["one_get_rps"] = one_get["rps"]
            results.append({"profile": p.name, "p99_target_ms": p.p99_target_ms, **res})
            print(results[-1], flush=True)
    best = max(refs, key=lambda x: x["rps"])
    results.append(
        {"profile": "reference: one Redis GET (best run)", "p99_target_ms": None, **best}
    )
    return results


def preloaded(url: str) -> dict[str, Any]:
    r = redis.Redis.from_url(url)
    clusters = [c.decode() for c in r.hkeys(keys.CLUSTERS)]
    return {"clusters": len(clusters), "rows": sum(int(r.zcard(keys.rows(c))) for c in clusters)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="L")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--redis-url", default="", help="a Redis already holding the fleet")
    ap.add_argument(
        "--profile", dest="profiles", action="append", help="only profiles named so (prefix)"
    )
    ap.add_argument("--no-doc", action="store_true", help="print only; do not append the table")
    args = ap.parse_args()
    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        loaded = preloaded(url) if args.redis_url else load_fleet(url, args.preset, args.seed)
        print(loaded, flush=True)
        started = time.monotonic()
        results = run(args, url)
    finally:
        if server is not None:
            server.stop()
    write(args, loaded, results, time.monotonic() - started)


def write(args: Any, loaded: dict[str, Any], results: list[dict[str, Any]], secs: float) -> None:
    rows = []
    for res in results:
        target = res["p99_target_ms"]
        ok = "" if target is None else ("yes" if res["p99_ms"] <= target else "NO")
        ratio = res.get("ratio_to_one_get", "")
        if ratio != "":
            ok += " / " + ("yes" if ratio >= RATIO else "NO")
        rows.append(
            (
                res["profile"],
                res["items"],
                res["p50_ms"],
                f"**{res['p99_ms']}**",
                f"**{res['rps']}**",
                res.get("one_get_rps", ""),
                ratio,
                res["redis_cmds_per_req"],
                res["evalsha_per_req"],
                res["errors"],
                res["load_avg"].split()[0],
                ok,
            )
        )
    workers = os.environ.get("FLEETSCOPE_QUERY_WORKERS", "2 (default)")
    report.record(
        f"query: list pages at fleet {args.preset}",
        {
            "benchmark": "query",
            "preset": args.preset,
            "connections": args.connections,
            "seconds": args.seconds,
            **loaded,
            "results": results,
            "run_s": round(secs, 1),
        },
        (
            "profile",
            "rows",
            "p50 ms",
            "p99 ms",
            "req/s",
            "one-GET req/s (run just before)",
            "x one-GET",
            "Redis cmds/req",
            "EVALSHA/req",
            "errors",
            "load 1m",
            "p99 / ratio ok",
        ),
        rows,
        notes=f"{args.connections} connections (wrk), {args.seconds:g} s per profile after "
        f"{args.warmup:g} s warm-up; gunicorn workers {workers}, gthread; rows loaded: "
        f"{loaded.get('rows', 'preloaded')}.",
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
