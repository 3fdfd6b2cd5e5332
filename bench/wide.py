"""Benchmark (issue #22): lists, status filters and facets for a user bound in many namespaces.

    ./dev bench wide [--shape 10x2000|1x10000|both] [--seconds 10] [--slices 10] [--connections 16]
                     [--redis-url URL] [--profile PREFIX ...] [--no-doc]

Shapes: `10x2000` is 10 clusters x 2,000 namespaces with user `wide` bound by RoleBindings in
1,500 namespaces of every cluster; `1x10000` is 1 cluster x 10,000 namespaces with user
`wide10k` bound in all of them. Each namespace holds one Kustomization: ~5% Ready=False
(unhealthy), ~2% progressing, the rest Ready=True, drawn from `--seed`. Every cluster also has
a ClusterRole `flux-view` (get/list/watch on the Flux kinds, the rules of kubesim's role of that
name), which the RoleBindings grant, and ClusterRole `cluster-admin` bound to group
`fleet-admins` (the admin of bench.query).

Each shape is loaded into a private redis-server through the collector's own code (rows from
`common.index.rows.member`, `store.replace_rows`, `grants.compile_grants`/`store_grants`, as
bench.fleetload does), then the query service and the one-GET reference app are served under
gunicorn as bench.query serves them, and each profile is measured in slices alternating with
one-GET runs (bench.query.measure_profile):
the admin's first page, the wide user's first page, `status=unhealthy` and `/api/v1/facets`,
the same three with `kind=Kustomization`, and the web view's page (list call + facets call,
asked in turn by each connection) per pair. `--redis-url` uses a Redis that already holds the
shape (or loads it there when the Redis is empty); it takes a single `--shape`.
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis

from bench import report
from bench.fleetload import store_cluster
from bench.query import (
    ADMIN,
    FACETS,
    MEASURED,
    P99_VS_ONE_GET,
    PAIR_NOTE,
    RATIO,
    SLICES,
    Profile,
    measured,
    page_view,
    preloaded,
    run_profiles,
    served,
    tool,
    verdict,
)
from common.index import keys, rows
from common.kinds.registry import builtin_registry
from common.rbac.authorizer import RbacObjects
from common.redis_client import text
from common.redis_server import start_redis_server
from kubesim.catalog import Catalog
from kubesim.gen.rbac_objects import cluster_roles

UNHEALTHY, PROGRESSING = 0.05, 0.02  # shares of Kustomizations Ready=False / in progress
KUSTOMIZE = ("kustomize.toolkit.fluxcd.io", "kustomizations", "kustomize.toolkit.fluxcd.io/v1")
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_V1 = f"{RBAC_GROUP}/v1"
ROLE = "flux-view"
ADMIN_GROUP = ADMIN[1][0]
CREATED = "2025-01-06T09:00:00Z"
BUILD_FAILED = (
    "kustomize build failed: accumulating resources: 'deploy/base' must resolve to a file"
)


@dataclass(frozen=True)
class Shape:
    name: str
    clusters: int
    namespaces: int
    user: str
    bound: int  # namespaces per cluster the user's RoleBindings cover

    @property
    def prefix(self) -> str:
        return f"{self.user}-"

    def cluster_names(self) -> list[str]:
        return [f"{self.prefix}{i:02d}" for i in range(self.clusters)]

    def describe(self) -> str:
        return (
            f"{self.clusters} cluster{'s' * (self.clusters > 1)} x {self.namespaces:,} "
            f"namespaces, user `{self.user}` bound in {self.bound:,} namespaces per cluster"
        )


SHAPES = {
    "10x2000": Shape("10x2000", 10, 2000, "wide", 1500),
    "1x10000": Shape("1x10000", 1, 10000, "wide10k", 10000),
}


def namespace_names(shape: Shape) -> list[str]:
    return [f"app-{j:05d}" for j in range(shape.namespaces)]


def kustomization(namespace: str, rng: random.Random) -> dict[str, Any]:
    """The namespace's Kustomization `apps`, as the API lists it; its health drawn from `rng`."""
    revision = f"main@sha1:{rng.getrandbits(160):040x}"
    draw = rng.random()
    if draw < UNHEALTHY:
        conditions = [_condition("Ready", "False", "BuildFailed", BUILD_FAILED)]
    elif draw < UNHEALTHY + PROGRESSING:
        conditions = [
            _condition("Reconciling", "True", "Progressing", "Reconciliation in progress"),
            _condition("Ready", "Unknown", "Progressing", "Reconciliation in progress"),
        ]
    else:
        conditions = [
            _condition("Ready", "True", "ReconciliationSucceeded", f"Applied revision: {revision}")
        ]
    return {
        "apiVersion": KUSTOMIZE[2],
        "kind": "Kustomization",
        "metadata": {
            "name": "apps",
            "namespace": namespace,
            "uid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "resourceVersion": str(rng.randrange(10**6, 10**8)),
            "generation": 1,
            "creationTimestamp": CREATED,
            "labels": {"app.kubernetes.io/part-of": "apps"},
        },
        "spec": {
            "interval": "10m",
            "path": "./deploy",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "apps-repo"},
        },
        "status": {
            "observedGeneration": 1,
            "lastAppliedRevision": revision,
            "lastAttemptedRevision": revision,
            "conditions": conditions,
        },
    }


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": 1,
        "lastTransitionTime": CREATED,
    }


