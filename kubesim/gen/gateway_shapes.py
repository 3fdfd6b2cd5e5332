"""Gateway API objects of the generated fleet, with the status Istio's gateway controller
writes (gateway-api `apis/v1` types, GEP-1364 conventions; messages in Istio's wording).

GatewayClass and Gateway carry `Accepted`/`Programmed` conditions, each with its own
`observedGeneration`; a Gateway's listeners carry `Accepted`, `Conflicted`, `Programmed` and
`ResolvedRefs`. Routes carry no top-level conditions: one `status.parents[]` entry per parent
(plus one per Gateway from Kuadrant's policy controller when a policy affects the route).
Objects no controller handles keep what the API server defaults (`Pending`, "Waiting for
controller") or, for routes, no status at all.
"""

from __future__ import annotations

from typing import Any

from kubesim.gen.templates import metadata, num, raw, slot

GROUP = "gateway.networking.k8s.io"
ISTIO_CONTROLLER = "istio.io/gateway-controller"
KUADRANT_CONTROLLER = "kuadrant.io/policy-controller"
EPOCH = "1970-01-01T00:00:00Z"  # the CRDs' default lastTransitionTime
NO_ERRORS = "No errors found"

Affected = tuple[tuple[str, str], ...]  # (policy kind, "ns/name ..." as Kuadrant prints them)


def cond(ctype: str, status: str, reason: str, message: str, gen: str = "gen") -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": num(gen),
        "lastTransitionTime": slot("ltt"),
    }


def waiting(ctype: str) -> dict[str, Any]:
    """A condition as the CRD defaults it before any controller acts."""
    return {
        "type": ctype,
        "status": "Unknown",
        "reason": "Pending",
        "message": "Waiting for controller",
        "lastTransitionTime": EPOCH,
    }


def affected_conditions(affected: Affected) -> list[dict[str, Any]]:
    """Kuadrant's policy discoverability: `kuadrant.io/<Kind>Affected` per policy kind."""
    return [
        cond(
            f"kuadrant.io/{kind}Affected", "True", "Accepted", f"Object affected by {kind} [{who}]"
        )
        for kind, who in affected
    ]


def _meta(labels: dict[str, str], namespaced: bool = True) -> dict[str, Any]:
    meta = metadata(labels, namespaced=namespaced)
    meta["generation"] = num("gen")
    return meta


def gateway_class(
    api_version: str, controller: str, variant: str, description: str, params: bool
) -> dict[str, Any]:
    """`variant`: accepted | invalid (a parametersRef to a missing ConfigMap) | pending."""
    spec: dict[str, Any] = {"controllerName": controller, "description": description}
    if params:
        spec["parametersRef"] = {
            "group": "",
            "kind": "ConfigMap",
            "name": "@@name@@-options",
            "namespace": "istio-system",
        }
    if variant == "accepted":
        conditions = [
            cond("Accepted", "True", "Accepted", "Handled by Istio controller"),
            cond("SupportedVersion", "True", "SupportedVersion", "Gateway API bundle supported"),
        ]
    elif variant == "invalid":
        conditions = [
            cond(
                "Accepted",
                "False",
                "InvalidParameters",
                "ConfigMap istio-system/@@name@@-options not found",
            )
        ]
    else:
        conditions = [waiting("Accepted")]
    return {
        "apiVersion": api_version,
        "kind": "GatewayClass",
        "metadata": _meta({}, namespaced=False),
        "spec": spec,
        "status": {"conditions": conditions},
    }


