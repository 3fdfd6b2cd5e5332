"""Who is who in a generated fleet, and what each identity should see.

`fleet_users(fleet)` lists identities with, per cluster, the namespaces in which they may list
the namespaced Flux, Istio, Gateway API and Kuadrant kinds ("*" = cluster-wide: only those may
also list the cluster-scoped GatewayClasses). Tests and benchmarks compare fleetscope's
answers with this; `write_users` stores it as JSON (kept out of the kubeconfig directory, whose
every file is read as a cluster).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.gen.fleet import GeneratedFleet

ALL = "*"


@dataclass(frozen=True)
class FleetUser:
    name: str
    groups: tuple[str, ...]
    description: str
    access: dict[str, Any] = field(default_factory=dict)  # cluster -> "*" | [namespaces]

    def namespaces(self, cluster: str) -> str | list[str]:
        found: str | list[str] = self.access.get(cluster, [])
        return found


def fleet_users(fleet: GeneratedFleet) -> list[FleetUser]:
    clusters = fleet.cluster_names
    everywhere = {c: ALL for c in clusters}
    ns_names = fleet.namespace_names()
    users = [
        FleetUser("admin-0", ("fleet-admins",), "cluster-admin on every cluster", everywhere),
        FleetUser("admin-1", ("fleet-admins",), "cluster-admin on every cluster", everywhere),
        FleetUser("platform-sre", (), "view on every cluster (User subject)", everywhere),
        FleetUser(
            "system:serviceaccount:istio-system:kiali",
            ("system:serviceaccounts", "system:serviceaccounts:istio-system"),
            "service account with view on every cluster",
            everywhere,
        ),
    ]
    for t in range(min(fleet.spec.team_users, fleet.spec.teams)):
        team = f"team-{t:02d}"
        access = {
            c: [ns for i, ns in enumerate(ns_names) if fleet.team_of(ci, i) == team]
            for ci, c in enumerate(clusters)
        }
        users.append(
            FleetUser(f"dev-{team}", (team,), f"member of {team} (~1% of namespaces)", access)
        )
    solo_cluster, solo_ns = fleet.solo_namespace()
    users.append(FleetUser("solo", (), "view in exactly one namespace", {solo_cluster: [solo_ns]}))
    users.append(
        FleetUser(
            f"system:serviceaccount:{ns_names[0]}:deployer",
            ("system:serviceaccounts", f"system:serviceaccounts:{ns_names[0]}"),
            "a namespace's deployer service account (RoleBinding subject)",
            {c: [ns_names[0]] for c in clusters},
        )
    )
    users.append(FleetUser("nobody", (), "authenticated, bound to nothing", {}))
    return users


def users_document(fleet: GeneratedFleet) -> dict[str, Any]:
    spec = fleet.spec
    return {
        "seed": spec.seed,
        "clusters": fleet.cluster_names,
        "namespaces_per_cluster": spec.namespaces,
        "teams": spec.teams,
        "team_rule": "namespace label fleetscope.io/team=<group>; RoleBinding team-view -> view",
        "users": [asdict(u) for u in fleet_users(fleet)],
    }


def write_users(fleet: GeneratedFleet, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(users_document(fleet), indent=1))
    return out