def _meta(name: str, namespace: str = "") -> dict[str, str]:
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


def _binding(kind: str, name: str, namespace: str, role: str, subject: tuple[str, str]) -> Any:
    return {
        "apiVersion": RBAC_V1,
        "kind": kind,
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": subject[0], "apiGroup": RBAC_GROUP, "name": subject[1]}],
    }


def rbac_objects(shape: Shape, bound: list[str]) -> RbacObjects:
    """ClusterRoles `cluster-admin` and `flux-view`, group `fleet-admins` bound to the first
    cluster-wide, and one RoleBinding of the user to `flux-view` in each of `bound`."""
    admin = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    flux_rules = cluster_roles(Catalog.default())[ROLE]["rules"]
    return RbacObjects(
        cluster_roles=[
            {"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": _meta(name), "rules": rules}
            for name, rules in (("cluster-admin", [admin]), (ROLE, flux_rules))
        ],
        cluster_role_bindings=[
            _binding("ClusterRoleBinding", ADMIN_GROUP, "", "cluster-admin", ("Group", ADMIN_GROUP))
        ],
        role_bindings=[
            _binding("RoleBinding", f"{shape.user}-{ROLE}", ns, ROLE, ("User", shape.user))
            for ns in bound
        ],
    )


def load_cluster(r: redis.Redis, shape: Shape, cluster: str, seed: int) -> dict[str, int]:
    """Build and store one cluster's rows and grants; its row and status counts."""
    kind = builtin_registry().by_resource(*KUSTOMIZE[:2])
    assert kind is not None
    rng = random.Random(f"{seed}/{shape.name}/{cluster}")
    names = namespace_names(shape)
    members = [rows.member(cluster, kind, KUSTOMIZE[2], kustomization(ns, rng)) for ns in names]
    bound = sorted(rng.sample(names, shape.bound))
    store_cluster(r, cluster, members, rbac_objects(shape, bound))
    counts = {"rows": len(members)}
    for m in members:
        status = rows.status_of(m)
        counts[status] = counts.get(status, 0) + 1
    return counts


def _worker(url: str, shape_name: str, seed: int, clusters: list[str]) -> dict[str, int]:
    r, shape = redis.Redis.from_url(url), SHAPES[shape_name]
    total: dict[str, int] = {}
    for cluster in clusters:
        for k, v in load_cluster(r, shape, cluster, seed).items():
            total[k] = total.get(k, 0) + v
    r.close()
    return total


def load_shape(url: str, shape: Shape, seed: int, processes: int = 0) -> dict[str, Any]:
    """Load every cluster of `shape` into the Redis at `url`, clusters spread over processes."""
    names = shape.cluster_names()
    procs = min(processes or os.cpu_count() or 1, len(names))
    started = time.monotonic()
    parts = [names[i::procs] for i in range(procs)]
    total: dict[str, int] = {}
    with ProcessPoolExecutor(procs) as pool:
        for part in pool.map(_worker, [url] * procs, [shape.name] * procs, [seed] * procs, parts):
            for k, v in part.items():
                total[k] = total.get(k, 0) + v
    redis.Redis.from_url(url).incr(keys.VERSION)
    return {"clusters": len(names), **total, "load_s": round(time.monotonic() - started, 1)}