def _listener_status(
    name: str, kinds: tuple[str, ...], fault: str, gen: str, affected: Affected
) -> dict[str, Any]:
    """`fault`: "" | bad-cert | conflicted | pending."""
    accepted = cond("Accepted", "True", "Accepted", NO_ERRORS, gen)
    conflicted = cond("Conflicted", "False", "NoConflicts", NO_ERRORS, gen)
    programmed = cond("Programmed", "True", "Programmed", NO_ERRORS, gen)
    resolved = cond("ResolvedRefs", "True", "ResolvedRefs", NO_ERRORS, gen)
    if fault == "bad-cert":
        resolved = cond(
            "ResolvedRefs",
            "False",
            "InvalidCertificateRef",
            "invalid certificate reference /Secret/@@name@@-tls., secret @@ns@@/@@name@@-tls "
            "not found",
            gen,
        )
        programmed = cond("Programmed", "False", "Invalid", "Bad TLS configuration", gen)
    elif fault == "conflicted":
        conflicted = cond(
            "Conflicted",
            "True",
            "ProtocolConflict",
            "Found conflicting protocols on listeners, a single port can only be used for one "
            "protocol",
            gen,
        )
        programmed = cond("Programmed", "False", "Invalid", "Bad listener configuration", gen)
    return {
        "name": name,
        "supportedKinds": [{"group": GROUP, "kind": k} for k in kinds],
        "attachedRoutes": num(f"ar_{name}"),
        "conditions": [accepted, conflicted, programmed, resolved, *affected_conditions(affected)],
    }


Listener = tuple[dict[str, Any], tuple[str, ...]]  # (spec entry, supported route kinds)


def gateway(
    api_version: str,
    class_name: str,
    listeners: tuple[Listener, ...],
    variant: str,
    labels: dict[str, str],
    affected: Affected = (),
    faulty_listener: str = "",
) -> dict[str, Any]:
    """A Gateway in `variant`: healthy | bad-cert | conflicted (the fault on `faulty_listener`)
    | no-address | progressing (status for an older generation) | unknown (no controller)."""
    shape: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "Gateway",
        "metadata": _meta(labels),
        "spec": {"gatewayClassName": class_name, "listeners": [spec for spec, _ in listeners]},
    }
    if variant == "unknown":
        shape["status"] = {"conditions": [waiting("Accepted"), waiting("Programmed")]}
        return shape
    service = "@@name@@-istio.@@ns@@.svc.cluster.local"
    ports = sorted({spec["port"] for spec, _ in listeners})
    assigned = _join([f"{service}:{p}" for p in ports])
    gen = "ogen" if variant == "progressing" else "gen"
    programmed = cond(
        "Programmed",
        "True",
        "Programmed",
        f"Resource programmed, assigned to service(s) {assigned}",
    )
    if variant == "no-address":
        programmed = cond(
            "Programmed",
            "False",
            "AddressNotAssigned",
            f"Assigned to service(s) {assigned}, but failed to assign to all requested addresses: "
            f'address pending for hostname "{service}"',
        )
    elif variant == "progressing":
        programmed = cond("Programmed", "False", "Pending", "Waiting for deployment", gen)
    status: dict[str, Any] = {}
    if variant != "no-address":
        status["addresses"] = [{"type": "Hostname", "value": service}]
    accepted = cond("Accepted", "True", "Accepted", "Resource accepted", gen)
    status["conditions"] = [accepted, programmed, *affected_conditions(affected)]
    status["listeners"] = [
        _listener_status(
            spec["name"],
            kinds,
            variant if spec["name"] == faulty_listener else "",
            gen,
            affected,
        )
        for spec, kinds in listeners
    ]
    shape["status"] = status
    return shape


