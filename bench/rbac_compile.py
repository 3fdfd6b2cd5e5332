"""Benchmark: compile and store one big cluster's RBAC, then resolve access from it.

    ./dev bench rbac_compile [--namespaces 2000] [--wide-namespaces 10000] [--clusters 300]

A cluster of N namespaces, each with a team RoleBinding (200 team groups) to an aggregated
ClusterRole, a user RoleBinding to a namespaced Role, plus cluster-wide admins; and a user bound
in `--wide-namespaces` namespaces; then a team member resolved across `--clusters` clusters.
Prints one JSON object (seconds are medians over the runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

from common.kinds.registry import builtin_registry
from common.rbac.authorizer import RbacObjects, UserInfo
from common.rbac.grants import AccessResolver, compile_grants, store_grants
from common.redis_server import start_redis_server

FLUX = ["kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io", "source.toolkit.fluxcd.io"]
ISTIO = ["networking.istio.io", "security.istio.io"]


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def _rb(ns: str, name: str, ref: dict[str, str], subject: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "roleRef": ref, "subjects": [subject]}


def build_cluster(namespaces: int, wide: int) -> RbacObjects:
    view = {"verbs": ["get", "list", "watch"], "apiGroups": FLUX + ISTIO, "resources": ["*"]}
    cluster_roles: list[dict[str, Any]] = [
        {
            "metadata": {"name": f"builtin-{i}"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
        }
        for i in range(60)
    ]
    cluster_roles += [
        {"metadata": {"name": "flux-view", "labels": {"agg": "view"}}, "rules": [view]},
        {
            "metadata": {"name": "team-view"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "view"}}]},
        },
        {
            "metadata": {"name": "admin"},
            "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        },
    ]
    roles, bindings = [], []
    for i in range(namespaces):
        ns = f"ns-{i:05}"
        roles.append(
            {
                "metadata": {"namespace": ns, "name": "kustomizations"},
                "rules": [
                    {
                        "verbs": ["list"],
                        "apiGroups": [FLUX[0]],
                        "resources": ["kustomizations", "kustomizations/status"],
                    }
                ],
            }
        )
        bindings.append(
            _rb(
                ns,
                "team",
                _ref("ClusterRole", "team-view"),
                {"kind": "Group", "name": f"team-{i % 200}"},
            )
        )
        bindings.append(
            _rb(ns, "owner", _ref("Role", "kustomizations"), {"kind": "User", "name": f"user-{i}"})
        )
    for i in range(wide):
        bindings.append(
            _rb(
                f"wide-{i:05}",
                "wide",
                _ref("ClusterRole", "flux-view"),
                {"kind": "User", "name": "wide-user"},
            )
        )
    admins = [
        {
            "metadata": {"name": f"admins-{i}"},
            "roleRef": _ref("ClusterRole", "admin"),
            "subjects": [{"kind": "Group", "name": f"admins-{i}"}],
        }
        for i in range(5)
    ]
    return RbacObjects(roles, cluster_roles, bindings, admins)


def median_s(
    fn: Callable[[], Any], runs: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    times = []
    for _ in range(runs):
        start = clock()
        fn()
        times.append(clock() - start)
    return round(statistics.median(times), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namespaces", type=int, default=2000)
    parser.add_argument("--wide-namespaces", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--clusters", type=int, default=300, help="for the fleet-wide resolve")
    args = parser.parse_args()
    registry = builtin_registry()
    base = build_cluster(args.namespaces, 0)
    big = build_cluster(args.namespaces, args.wide_namespaces)
    out: dict[str, Any] = {
        "namespaces": args.namespaces,
        "role_bindings": len(base.role_bindings),
        "compile_s": median_s(lambda: compile_grants(base, registry), args.runs),
        # CPU seconds: the wall clock above also counts waiting for a busy shared machine
        "compile_cpu_s": median_s(
            lambda: compile_grants(base, registry), args.runs, time.process_time
        ),
        "compile_with_wide_user_s": median_s(lambda: compile_grants(big, registry), args.runs),
    }
    compiled = compile_grants(big, registry)
    out["subjects"] = len(compiled.fields)
    out["wide_user_value_bytes"] = len(compiled.fields["u:wide-user"].encode())
    out["wide_user_grants_line_bytes"] = len(compiled.fields["u:wide-user"].partition("\n")[0])
    server = start_redis_server()
    try:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        out["store_s"] = median_s(
            lambda: (r.delete("fs:{c:bench}:rbac"), store_grants(r, "bench", compiled, 1.0)),
            args.runs,
        )
        out.update(_resolve(r, registry, args.runs))
        out.update(_fleet(r, registry, compile_grants(base, registry), args.clusters, args.runs))
    finally:
        server.stop()
    print(json.dumps(out, indent=2))


def _resolve(r: redis.Redis, registry: Any, runs: int) -> dict[str, Any]:
    wide, team = UserInfo("wide-user", ("team-7",)), UserInfo("someone", ("team-7",))
    cold = median_s(lambda: AccessResolver(r, registry).resolve(wide, ["bench"]), runs)
    resolver = AccessResolver(r, registry)
    access = resolver.resolve(wide, ["bench"])["bench"]
    trips = resolver.round_trips
    warm = median_s(lambda: resolver.resolve(wide, ["bench"]), runs * 20)
    return {
        "wide_user_namespaces": len(access.namespaces),
        "resolve_wide_user_cold_s": cold,
        "resolve_wide_user_warm_s": warm,
        "resolve_cold_round_trips": trips,
        "resolve_warm_round_trips_each": (resolver.round_trips - trips) // (runs * 20),
        "resolve_team_user_cold_s": median_s(
            lambda: AccessResolver(r, registry).resolve(team, ["bench"]), runs
        ),
    }


def _fleet(
    r: redis.Redis, registry: Any, compiled: Any, clusters: int, runs: int
) -> dict[str, Any]:
    """A team member resolved across `clusters` clusters holding the same grants."""
    names = [f"bench-{i:03}" for i in range(clusters)]
    for c in names:
        store_grants(r, c, compiled, 1.0)
    user = UserInfo("user-5", ("team-5", "admins-1"))
    resolver = AccessResolver(r, registry)
    cold = median_s(lambda: AccessResolver(r, registry).resolve(user, names), runs)
    resolver.resolve(user, names)
    trips = resolver.round_trips
    warm = median_s(lambda: resolver.resolve(user, names), runs * 20)
    peer = median_s(
        lambda: resolver.resolve(UserInfo(f"peer-{time.perf_counter_ns()}", user.groups), names),
        runs,
    )
    return {
        "fleet_clusters": clusters,
        "fleet_resolve_cold_s": cold,
        "fleet_resolve_warm_s": warm,
        "fleet_resolve_warm_round_trips_each": (resolver.round_trips - trips) // (runs * 20),
        "fleet_resolve_same_groups_new_user_s": peer,
    }


if __name__ == "__main__":
    main()
