"""Fill Redis with a generated fleet's rows and grants, straight from kubesim's generator.

No HTTP: each cluster's objects go through the collector's own row and store code
(common.index.rows.build_row/encode, the Istio validation of collector.mesh,
common.index.write.store.replace_rows) and its RBAC objects through
common.rbac.grants.compile_grants/store_grants, so Redis holds exactly what a collection would write.
Clusters are spread over worker processes. Also usable alone: `./dev bench fleetload --preset M`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import redis

from collector import mesh
from common import redis_client
from common.index import keys, rows
from common.index.write import store
from common.kinds.registry import builtin_registry
from common.rbac.authorizer import RbacObjects
from common.rbac.grants import compile_grants, store_grants
from kubesim.catalog import Catalog
from kubesim.gen.fleet import preset_fleet

RBAC_KINDS = {
    "Role": "roles",
    "ClusterRole": "cluster_roles",
    "RoleBinding": "role_bindings",
    "ClusterRoleBinding": "cluster_role_bindings",
}


def load_cluster(r: redis.Redis, fleet: Any, index: int, catalog: Catalog) -> int:
    """Store one cluster's rows and grants as a successful sync would; returns its row count."""
    registry = builtin_registry()
    cluster = fleet.cluster_names[index]
    members: list[str] = []
    held: list[mesh.Held] = []
    services: list[dict[str, Any]] = []
    namespaces: list[str] = []
    rbac: dict[str, list[dict[str, Any]]] = {f: [] for f in RBAC_KINDS.values()}
    for res, _ns, _name, raw in fleet.objects(index, catalog):
        kind = registry.by_resource(res.group, res.plural)
        if kind is not None and mesh.held(kind):
            held.append(mesh.Held(kind, res.api_version, json.loads(raw)))
        elif kind is not None:
            obj = json.loads(raw)
            members.append(rows.member(cluster, kind, res.api_version, obj))
        elif res.group == "rbac.authorization.k8s.io":
            rbac[RBAC_KINDS[res.kind]].append(json.loads(raw))
        elif res.group == "" and res.plural == mesh.SERVICES:
            services.append(mesh.service_slim(json.loads(raw)))
        elif res.group == "" and res.plural == mesh.NAMESPACES:
            namespaces.append(mesh.namespace_name(json.loads(raw)))
    members.extend(mesh.members(cluster, held, services, namespaces))
    store_cluster(r, cluster, members, RbacObjects(**rbac))  # type: ignore[arg-type]
    return len(members)


def store_cluster(r: redis.Redis, cluster: str, members: list[str], rbac: RbacObjects) -> None:
    """Register `cluster`, make `members` (encoded rows) its rows and `rbac` its grants, as a
    successful sync would (`fs:version` is left for the caller to raise once at the end)."""
    now = round(time.time(), 3)
    r.hset(keys.CLUSTERS, cluster, json.dumps({"source": "bench"}))
    sync = {"state": "ok", "last_success": now, "last_error": "", "duration_s": 0, "requests": 0}
    store.replace_rows(r, cluster, members, sync)
    store_grants(r, cluster, compile_grants(rbac, builtin_registry()), synced_at=now)


def _worker(url: str, preset: str, seed: int, indexes: list[int]) -> int:
    r = redis_client.connect(url)
    fleet, catalog = preset_fleet(preset, seed), Catalog.default()
    total = sum(load_cluster(r, fleet, i, catalog) for i in indexes)
    r.close()
    return total


def load_fleet(url: str, preset: str, seed: int = 1, processes: int = 0) -> dict[str, Any]:
    """Load every cluster of a preset fleet into Redis at `url`; rows and wall time."""
    n = len(preset_fleet(preset, seed).cluster_names)
    procs = processes or min(os.cpu_count() or 1, n)
    started = time.monotonic()
    with ProcessPoolExecutor(procs) as pool:
        parts = [list(range(i, n, procs)) for i in range(procs)]
        total = sum(pool.map(_worker, [url] * procs, [preset] * procs, [seed] * procs, parts))
    redis_client.connect(url).incr(keys.VERSION)
    return {"clusters": n, "rows": total, "load_s": round(time.monotonic() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="S")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--redis-url", default="", help="default: a private redis-server")
    ap.add_argument("--processes", type=int, default=0)
    args = ap.parse_args()
    from common.redis_server import start_redis_server

    server = None if args.redis_url else start_redis_server()
    url = args.redis_url or server.url  # type: ignore[union-attr]
    try:
        print(json.dumps({"preset": args.preset, **load_fleet(url, args.preset, args.seed)}))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
