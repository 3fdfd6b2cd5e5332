"""Routes about the fleet and the caller: `/api/v1/status`, `/api/v1/clusters`, `/api/v1/access`.

Per-cluster details are shown only for clusters in the caller's scope; totals are fleet-wide.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from common.index.registry_record import read_problems, registry_view
from common.index.syncstatus import ClusterSync
from query import params
from query.scope import Scope, iso
from query.state import caller, state

bp = Blueprint("info", __name__, url_prefix="/api/v1")


def _cluster(scope: Scope, s: ClusterSync) -> dict[str, Any]:
    settings = state().settings
    age = s.rbac_age_s(scope.now)
    return {
        "cluster": s.cluster,
        "state": s.state,
        "collected": s.collected,
        "stale": s.stale(settings.stale_after_s, scope.now),
        "lastSuccess": iso(s.last_success),
        "lastAttempt": iso(s.last_attempt),
        "lastError": s.last_error or None,
        "objects": s.objects,
        "rbacAgeS": round(age, 1) if age is not None else None,
        "rbacFresh": s.rbac_fresh(settings.rbac_max_age_s, scope.now),
        "source": s.record.source,
        "ready": s.ready,
        "notReadyReason": s.record.reason or None,
        "registryError": s.record.error or s.record.conflict or None,
    }


def _registry(scope: Scope) -> dict[str, Any]:
    """Registry problems and not-ready clusters; names only for clusters in the caller's scope,
    or for callers who see every cluster that has access data (the platform team)."""
    known = [c for c, s in scope.syncs.items() if s.rbac_synced_at is not None]
    fleet_wide = bool(known) and all(c in scope.access for c in known)
    not_ready = {c: s.record for c, s in scope.syncs.items() if not s.ready}
    problems = read_problems(state().r)
    return registry_view(problems, not_ready, set(scope.access), fleet_wide)


@bp.get("/status")
def status() -> dict[str, Any]:
    user = caller()
    params.check_known(request.args, ())
    scope = state().scope(user)
    return {
        "state": scope.fleet.state,
        "message": scope.fleet.message,
        "collected": scope.fleet.collected,
        "total": scope.fleet.total,
        "clusters": [_cluster(scope, scope.syncs[c]) for c in scope.access],
        "registry": _registry(scope),
    }


@bp.get("/clusters")
def clusters() -> dict[str, Any]:
    user = caller()
    params.check_known(request.args, ())
    scope = state().scope(user)
    return {"clusters": [_cluster(scope, scope.syncs[c]) for c in scope.access]}


@bp.get("/access")
def access() -> dict[str, Any]:
    user = caller()
    params.check_known(request.args, ())
    st = state()
    scope = st.scope(user)
    out = []
    for c, a in scope.access.items():
        out.append(
            {
                "cluster": c,
                "rbacFresh": c in scope.visible,
                "clusterWide": sorted(a.cluster_wide),
                "namespaces": {ns: sorted(a.kinds_in(ns)) for ns in a.sorted_namespaces},
                "grants": st.resolver.explain(user, c),
            }
        )
    return {"user": {"name": user.name, "groups": list(user.groups)}, "clusters": out}