def _join(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


# -- routes ------------------------------------------------------------------------------

Parent = tuple[str, str, str]  # (gateway name, namespace or "" for the route's, sectionName)

ACCEPTED = {
    "ok": ("True", "Accepted", "Route was valid"),
    "no-parent": ("False", "NoMatchingParent", "No listeners match parent ref @@pns@@/@@pname@@"),
    "not-allowed": (
        "False",
        "NotAllowedByListeners",
        'hostnames matched parent hostname "*.internal.example.com", but namespace "@@ns@@" is '
        "not allowed by the parent",
    ),
}
RESOLVED = {
    "ok": ("True", "ResolvedRefs", "All references resolved"),
    "BackendNotFound": (
        "False",
        "BackendNotFound",
        "backend(@@bname@@.@@bns@@.svc.cluster.local) not found",
    ),
    "RefNotPermitted": (
        "False",
        "RefNotPermitted",
        'backendRef @@bname@@/@@bns@@ not accessible to a @@kind@@ in namespace "@@ns@@" '
        "(missing a ReferenceGrant?)",
    ),
}


def parent_ref(parent: Parent, full: bool = True) -> dict[str, Any]:
    name, namespace, section = parent
    ref: dict[str, Any] = {"group": GROUP, "kind": "Gateway"} if full else {"kind": "Gateway"}
    ref["name"] = name
    if namespace:
        ref["namespace"] = namespace
    if section:
        ref["sectionName"] = section
    return ref


def _rules(kind: str, port: int, cross_namespace: bool) -> list[dict[str, Any]]:
    backend: dict[str, Any] = {"group": "", "kind": "Service", "name": slot("bname")}
    if cross_namespace:
        backend["namespace"] = slot("bns")
    backend.update(port=port, weight=1)
    rule: dict[str, Any] = {"backendRefs": [backend]}
    if kind == "HTTPRoute":
        rule = {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], **rule}
    elif kind == "GRPCRoute":
        rule = {"matches": [{"method": {"type": "Exact", "service": "api.v1.Api"}}], **rule}
    return [rule]


def route(
    api_version: str,
    kind: str,
    parents: tuple[Parent, ...],
    port: int,
    cross_namespace: bool,
    outcomes: tuple[str, ...],
    refs: str,
    labels: dict[str, str],
    affected: Affected = (),
    kuadrant_gateway: str = "",
) -> dict[str, Any]:
    """A route; `outcomes[i]` is what Istio wrote for parent i (`ACCEPTED` keys, or "" when no
    controller handles that parent), `refs` its ResolvedRefs (`RESOLVED` keys)."""
    spec: dict[str, Any] = {"parentRefs": [parent_ref(p) for p in parents]}
    if kind != "TCPRoute":
        spec["hostnames"] = ["@@name@@.@@ns@@.example.io"]
    spec["rules"] = _rules(kind, port, cross_namespace)
    shape: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _meta(labels),
        "spec": spec,
    }
    entries = []
    for parent, outcome in zip(parents, outcomes, strict=True):
        if not outcome:
            continue
        pname, pns, _ = parent
        a_status, a_reason, a_msg = ACCEPTED[outcome]
        r_status, r_reason, r_msg = RESOLVED[refs]
        a_msg = a_msg.replace("@@pns@@", pns or "@@ns@@").replace("@@pname@@", pname)
        entries.append(
            {
                "parentRef": parent_ref(parent),
                "controllerName": ISTIO_CONTROLLER,
                "conditions": [
                    cond("Accepted", a_status, a_reason, a_msg),
                    cond("ResolvedRefs", r_status, r_reason, r_msg.replace("@@kind@@", kind)),
                ],
            }
        )
    if affected and entries:
        entries.append(
            {
                "parentRef": parent_ref((kuadrant_gateway, "@@ns@@", ""), full=False),
                "controllerName": KUADRANT_CONTROLLER,
                "conditions": affected_conditions(affected),
            }
        )
    if entries:
        shape["status"] = {"parents": entries}
    return shape


def reference_grant(api_version: str, labels: dict[str, str]) -> dict[str, Any]:
    """Lets the routes of the namespaces in slot `grants` (a JSON list) reach this one's
    Services."""
    return {
        "apiVersion": api_version,
        "kind": "ReferenceGrant",
        "metadata": _meta(labels),
        "spec": {"from": raw("grants"), "to": [{"group": "", "kind": "Service"}]},
    }
