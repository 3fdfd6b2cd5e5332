"""RBAC objects as a cluster holds them (rules, Roles, ClusterRoles with aggregation, subjects,
RoleBindings, ClusterRoleBindings), built in one line each for the authorizer and grant tests."""

from __future__ import annotations

from typing import Any


def rule(verbs: Any, groups: Any, resources: Any, names: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names is not None:
        out["resourceNames"] = names
    return out


def role(ns: str, name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name}, "rules": list(rules)}


def crole(name: str, *rules: dict[str, Any], labels: Any = None, agg: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}}
    if rules or agg is None:
        out["rules"] = list(rules)
    if agg is not None:
        out["aggregationRule"] = {"clusterRoleSelectors": agg}
    return out


def subj(kind: str, name: str, ns: str | None = None) -> dict[str, str]:
    out = {"kind": kind, "name": name}
    if kind != "ServiceAccount":
        out["apiGroup"] = "rbac.authorization.k8s.io"
    if ns is not None:
        out["namespace"] = ns
    return out


def rb(ns: str, name: str, kind: str, ref: str, *subjects: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": ref},
        "subjects": list(subjects),
    }


def crb(name: str, ref: str, *subjects: dict[str, str]) -> dict[str, Any]:
    out = rb("", name, "ClusterRole", ref, *subjects)
    del out["metadata"]["namespace"]
    return out
