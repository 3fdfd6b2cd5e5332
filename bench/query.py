"""Benchmark: list-page latency and throughput of the query service at a fleet (default L).

    ./dev bench query [--preset L] [--seconds 10] [--slices 10] [--connections 16] [--redis-url URL]

Loads the fleet into a private redis-server (bench.fleetload; or reuses `--redis-url` when it
already holds one), serves the query service and a one-Redis-GET Flask endpoint under gunicorn
with the production defaults (`query/gunicorn_conf.py`), and drives each profile with wrk at 16
keep-alive connections. Reports p50/p99 and req/s per profile, the ratio to the one-GET
endpoint, and Redis commands per request (INFO commandstats, scripts' inner calls included).
Targets (design.md): p99 <= 25 ms (name filter <= 100 ms), throughput >= 0.5 x one-GET; and
(issue #22) p99 <= 2 x the one-GET p99. Each profile and the one-GET endpoint are measured in
alternating slices (`--slices`, default 10), so both see the same stretches of a drifting machine.

Under writes (issue #38): `--churn-model steady` (20 status transitions a second plus 500
status-unchanged updates) or `storm` (100 transitions a second), written through the watcher's
writer while every profile runs (bench.churn states the models); each profile then also reports
the p99 of the first request after a write (a probe asks it right after each write), and with
`--compare-still` each profile is measured still first, then under the writes, in the same run
(its ratio under writes against its still ratio). `--churn N [--churn-rows]`: the older models.

Label selectors (issue #40): `label_profiles`. Besides the list pages: `/api/v1/facets` for the cluster admin, the team member and the
single-namespace user, and the web view's page (its list call and its facets call, asked in
turn by each connection) for the team member, measured per pair (see `measure_profile`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import redis
import requests

from bench import churn, loadgen, report
from bench.fleetload import load_fleet
from bench.ref_app import KEY as REF_KEY
from bench.services import gunicorn
from common import redis_client
from common.index import keys
from common.redis_client import text
from common.redis_server import start_redis_server

QUERY_APP, REF_APP = "query.wsgi:app", "bench.ref_app:app"
P99_MS, NAME_P99_MS, RATIO = 25.0, 100.0, 0.5
SLICES = 10  # each profile and its one-GET reference: 10 alternating runs of seconds/10
P99_VS_ONE_GET = 2.0  # p99 <= 2 x the one-GET p99 measured interleaved with it (issue #22)
ADMIN = ("admin-0", ("fleet-admins",))
TEAM = ("dev-team-00", ("team-00",))
SOLO = ("solo", ())
FACETS = "/api/v1/facets"
GROUPS = "/api/v1/groups"
NEWEST = "sort=-lastTransitionTime"
NAME_SUBSTRING = "vm"  # WorkloadEntry `vm`: in ~1% of namespaces, ~0.3% of rows


@dataclass(frozen=True)
class Profile:
    name: str
    user: str
    groups: tuple[str, ...]
    query: str
    p99_target_ms: float = P99_MS
    path: str = "/api/v1/objects"
    also: tuple[str, ...] = ()
    """Further requests ("path?query") each connection asks in turn after this one: the profile
    is then measured per cycle (the web view's page: its list call, then its facets call)."""
    walk: int = 0
    """Group pages walked before this one: its continue token is taken by walking them right
    before the profile is measured (`renewed`), so the walk began seconds before, as a user's
    next pages follow the first. A token taken once at the start of the run would be as old as
    the run: on every page after the first, the groups that transitioned since the walk began
    are looked up and skipped, so under writes its cost would grow with the profiles measured
    before it."""

    def renewed(self, base: str) -> Profile:
        """This profile with a continue token taken now (`walk`); itself when it has none."""
        if not self.walk:
            return self
        token = groups_token(base, self.walk)
        return dataclasses.replace(self, query="limit=50&continue=" + urllib.parse.quote(token))

    def urls(self, base: str) -> list[str]:
        first = f"{base}{self.path}" + (f"?{self.query}" if self.query else "")
        return [first, *(f"{base}{u}" for u in self.also)]

    def headers(self) -> dict[str, str]:
        h = {"X-Remote-User": self.user}
        if self.groups:
            h["X-Remote-Group"] = ",".join(self.groups)
        return h


def profiles(deep_token: str, related: str = "", groups_token: str = "") -> list[Profile]:
    """The list profiles, then (with `related`, an object's path) its relations at depth 1
    and 3; with `groups_token`, the group walk's third page too."""
    deep = "limit=50&continue=" + urllib.parse.quote(deep_token)
    grouped = [
        Profile("groups by object (admin)", *ADMIN, "limit=50", path=GROUPS),
        Profile(
            "groups by object, status=unhealthy (admin)",
            *ADMIN,
            "limit=50&status=unhealthy",
            path=GROUPS,
        ),
        Profile("groups by object (team member)", *TEAM, "limit=50", path=GROUPS),
        Profile("groups by namespace (admin)", *ADMIN, "limit=50&by=namespace", path=GROUPS),
        Profile("groups by namespace (team member)", *TEAM, "limit=50&by=namespace", path=GROUPS),
        *drift_profiles(),
    ]
    if groups_token:
        third = "limit=50&continue=" + urllib.parse.quote(groups_token)
        grouped.append(
            Profile("groups by object, third page (admin)", *ADMIN, third, path=GROUPS, walk=2)
        )
    relations = [
        Profile(f"relations depth={d} (admin)", *ADMIN, f"depth={d}", P99_MS, related)
        for d in (1, 3)
    ]
    return [
        Profile("cluster admin", *ADMIN, "limit=50"),
        Profile("team member (~1% of namespaces)", *TEAM, "limit=50"),
        Profile("single-namespace user", *SOLO, "limit=50"),
        Profile("status=unhealthy (admin)", *ADMIN, "limit=50&status=unhealthy"),
        Profile(
            f"name~{NAME_SUBSTRING} (admin)",
            *ADMIN,
            f"limit=50&name={NAME_SUBSTRING}",
            NAME_P99_MS,
        ),
        Profile("deep page, 10,000 rows in (admin)", *ADMIN, deep),
        Profile("team member + status=unhealthy", *TEAM, "limit=50&status=unhealthy"),
        Profile("team member + kind=HelmRelease", *TEAM, "limit=50&kind=HelmRelease"),
        Profile("single-namespace user + status=unhealthy", *SOLO, "limit=50&status=unhealthy"),
        Profile("newest first (admin)", *ADMIN, f"limit=50&{NEWEST}"),
        Profile(
            "newest first, status=unhealthy (admin)", *ADMIN, f"limit=50&{NEWEST}&status=unhealthy"
        ),
        Profile("newest first (team member)", *TEAM, f"limit=50&{NEWEST}"),
        Profile(
            "newest first, team member + status=unhealthy",
            *TEAM,
            f"limit=50&{NEWEST}&status=unhealthy",
        ),
        Profile("oldest first (single-namespace user)", *SOLO, "limit=50&sort=lastTransitionTime"),
        *label_profiles(),
        *grouped,
        Profile("facets (cluster admin)", *ADMIN, "", path=FACETS),
        Profile("facets (team member)", *TEAM, "", path=FACETS),
        Profile("facets (single-namespace user)", *SOLO, "", path=FACETS),
        Profile("group facets by object (admin)", *ADMIN, "by=object", path=FACETS),
        Profile("group facets by object (team member)", *TEAM, "by=object", path=FACETS),
        Profile("group facets by namespace (admin)", *ADMIN, "by=namespace", path=FACETS),
        Profile("group facets by namespace (team member)", *TEAM, "by=namespace", path=FACETS),
        page_view("page view: list + facets (team member, per pair)", *TEAM),
        *(relations if related else []),
    ]


def drift_profiles() -> list[Profile]:
    """Version drift (issue #40): which HelmReleases run two or more chart versions."""
    query = "limit=50&kind=HelmRelease&drift=true"
    return [
        Profile(f"drift: {who}", user, groups, query, path=GROUPS)
        for who, (user, groups) in (
            ("groups by object, kind=HelmRelease, drift=true (admin)", ADMIN),
            ("groups by object, kind=HelmRelease, drift=true (team member)", TEAM),
        )
    ]


def label_profiles() -> list[Profile]:
    """`labelSelector` on lists (issue #40: >= 0.5 x the one-GET reference): a broad selector
    (~40% of rows: Flux objects), a selective one (about 1 row in 12: one version of one
    component), set-based for a team member, and label-value facets."""

    def sel(text: str) -> str:
        return "labelSelector=" + urllib.parse.quote(text, safe="")

    broad = sel("app.kubernetes.io/component=gitops")
    narrow = sel("app.kubernetes.io/component=mesh,app.kubernetes.io/version=1.3.2")
    team = sel("app.kubernetes.io/component in (mesh,gateway),!helm.toolkit.fluxcd.io/name")
    return [
        Profile("label selector, broad (admin)", *ADMIN, f"limit=50&{broad}"),
        Profile("label selector, selective (admin)", *ADMIN, f"limit=50&{narrow}"),
        Profile("label selector, set-based (team member)", *TEAM, f"limit=50&{team}"),
        Profile("label selector, newest first (team member)", *TEAM, f"limit=50&{team}&{NEWEST}"),
        Profile(
            "facets labelKeys=version (team member)",
            *TEAM,
            "labelKeys=app.kubernetes.io/version",
            path=FACETS,
        ),
    ]


def page_view(name: str, user: str, groups: tuple[str, ...], query: str = "") -> Profile:
    """The web view's page: the first page of 50 with `query`'s filters, then the facets of
    the same filters (list.js asks both for every page it shows); its absolute p99 target is
    two requests' (2 x 25 ms)."""
    listing = "&".join(x for x in ("limit=50", query) if x)
    facets = FACETS + (f"?{query}" if query else "")
    return Profile(name, user, groups, listing, 2 * P99_MS, also=(facets,))


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


def groups_token(base: str, pages: int = 2) -> str:
    """The continue token `pages` pages of 50 into the admin's groups."""
    headers = Profile("", *ADMIN, "").headers()
    token = ""
    for _ in range(pages):
        params = {"limit": "50", **({"continue": token} if token else {})}
        body = requests.get(f"{base}{GROUPS}", params=params, headers=headers).json()
        token = body["continue"]
    return str(token)


def commandstats(r: redis.Redis) -> dict[str, int]:
    """Calls per command since the last `reset_stats`, summed over a cluster's primaries."""
    if not redis_client.is_cluster(r):
        stats = [r.info("commandstats")]
    else:
        stats = list(r.info("commandstats", target_nodes="primaries").values())
    out: dict[str, int] = {}
    for s in stats:
        for k, v in s.items():
            name = k.removeprefix("cmdstat_")
            out[name] = out.get(name, 0) + int(v["calls"])
    return out


def reset_stats(r: redis.Redis) -> None:
    if redis_client.is_cluster(r):
        r.config_resetstat(target_nodes="primaries")
    else:
        r.config_resetstat()


def worker_cpu_s(app: str) -> float:
    """CPU seconds used so far by the gunicorn processes serving `app` (master and workers)."""
    pids = subprocess.run(["pgrep", "-f", app], capture_output=True, text=True).stdout.split()
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def check(urls: Sequence[str], headers: dict[str, str]) -> Any:
    """The first URL's body, after each URL answered 2xx (a profile never measures errors)."""
    bodies = []
    for u in urls:
        resp = requests.get(u, headers=headers, timeout=30)
        resp.raise_for_status()
        bodies.append(resp.json())
    return bodies[0]


def measure_slice(
    r: redis.Redis,
    urls: Sequence[str],
    headers: dict[str, str],
    seconds: float,
    args: Any,
    app: str,
) -> dict[str, Any]:
    """One load run on `urls` (asked in turn when several: then `requests`, `rps`, latencies
    and Redis commands are per cycle), with the server's CPU and Redis commands per request."""
    reset_stats(r)
    cpu = worker_cpu_s(app)
    res = loadgen.run_cycles(urls, headers, seconds, args.connections)
    # the steadier measure on a shared machine: the server's CPU per request
    res["cpu_s"] = worker_cpu_s(app) - cpu
    stats = commandstats(r)
    stats.pop("info", None)
    stats.pop("config|resetstat", None)
    res["redis_cmds"] = sum(stats.values())
    res["evalsha"] = stats.get("evalsha", 0)
    return res


def combined(parts: Sequence[dict[str, Any]], body: Any, urls: Sequence[str]) -> dict[str, Any]:
    """The slices of one side as one result (`loadgen.merge`), with its per-request columns."""
    res = loadgen.merge(parts)
    res.pop("quantiles_ms")
    n = max(1, res["requests"])
    res["cpu_ms_per_req"] = round(sum(p["cpu_s"] for p in parts) * 1e3 / n, 3)
    res["redis_cmds_per_req"] = round(sum(p["redis_cmds"] for p in parts) / n, 1)
    res["evalsha_per_req"] = round(sum(p["evalsha"] for p in parts) / n, 2)
    if len(urls) == 1:
        res.pop("http_requests", None)
    res["items"] = len(body.get("items", [])) if isinstance(body, dict) else 0
    if isinstance(body, dict) and "items" not in body and "total" in body:
        res["counted"] = body["total"]
    res["load_avg"] = report.load_average()
    return res


def measure_profile(
    r: redis.Redis, base: str, ref: str, p: Profile, args: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`p` and the one-GET reference, measured in turn in `args.slices` alternating slices of
    `args.seconds / args.slices` each: the machine's speed drifts (it is shared, and a
    virtual one), so both sides of each ratio see the same stretches of it. Returns (profile
    result, reference).

    A profile of n requests asked in turn (a page view: n = 2) is measured per cycle and
    compared with n one-GETs: ratio = cycles/s / (one-GET req/s / n), p99 bar = 2 x n x the
    one-GET p99 (a cycle is n requests one after the other)."""
    p = p.renewed(base)
    ref_urls, urls, headers = [f"{ref}/ref"], p.urls(base), p.headers()
    ref_body, body = check(ref_urls, {}), check(urls, headers)
    loadgen.run_cycles(ref_urls, {}, args.warmup, args.connections)
    loadgen.run_cycles(urls, headers, args.warmup, args.connections)
    slices = max(1, args.slices)
    secs = args.seconds / slices
    ref_parts, parts = [], []
    probe = getattr(args, "probe", None)
    for _ in range(slices):
        ref_parts.append(measure_slice(r, ref_urls, {}, secs, args, REF_APP))
        if probe is not None:  # the first request after each write, while the profile runs
            probe.aim(urls[0], headers)
        parts.append(measure_slice(r, urls, headers, secs, args, QUERY_APP))
        if probe is not None:
            probe.aim(None)
    one_get, res = combined(ref_parts, ref_body, ref_urls), combined(parts, body, urls)
    n = len(urls)
    if one_get["cpu_ms_per_req"] and res["cpu_ms_per_req"]:
        res["cpu_ratio"] = round(one_get["cpu_ms_per_req"] * n / res["cpu_ms_per_req"], 2)
    res["per"] = "request" if n == 1 else f"cycle of {n}"
    res["ratio_to_one_get"] = round(res["rps"] * n / one_get["rps"], 2)
    res["one_get_rps"] = one_get["rps"]
    res["one_get_p99_ms"] = one_get["p99_ms"]
    res["p99_bar_ms"] = round(P99_VS_ONE_GET * n * one_get["p99_ms"], 2)
    return {"profile": p.name, "p99_target_ms": p.p99_target_ms, **res}, one_get


def measure_churned(
    r: redis.Redis, base: str, ref: str, p: Profile, args: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`measure_profile` under the run's writes, with the latency of the first request after a
    write (the probe's, while the profile's slices run) and, with `--compare-still`, the same
    profile measured on a still fleet just before."""
    writes: churn.Churn | None = getattr(args, "churner", None)
    if writes is None:
        return measure_profile(r, base, ref, p, args)
    still = None
    if args.compare_still:
        writes.active.clear()
        still, _ = measure_profile(r, base, ref, p, args)
        writes.active.set()
    args.probe = writes.probe
    writes.probe.reset()
    done, t0 = writes.done(), time.monotonic()
    try:
        res, one_get = measure_profile(r, base, ref, p, args)
    finally:
        args.probe = None
    secs = time.monotonic() - t0
    made = [round((b - a) / secs, 1) for a, b in zip(done, writes.done(), strict=True)]
    res["churn_model"] = writes.model.name
    res["write_rates"] = {"transitions": made[0], "updates": made[1]}
    res.update(writes.probe.p99s())
    if still is not None:
        res["still_ratio"] = still["ratio_to_one_get"]
        res["still_p99_ms"] = still["p99_ms"]
        if still["ratio_to_one_get"]:
            res["vs_still"] = round(res["ratio_to_one_get"] / still["ratio_to_one_get"], 2)
    return res, one_get


def run_profiles(
    r: redis.Redis, base: str, ref: str, chosen: Sequence[Profile], args: Any
) -> list[dict[str, Any]]:
    """Each of `chosen` (those `args.profiles` names by prefix, all without it) after its
    one-GET run, then the best one-GET run as the reference row."""
    results, refs = [], []
    for p in chosen:
        if args.profiles and not any(p.name.startswith(x) for x in args.profiles):
            continue
        try:
            res, one_get = measure_churned(r, base, ref, p, args)
        except requests.HTTPError as e:  # recorded, and the next profiles still run
            results.append({"profile": p.name, "failed": str(e)})
            print(results[-1], flush=True)
            continue
        refs.append(one_get)
        results.append(res)
        print(results[-1], flush=True)
    if refs:
        best = max(refs, key=lambda x: x["rps"])
        results.append(
            {"profile": "reference: one Redis GET (best run)", "p99_target_ms": None, **best}
        )
    return results


@contextmanager
def served(redis_url: str) -> Iterator[tuple[redis.Redis, str, str]]:
    """The query service and the one-GET reference app under gunicorn on `redis_url`: yields
    (Redis client, query base URL, reference base URL)."""
    r = redis_client.connect(redis_url)
    r.set(REF_KEY, "x" * 100)
    with (
        gunicorn(QUERY_APP, redis_url, "/healthz") as base,
        gunicorn(REF_APP, redis_url, "/ref") as ref,
    ):
        yield r, base, ref


def run(args: Any, redis_url: str) -> list[dict[str, Any]]:
    """Every profile, each interleaved with one-GET reference runs (`measure_profile`), under
    the churn model asked for (bench.churn), if any."""
    model = churn.model_of(args)
    writes = churn.Churn(redis_url, model) if model is not None else None
    with served(redis_url) as (r, base, ref), writes or nullcontext():
        if writes is not None:
            writes.active.clear()  # still while the tokens are walked
        token = deep_token(base)
        walked = profiles(token, related_object(base), groups_token(base))
        args.churner = writes
        if writes is not None:
            writes.active.set()
        return run_profiles(r, base, ref, walked, args)


def verdict(res: dict[str, Any]) -> str:
    """Issue #22's bar: "yes" when the ratio to one-GET is >= 0.5 and p99 <= the bar."""
    if "p99_bar_ms" not in res:
        return ""
    met = res["ratio_to_one_get"] >= RATIO and res["p99_ms"] <= res["p99_bar_ms"]
    return "yes" if met else "NO"


def rows_cell(res: dict[str, Any]) -> Any:
    """The rows a profile's (first) request answers; for facets, the rows they count."""
    return f"({res['counted']} counted)" if "counted" in res else res["items"]


def preloaded(url: str) -> dict[str, Any]:
    r = redis_client.connect(url)
    clusters = [text(c) for c in r.hkeys(keys.CLUSTERS)]
    return {"clusters": len(clusters), "rows": sum(int(r.zcard(keys.rows(c))) for c in clusters)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="L")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument(
        "--slices", type=int, default=SLICES, help="alternating profile/one-GET runs per profile"
    )
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--redis-url", default="", help="a Redis already holding the fleet")
    ap.add_argument(
        "--profile", dest="profiles", action="append", help="only profiles named so (prefix)"
    )
    ap.add_argument("--no-doc", action="store_true", help="print only; do not append the table")
    ap.add_argument(
        "--churn",
        type=float,
        default=0.0,
        help="writes per second across the fleet during the run (generations raised at random)",
    )
    ap.add_argument(
        "--churn-rows",
        action="store_true",
        help="with --churn: each write is a real row transition through the writer",
    )
    ap.add_argument(
        "--churn-model",
        choices=sorted(churn.MODELS),
        help="writes through the watcher's writer during the run (bench.churn): steady = 20 "
        "transitions/s + 500 status-unchanged updates/s, storm = 100 transitions/s",
    )
    ap.add_argument(
        "--compare-still",
        action="store_true",
        help="with a churn model: measure each profile still, then under the writes",
    )
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


PAIR_NOTE = (
    "A page view (list + facets) is measured per pair: each connection asks the list, then the "
    "facets, then the list again; req/s, p50/p99 and Redis cmds are per pair, and it is "
    "compared with two one-GETs: x one-GET = pairs/s / (one-GET req/s / 2), and its p99 bar is "
    "2 x (2 x the one-GET p99). Facets rows: the rows the counts cover."
)


def tool(results: list[dict[str, Any]]) -> str:
    return "/".join(sorted({str(res.get("tool", "?")) for res in results})) or "?"


MEASURED = (
    "profile",
    "rows",
    "p50 ms",
    "p99 ms",
    "req/s",
    "one-GET req/s (interleaved)",
    "x one-GET",
    "server CPU ms/req",
    "x one-GET by CPU",
    "Redis cmds/req",
)
"""The columns every load-benchmark table starts with (`measured` gives a result's cells)."""


def measured(res: dict[str, Any]) -> tuple[Any, ...]:
    return (
        res["profile"],
        rows_cell(res),
        res["p50_ms"],
        f"**{res['p99_ms']}**",
        f"**{res['rps']}**",
        res.get("one_get_rps", ""),
        res.get("ratio_to_one_get", ""),
        res.get("cpu_ms_per_req", ""),
        res.get("cpu_ratio", ""),
        res["redis_cmds_per_req"],
    )


CHURNED = (
    "first after a transition: p99 ms (n)",
    "first after an update: p99 ms (n)",
    "still x one-GET",
    "x still",
    "writes/s",
)
"""Further columns under a churn model (bench.churn): the probe's and `--compare-still`'s."""


def churned(res: dict[str, Any]) -> tuple[Any, ...]:
    def probe(kind: str) -> str:
        got = res.get(f"after_{kind}_p99_ms")
        return "" if got is None else f"{got} ({res[f'after_{kind}_n']})"

    rates = ", ".join(f"{k} {v:g}" for k, v in res.get("write_rates", {}).items())
    return (
        probe("transition"),
        probe("update"),
        res.get("still_ratio", ""),
        res.get("vs_still", ""),
        rates,
    )


def write(args: Any, loaded: dict[str, Any], results: list[dict[str, Any]], secs: float) -> None:
    model = churn.model_of(args) if args.churn_model else None
    rows: list[tuple[Any, ...]] = []
    width = len(MEASURED) + 4 + (len(CHURNED) if model is not None else 0)
    for res in results:
        if "failed" in res:
            rows.append((res["profile"], f"failed: {res['failed']}", *[""] * (width - 2)))
            continue
        target = res["p99_target_ms"]
        ok = "" if target is None else ("yes" if res["p99_ms"] <= target else "NO")
        ratio = res.get("ratio_to_one_get", "")
        if ratio != "":
            ok += " / " + ("yes" if ratio >= RATIO else "NO")
            ok += " / " + ("yes" if res["p99_ms"] <= res["p99_bar_ms"] else "NO")
        rows.append(
            (
                *measured(res),
                res["evalsha_per_req"],
                res["errors"],
                res["load_avg"].split()[0],
                ok,
                *(churned(res) if model is not None else ()),
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
            *MEASURED,
            "EVALSHA/req",
            "errors",
            "load 1m",
            "ok: p99 target / ratio >= 0.5 / p99 <= 2x one-GET p99",
            *(CHURNED if model is not None else ()),
        ),
        rows,
        notes=f"{args.connections} connections ({tool(results)}), {args.seconds:g} s per "
        f"profile after {args.warmup:g} s warm-up; gunicorn workers {workers}, gthread; rows "
        f"loaded: {loaded.get('rows', 'preloaded')}. {PAIR_NOTE}",
        write_doc=not args.no_doc,
    )


if __name__ == "__main__":
    main()