def profiles(shape: Shape) -> list[Profile]:
    """The admin's first page, then the wide user's requests (first page, unhealthy, facets,
    each also with `kind=Kustomization`) and their page view (list + facets, per pair)."""
    wide = (shape.user, ())
    kind = "kind=Kustomization"
    return [
        Profile("admin first page", *ADMIN, "limit=50"),
        Profile("wide user, first page", *wide, "limit=50"),
        Profile("wide user, status=unhealthy", *wide, "limit=50&status=unhealthy"),
        Profile("wide user, facets", *wide, "", path=FACETS),
        Profile(f"wide user, first page, {kind}", *wide, f"limit=50&{kind}"),
        Profile(f"wide user, status=unhealthy, {kind}", *wide, f"limit=50&status=unhealthy&{kind}"),
        Profile(f"wide user, facets, {kind}", *wide, kind, path=FACETS),
        page_view("wide user, page view: list + facets (per pair)", *wide),
    ]


def run_shape(args: Any, shape: Shape) -> None:
    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        loaded = existing(url, shape)
        if loaded is None:
            loaded = load_shape(url, shape, args.seed, args.processes)
        print({"shape": shape.name, **loaded}, flush=True)
        started = time.monotonic()
        with served(url) as (r, base, ref):
            results = run_profiles(r, base, ref, profiles(shape), args)
    finally:
        if server is not None:
            server.stop()
    write(args, shape, loaded, results, time.monotonic() - started)


def existing(url: str, shape: Shape) -> dict[str, Any] | None:
    """What the Redis at `url` holds of `shape`: None when it holds no cluster (load it)."""
    clusters = [text(c) for c in redis.Redis.from_url(url).hkeys(keys.CLUSTERS)]
    if not clusters:
        return None
    if sorted(clusters) != shape.cluster_names():
        raise SystemExit(f"{url} holds clusters {sorted(clusters)[:3]}..., not shape {shape.name}")
    return preloaded(url)


def write(
    args: Any, shape: Shape, loaded: dict[str, Any], results: list[dict[str, Any]], secs: float
) -> None:
    table = [
        (
            *measured(res),
            res["errors"],
            res["load_avg"].split()[0],
            verdict(res),
        )
        for res in results
    ]
    workers = os.environ.get("FLEETSCOPE_QUERY_WORKERS", "2 (default)")
    statuses = ", ".join(
        f"{loaded[s]:,} {s}" for s in ("healthy", "unhealthy", "progressing") if s in loaded
    )
    report.record(
        f"wide: {shape.describe()}",
        {
            "benchmark": "wide",
            "shape": shape.name,
            "user": shape.user,
            "bound_namespaces_per_cluster": shape.bound,
            "connections": args.connections,
            "seconds": args.seconds,
            **loaded,
            "results": results,
            "run_s": round(secs, 1),
        },
        (
            *MEASURED,
            "errors",
            "load 1m",
            f"ok (>= {RATIO}x and p99 <= {P99_VS_ONE_GET:g}x one-GET p99)",
        ),
        table,
        notes=f"{args.connections} connections ({tool(results)}), {args.seconds:g} s per "
        f"profile after {args.warmup:g} s warm-up; gunicorn workers {workers}, gthread; "
        f"{loaded.get('rows', '?'):,} rows, one Kustomization per namespace"
        + (f" ({statuses})" if statuses else "")
        + f"; admin = group `{ADMIN_GROUP}` (cluster-admin). {PAIR_NOTE}",
        write_doc=not args.no_doc,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shape", choices=[*SHAPES, "both"], default="both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument(
        "--slices", type=int, default=SLICES, help="alternating profile/one-GET runs per profile"
    )
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--processes", type=int, default=0, help="loader processes (default: CPUs)")
    ap.add_argument("--redis-url", default="", help="a Redis holding the shape (or empty)")
    ap.add_argument(
        "--profile", dest="profiles", action="append", help="only profiles named so (prefix)"
    )
    ap.add_argument("--no-doc", action="store_true", help="print only; do not append the table")
    args = ap.parse_args()
    shapes = list(SHAPES.values()) if args.shape == "both" else [SHAPES[args.shape]]
    if args.redis_url and len(shapes) > 1:
        ap.error("--redis-url holds one shape: give --shape 10x2000 or --shape 1x10000")
    for shape in shapes:
        run_shape(args, shape)


if __name__ == "__main__":
    main()
