"""Kuadrant policies (kuadrant.io/v1 AuthPolicy, RateLimitPolicy, DNSPolicy, TLSPolicy) with the
status Kuadrant's operator writes (kuadrant-operator `internal/kuadrant/conditions.go`,
`errors.go`): `Accepted` (False: TargetNotFound, Conflicted, Invalid) and, only when accepted,
`Enforced` (False: Overridden, or Unknown for a policy out of sync or failing); a top-level
`observedGeneration`, none per condition except in the `stale` variant (conditions carrying the
generation before the object's, which reads progressing).
"""

from __future__ import annotations

from typing import Any

from kubesim.gen.gateway_shapes import GROUP
from kubesim.gen.templates import metadata, num, slot

Target = tuple[str, str, str]  # (kind, name, sectionName or "")


def _cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": slot("ltt"),
    }


def _older(cond: dict[str, Any]) -> dict[str, Any]:
    """The condition as judged at the previous generation (metav1.Condition's own field)."""
    return {**cond, "observedGeneration": num("ogen")}


def policy_status(kind: str, variant: str, target: Target, other: str) -> dict[str, Any] | None:
    """`variant`: enforced | partial | target-not-found | conflicted | invalid | overridden |
    out-of-sync | no-routes | failing | stale (conditions judged at the previous generation) |
    unknown (never reconciled: no status). `other` names
    the conflicting or overriding policy."""
    if variant == "unknown":
        return None
    accepted = _cond("Accepted", "True", "Accepted", f"{kind} has been accepted")
    enforced: dict[str, Any] | None = _cond(
        "Enforced", "True", "Enforced", f"{kind} has been successfully enforced"
    )
    if variant == "partial":
        enforced = _cond("Enforced", "True", "Enforced", f"{kind} has been partially enforced")
    elif variant == "target-not-found":
        accepted = _cond(
            "Accepted", "False", "TargetNotFound", f"{kind} target {target[1]} was not found"
        )
        enforced = None
    elif variant == "conflicted":
        message = f"{kind} is conflicted by @@ns@@/{other}: conflicting policy"
        accepted, enforced = _cond("Accepted", "False", "Conflicted", message), None
    elif variant == "invalid":
        message = f"{kind} target is invalid: unable to find issuer"
        accepted, enforced = _cond("Accepted", "False", "Invalid", message), None
    elif variant == "overridden":
        message = f"{kind} is overridden by [@@ns@@/{other}]"
        enforced = _cond("Enforced", "False", "Overridden", message)
    elif variant == "out-of-sync":
        component = "Limitador" if kind == "RateLimitPolicy" else "Authorino"
        message = f"{kind} waiting for the following components to sync: [{component}]"
        enforced = _cond("Enforced", "False", "Unknown", message)
    elif variant == "no-routes":
        message = f"{kind} is not in the path to any existing routes"
        enforced = _cond("Enforced", "False", "Unknown", message)
    elif variant == "failing":
        message = (
            f"{kind} has encountered some issues: policy is not enforced on any DNSRecord: "
            "not a single DNSRecord is ready"
        )
        enforced = _cond("Enforced", "False", "Unknown", message)
    elif variant == "stale":
        accepted, enforced = _older(accepted), _older(enforced) if enforced else None
    conditions = [accepted] if enforced is None else [accepted, enforced]
    return {"conditions": conditions, "observedGeneration": num("gen")}


def _spec(kind: str, mode: str, variant: str) -> dict[str, Any]:
    """What the policy says. `mode` (AuthPolicy on a Gateway): defaults | overrides."""
    if kind == "AuthPolicy":
        if mode:
            deny = {"authorization": {"deny-all": {"opa": {"rego": "allow = false"}}}}
            return {mode: {"rules": deny}}
        api_key = {
            "apiKey": {"selector": {"matchLabels": {"app": slot("ns")}}},
            "credentials": {"authorizationHeader": {"prefix": "APIKEY"}},
        }
        return {"rules": {"authentication": {"api-key-users": api_key}}}
    if kind == "RateLimitPolicy":
        limit = {"rates": [{"limit": 100, "window": "1m"}]}
        return {"limits": {"per-route": limit}}
    if kind == "DNSPolicy":
        return {"providerRefs": [{"name": "aws-credentials"}]}
    issuer = "letsencrypt-retired" if variant == "invalid" else "letsencrypt"
    return {"issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": issuer}}


def policy(
    api_version: str,
    kind: str,
    target: Target,
    variant: str,
    labels: dict[str, str],
    mode: str = "",
    other: str = "",
) -> dict[str, Any]:
    meta = metadata(labels)
    meta["generation"] = num("gen")
    ref: dict[str, Any] = {"group": GROUP, "kind": target[0], "name": target[1]}
    if target[2]:
        ref["sectionName"] = target[2]
    shape: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": {"targetRef": ref, **_spec(kind, mode, variant)},
    }
    status = policy_status(kind, variant, target, other)
    if status is not None:
        shape["status"] = status
    return shape
