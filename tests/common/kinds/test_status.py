"""Status rules: the table in common/kinds/status.py, row by row: Flux (suspension beside the
health), Istio (fleetscope's findings merged with istiod's messages), Gateway API gateways and
routes, and Kuadrant policies, with cases taken from the upstream condition types and reasons
(gateway-api apis/v1, kuadrant-operator internal/kuadrant)."""

from __future__ import annotations

from typing import Any

import pytest

from common.kinds.status import (
    MESSAGE_MAX,
    NOT_ACCEPTED,
    NOT_CHECKED,
    STATUSES,
    WAITING,
    WAITING_CONTROLLER,
    Finding,
    Status,
    evaluate,
    is_suspended,
    revision,
)

LTT = "2026-11-01T00:00:00Z"


def cond(
    type_: str, status: str, reason: str = "", message: str = "", observed: int | None = None
) -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": LTT,
    }
    if observed is not None:
        c["observedGeneration"] = observed
    return c


def check(s: Status, status: str, reason: str, message: str | None, warnings: int = 0) -> None:
    assert s.status in STATUSES
    assert (s.status, s.reason, s.warnings) == (status, reason, warnings), s
    if message is not None:
        assert s.message == message


# -- flux ---------------------------------------------------------------------------------------


def flux(
    *conds: dict[str, Any],
    gen: int = 1,
    observed: int = 1,
    suspend: bool = False,
    deleting: bool = False,
    status: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "n", "generation": gen}
    if deleting:
        meta["deletionTimestamp"] = LTT
    obj: dict[str, Any] = {"metadata": meta, "spec": {"suspend": suspend}}
    if status:
        obj["status"] = {"observedGeneration": observed, "conditions": list(conds)}
    return obj


READY = cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:abc")
NOT_READY = cond("Ready", "False", "BuildFailed", "kustomize build failed")
STALLED = cond("Stalled", "True", "ArtifactFailed", "artifact not found")
RECONCILING = cond("Reconciling", "True", "Progressing", "reconciliation in progress")
UPGRADE_FAILED = cond("Ready", "False", "UpgradeFailed", "Helm upgrade failed: timed out")


@pytest.mark.parametrize(
    ("obj", "status", "reason", "message"),
    [
        (flux(READY, deleting=True), "progressing", "Terminating", "object is being deleted"),
        (
            flux(READY, gen=3, observed=2),
            "progressing",
            "LatestGenerationNotObserved",
            READY["message"],
        ),
        (
            flux(cond("Ready", "Unknown", "Progressing", "working"), RECONCILING),
            "progressing",
            "Progressing",
            "reconciliation in progress",
        ),
        (
            flux(cond("Ready", "Unknown", "Progressing", "working")),
            "progressing",
            "Progressing",
            "working",
        ),
        (
            flux(cond("Ready", "False", "ArtifactFailed", "x"), STALLED),
            "unhealthy",
            "ArtifactFailed",
            "artifact not found",
        ),
        (flux(READY), "healthy", "ReconciliationSucceeded", READY["message"]),
        (flux(NOT_READY), "unhealthy", "BuildFailed", "kustomize build failed"),
        (flux(status=False), "unknown", "", WAITING),
        (flux(), "unknown", "", WAITING),
    ],
)
def test_flux_rules_in_order(obj: dict[str, Any], status: str, reason: str, message: str) -> None:
    check(evaluate("flux", obj), status, reason, message)


@pytest.mark.parametrize(
    ("obj", "status", "reason"),
    [
        (flux(UPGRADE_FAILED, suspend=True), "unhealthy", "UpgradeFailed"),
        (flux(READY, suspend=True), "healthy", "ReconciliationSucceeded"),
        (flux(READY, RECONCILING, suspend=True), "progressing", "Progressing"),
    ],
)
def test_suspension_is_beside_the_health(obj: dict[str, Any], status: str, reason: str) -> None:
    check(evaluate("flux", obj), status, reason, None)
    assert is_suspended("flux", obj) is True
    assert is_suspended("flux", {**obj, "spec": {"suspend": False}}) is False


def test_only_flux_kinds_are_suspended() -> None:
    obj = flux(READY, suspend=True)
    assert [is_suspended(rule, obj) for rule in ("conditions", "static", "istio")] == [False] * 3
    assert is_suspended("flux", {"metadata": {}, "spec": {"suspend": "true"}}) is False
    assert evaluate("conditions", obj).status == "healthy"


def test_suspended_is_not_a_status() -> None:
    assert STATUSES == ("healthy", "unhealthy", "progressing", "unknown")


def test_static_kinds_are_healthy_without_status() -> None:
    assert evaluate("static", {"metadata": {}}).status == "healthy"


def test_long_messages_are_cut() -> None:
    long = cond("Ready", "False", "Failed", "x " * 500)
    assert len(evaluate("flux", flux(long)).message) == MESSAGE_MAX


# -- istio --------------------------------------------------------------------------------------


def istio(*messages: dict[str, Any], **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "vs", "namespace": "shop", "generation": 2}}
    if messages:
        status["validationMessages"] = list(messages)
    if status:
        obj["status"] = status
    return obj


def ist(code: str, name: str, level: str) -> dict[str, Any]:
    """A validation message as the API type has it (no text; documentationUrl instead)."""
    return {
        "type": {"code": code, "name": name},
        "level": level,
        "documentationUrl": f"https://istio.io/docs/reference/config/analysis/{code.lower()}/",
    }


GW_MISSING = Finding("error", "KIA1102", 'gateway "shop/ingress" not found')
HOST_MISSING = Finding("warning", "KIA1101", 'host "reviews" matches no Service')
DUP_DR = Finding("warning", "KIA0201", 'more than one DestinationRule for host "reviews"')
IST_NOT_FOUND = ist("IST0101", "ReferencedResourceNotFound", "ERROR")
IST_NOT_INJECTED = ist("IST0102", "NamespaceNotInjected", "WARNING")
IST_INFO = ist("IST0118", "PortNameIsNotUnderNamingConvention", "INFO")
OLD_ERROR = {"code": "IST0101", "level": "Error", "message": 'Referenced gateway not found: "x"'}
OLD_WARN = {"code": "IST0102", "level": "Warn", "message": "mTLS not enabled for virtual service"}
RECONCILED = cond("Reconciled", "True", "", "")
PROPAGATING = cond("Reconciled", "False", "stillPropagating", "61/122 complete")


@pytest.mark.parametrize(
    ("obj", "findings", "status", "reason", "message", "warnings"),
    [
        # Nothing checked it: no fleetscope check for the kind, istiod status off (the default).
        (istio(), None, "unknown", "NotChecked", NOT_CHECKED, 0),
        (istio(conditions=[]), None, "unknown", "NotChecked", NOT_CHECKED, 0),
        # fleetscope checked and found nothing; istiod wrote status and found nothing.
        (istio(), [], "healthy", "", "", 0),
        (istio(conditions=[RECONCILED], observedGeneration="2"), None, "healthy", "", "", 0),
        (istio(validationMessages=[]), None, "healthy", "", "", 0),
        # Reconciled reports distribution to proxies, not validity.
        (istio(conditions=[PROPAGATING]), [], "healthy", "", "", 0),
        # Errors: ours first, then istiod's; the reason is the code.
        (
            istio(),
            [GW_MISSING],
            "unhealthy",
            "KIA1102",
            'KIA1102 gateway "shop/ingress" not found',
            0,
        ),
        (
            istio(IST_NOT_FOUND),
            None,
            "unhealthy",
            "IST0101",
            "IST0101 ReferencedResourceNotFound",
            0,
        ),
        (
            istio(OLD_ERROR),
            None,
            "unhealthy",
            "IST0101",
            'IST0101 Referenced gateway not found: "x"',
            0,
        ),
        (istio(IST_NOT_FOUND), [GW_MISSING], "unhealthy", "KIA1102", None, 0),
        (istio(IST_NOT_FOUND), [HOST_MISSING], "unhealthy", "IST0101", None, 1),
        (istio(OLD_WARN, OLD_ERROR), [DUP_DR, HOST_MISSING], "unhealthy", "IST0101", None, 3),
        (istio({"code": "IST0106", "level": 3}), None, "unhealthy", "IST0106", None, 0),
        # Warnings keep the status, set the message and are counted.
        (
            istio(),
            [HOST_MISSING],
            "healthy",
            "KIA1101",
            'KIA1101 host "reviews" matches no Service',
            1,
        ),
        (istio(IST_NOT_INJECTED), [DUP_DR], "healthy", "KIA0201", None, 2),
        (istio(IST_NOT_INJECTED), None, "healthy", "IST0102", "IST0102 NamespaceNotInjected", 1),
        (
            istio(OLD_WARN),
            None,
            "healthy",
            "IST0102",
            "IST0102 mTLS not enabled for virtual service",
            1,
        ),
        # INFO is neither an error nor a warning, but may be the message.
        (
            istio(IST_INFO),
            None,
            "healthy",
            "IST0118",
            "IST0118 PortNameIsNotUnderNamingConvention",
            0,
        ),
        (istio(IST_INFO, IST_NOT_INJECTED), None, "healthy", "IST0102", None, 1),
    ],
)
def test_istio_rule(
    obj: dict[str, Any],
    findings: list[Finding] | None,
    status: str,
    reason: str,
    message: str | None,
    warnings: int,
) -> None:
    check(evaluate("istio", obj, findings), status, reason, message, warnings)


def test_istio_message_with_name_and_text() -> None:
    msg = {**IST_NOT_INJECTED, "message": "namespace is not injected"}
    s = evaluate("istio", istio(msg))
    assert s.message == "IST0102 NamespaceNotInjected: namespace is not injected"


# -- gateway: GatewayClass and Gateway ----------------------------------------------------------


def gateway(
    *conds: dict[str, Any],
    listeners: tuple[dict[str, Any], ...] = (),
    gen: int = 1,
    status: bool = True,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "gateway-ns", "generation": gen},
        "spec": {"gatewayClassName": "istio", "listeners": []},
    }
    if status:
        obj["status"] = {"conditions": list(conds), "listeners": list(listeners)}
    return obj


def gateway_class(*conds: dict[str, Any], gen: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "istio", "generation": gen},
        "spec": {"controllerName": "istio.io/gateway-controller"},
        "status": {"conditions": list(conds)},
    }


def listener(name: str, *conds: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "attachedRoutes": 1, "supportedKinds": [], "conditions": list(conds)}


ACCEPTED = cond("Accepted", "True", "Accepted", "Resource accepted", 1)
PROGRAMMED = cond(
    "Programmed", "True", "Programmed", "Resource programmed, assigned to service(s)", 1
)
L_ACCEPTED = cond("Accepted", "True", "Accepted", "", 1)
L_PROGRAMMED = cond("Programmed", "True", "Programmed", "", 1)
L_RESOLVED = cond("ResolvedRefs", "True", "ResolvedRefs", "", 1)
L_NO_CONFLICT = cond("Conflicted", "False", "NoConflicts", "", 1)
GOOD_LISTENER = listener("https", L_ACCEPTED, L_PROGRAMMED, L_RESOLVED, L_NO_CONFLICT)
# The CRD's default status: what a Gateway has before any controller acts.
DEFAULT = (
    cond("Accepted", "Unknown", "Pending", "Waiting for controller"),
    cond("Programmed", "Unknown", "Pending", "Waiting for controller"),
)
CERT = cond("ResolvedRefs", "False", "InvalidCertificateRef", 'secret "tls" not found', 1)


@pytest.mark.parametrize(
    ("obj", "status", "reason", "message", "warnings"),
    [
        # All True -> healthy.
        (
            gateway(ACCEPTED, PROGRAMMED, listeners=(GOOD_LISTENER,)),
            "healthy",
            "Programmed",
            PROGRAMMED["message"],
            0,
        ),
        (gateway(ACCEPTED, PROGRAMMED), "healthy", "Programmed", None, 0),
        # Before a controller acts.
        (gateway(status=False), "progressing", "Pending", WAITING_CONTROLLER, 0),
        (gateway(), "progressing", "Pending", WAITING_CONTROLLER, 0),
        (gateway(*DEFAULT), "progressing", "Pending", "Waiting for controller", 0),
        (gateway(ACCEPTED), "progressing", "Pending", f"Programmed: {WAITING_CONTROLLER}", 0),
        # A status that describes an older spec.
        (
            gateway(ACCEPTED, PROGRAMMED, gen=2),
            "progressing",
            "LatestGenerationNotObserved",
            "Accepted describes generation 1, the object is at generation 2",
            0,
        ),
        (
            gateway(
                {**ACCEPTED, "observedGeneration": 2},
                {**PROGRAMMED, "observedGeneration": 2},
                listeners=(GOOD_LISTENER,),
                gen=2,
            ),
            "progressing",
            "LatestGenerationNotObserved",
            "listener https: Accepted describes generation 1, the object is at generation 2",
            0,
        ),
        (
            gateway(cond("Accepted", "False", "Invalid", "bad", 1), PROGRAMMED, gen=2),
            "progressing",
            "LatestGenerationNotObserved",
            None,
            0,
        ),
        # Accepted=False.
        (
            gateway(
                cond("Accepted", "False", "UnsupportedAddress", "IPv6 not supported", 1), PROGRAMMED
            ),
            "unhealthy",
            "UnsupportedAddress",
            "UnsupportedAddress: IPv6 not supported",
            0,
        ),
        (
            gateway(cond("Accepted", "False", "InvalidParameters", "", 1)),
            "unhealthy",
            "InvalidParameters",
            None,
            0,
        ),
        (
            gateway(cond("Accepted", "False", "ListenersNotValid", "", 1)),
            "unhealthy",
            "ListenersNotValid",
            None,
            0,
        ),
        # Programmed=False: unhealthy, except reason Pending.
        (
            gateway(ACCEPTED, cond("Programmed", "False", "Invalid", "no TLS", 1)),
            "unhealthy",
            "Invalid",
            None,
            0,
        ),
        (
            gateway(ACCEPTED, cond("Programmed", "False", "NoResources", "", 1)),
            "unhealthy",
            "NoResources",
            None,
            0,
        ),
        (
            gateway(ACCEPTED, cond("Programmed", "False", "AddressNotAssigned", "no IP yet", 1)),
            "unhealthy",
            "AddressNotAssigned",
            "AddressNotAssigned: no IP yet",
            0,
        ),
        (
            gateway(ACCEPTED, cond("Programmed", "False", "AddressNotUsable", "", 1)),
            "unhealthy",
            "AddressNotUsable",
            None,
            0,
        ),
        (
            gateway(ACCEPTED, cond("Programmed", "False", "Pending", "waiting for deployment", 1)),
            "progressing",
            "Pending",
            "waiting for deployment",
            0,
        ),
        (
            gateway(ACCEPTED, cond("Programmed", "Unknown", "Pending", "", 1)),
            "progressing",
            "Pending",
            WAITING_CONTROLLER,
            0,
        ),
        # Gateway-level ResolvedRefs (backend TLS, summary of the listeners').
        (
            gateway(ACCEPTED, PROGRAMMED, cond("ResolvedRefs", "False", "RefNotPermitted", "", 1)),
            "unhealthy",
            "RefNotPermitted",
            None,
            0,
        ),
        # Listeners: the message names the listener.
        (
            gateway(
                ACCEPTED, PROGRAMMED, listeners=(listener("https", L_ACCEPTED, L_PROGRAMMED, CERT),)
            ),
            "unhealthy",
            "InvalidCertificateRef",
            'listener https: InvalidCertificateRef: secret "tls" not found',
            0,
        ),
        (
            gateway(
                cond("Accepted", "True", "ListenersNotValid", "", 1),
                PROGRAMMED,
                listeners=(
                    GOOD_LISTENER,
                    listener("dup", cond("Conflicted", "True", "HostnameConflict", "", 1)),
                ),
            ),
            "unhealthy",
            "HostnameConflict",
            "listener dup: HostnameConflict",
            0,
        ),
        (
            gateway(
                ACCEPTED,
                PROGRAMMED,
                listeners=(listener("tcp", cond("Conflicted", "True", "ProtocolConflict", "", 1)),),
            ),
            "unhealthy",
            "ProtocolConflict",
            None,
            0,
        ),
        (
            gateway(
                ACCEPTED,
                PROGRAMMED,
                listeners=(listener("http", cond("Programmed", "False", "Invalid", "", 1)),),
            ),
            "unhealthy",
            "Invalid",
            "listener http: Invalid",
            0,
        ),
        (
            gateway(
                ACCEPTED,
                PROGRAMMED,
                listeners=(listener("h", cond("Accepted", "False", "PortUnavailable", "", 1)),),
            ),
            "unhealthy",
            "PortUnavailable",
            "listener h: PortUnavailable",
            0,
        ),
        (
            gateway(
                ACCEPTED,
                PROGRAMMED,
                listeners=(
                    listener("h", cond("ResolvedRefs", "False", "InvalidRouteKinds", "", 1)),
                ),
            ),
            "unhealthy",
            "InvalidRouteKinds",
            None,
            0,
        ),
        (
            gateway(
                ACCEPTED,
                PROGRAMMED,
                listeners=(
                    listener("h", L_ACCEPTED, cond("Programmed", "False", "Pending", "", 1)),
                ),
            ),
            "progressing",
            "Pending",
            f"listener h: {WAITING_CONTROLLER}",
            0,
        ),
        # A definite problem is reported before what is still pending.
        (
            gateway(
                ACCEPTED,
                cond("Programmed", "False", "Pending", "", 1),
                listeners=(listener("https", CERT),),
            ),
            "unhealthy",
            "InvalidCertificateRef",
            None,
            0,
        ),
        # Warnings keep the status.
        (
            gateway(
                ACCEPTED,
                PROGRAMMED,
                listeners=(
                    listener(
                        "a",
                        L_ACCEPTED,
                        cond("OverlappingTLSConfig", "True", "OverlappingHostnames", "", 1),
                    ),
                ),
            ),
            "healthy",
            "OverlappingHostnames",
            "listener a: OverlappingHostnames",
            1,
        ),
        # Conditions of other types are not the controller's to update: never stale for us.
        (
            gateway(ACCEPTED, PROGRAMMED, cond("example.com/Custom", "False", "Old", "", 0)),
            "healthy",
            "Programmed",
            None,
            0,
        ),
    ],
)
def test_gateway_rule(
    obj: dict[str, Any], status: str, reason: str, message: str | None, warnings: int
) -> None:
    check(evaluate("gateway", obj), status, reason, message, warnings)


UNSUPPORTED = cond(
    "SupportedVersion", "False", "UnsupportedVersion", "CRDs v1.4 found, v1.2 supported", 1
)


@pytest.mark.parametrize(
    ("obj", "status", "reason", "warnings"),
    [
        # A GatewayClass carries Accepted (and SupportedVersion), never Programmed.
        (gateway_class(ACCEPTED), "healthy", "Accepted", 0),
        (
            gateway_class(ACCEPTED, cond("SupportedVersion", "True", "SupportedVersion", "", 1)),
            "healthy",
            "Accepted",
            0,
        ),
        (gateway_class(ACCEPTED, UNSUPPORTED), "healthy", "UnsupportedVersion", 1),
        (
            gateway_class(cond("Accepted", "False", "UnsupportedVersion", "", 1), UNSUPPORTED),
            "unhealthy",
            "UnsupportedVersion",
            1,
        ),
        (
            gateway_class(cond("Accepted", "False", "InvalidParameters", "", 1)),
            "unhealthy",
            "InvalidParameters",
            0,
        ),
        (
            gateway_class(cond("Accepted", "False", "Unsupported", "", 1)),
            "unhealthy",
            "Unsupported",
            0,
        ),
        (
            gateway_class(cond("Accepted", "Unknown", "Pending", "Waiting for controller")),
            "progressing",
            "Pending",
            0,
        ),
        (gateway_class(), "progressing", "Pending", 0),
        (gateway_class(ACCEPTED, gen=4), "progressing", "LatestGenerationNotObserved", 0),
    ],
)
def test_gateway_class_rule(obj: dict[str, Any], status: str, reason: str, warnings: int) -> None:
    check(evaluate("gateway", obj), status, reason, None, warnings)


def test_gateway_class_known_without_kind_field() -> None:
    """List items may come without `kind`: a GatewayClass is known by `spec.controllerName`."""
    obj = gateway_class(ACCEPTED)
    del obj["kind"]
    assert evaluate("gateway", obj).status == "healthy"
    gw = gateway(ACCEPTED)
    del gw["kind"]
    assert evaluate("gateway", gw).status == "progressing"


# -- route: status per parent ---------------------------------------------------------------------


def parent(
    name: str = "gw",
    *conds: dict[str, Any],
    namespace: str | None = "gateway-ns",
    section: str | None = None,
    port: int | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": "gateway.networking.k8s.io", "name": name}
    for key, value in (
        ("namespace", namespace),
        ("sectionName", section),
        ("port", port),
        ("kind", kind),
    ):
        if value is not None:
            ref[key] = value
    return {
        "parentRef": ref,
        "controllerName": "istio.io/gateway-controller",
        "conditions": list(conds),
    }


def route(*parents: dict[str, Any], gen: int = 1, status: bool = True) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop", "generation": gen},
        "spec": {"parentRefs": [p["parentRef"] for p in parents]},
    }
    if status:
        obj["status"] = {"parents": list(parents)}
    return obj


R_ACCEPTED = cond("Accepted", "True", "Accepted", "Route was valid", 1)
R_RESOLVED = cond("ResolvedRefs", "True", "ResolvedRefs", "All references resolved", 1)
NOT_ALLOWED = cond(
    "Accepted", "False", "NotAllowedByListeners", "no listener allows HTTPRoute from shop", 1
)
NO_BACKEND = cond("ResolvedRefs", "False", "BackendNotFound", 'Service "shop/web" not found', 1)
OK = (R_ACCEPTED, R_RESOLVED)


@pytest.mark.parametrize(
    ("obj", "status", "reason", "message", "warnings"),
    [
        # No parents: no controller has accepted the route.
        (route(status=False), "unknown", "", NOT_ACCEPTED, 0),
        (route(), "unknown", "", NOT_ACCEPTED, 0),
        # Every parent Accepted=True.
        (route(parent("gw", *OK)), "healthy", "Accepted", "Route was valid", 0),
        (route(parent("gw", *OK), parent("mesh-gw", R_ACCEPTED)), "healthy", "Accepted", None, 0),
        # Accepted=False: the message names the parent (namespace/name, section, port).
        (
            route(parent("gw", NOT_ALLOWED, section="https")),
            "unhealthy",
            "NotAllowedByListeners",
            "parent gateway-ns/gw (section https): NotAllowedByListeners: no listener allows HTTPRoute from shop",
            0,
        ),
        (
            route(
                parent(
                    "gw",
                    cond("Accepted", "False", "NoMatchingListenerHostname", "", 1),
                    namespace=None,
                )
            ),
            "unhealthy",
            "NoMatchingListenerHostname",
            "parent shop/gw: NoMatchingListenerHostname",
            0,
        ),
        (
            route(parent("gw", cond("Accepted", "False", "NoMatchingParent", "", 1), port=8443)),
            "unhealthy",
            "NoMatchingParent",
            "parent gateway-ns/gw (port 8443): NoMatchingParent",
            0,
        ),
        (
            route(
                parent(
                    "reviews",
                    cond("Accepted", "False", "UnsupportedValue", "", 1),
                    kind="Service",
                    namespace=None,
                )
            ),
            "unhealthy",
            "UnsupportedValue",
            "parent Service shop/reviews: UnsupportedValue",
            0,
        ),
        # ResolvedRefs=False while accepted.
        (
            route(parent("gw", R_ACCEPTED, NO_BACKEND, section="http", port=80)),
            "unhealthy",
            "BackendNotFound",
            'parent gateway-ns/gw (section http, port 80): BackendNotFound: Service "shop/web" not found',
            0,
        ),
        (
            route(
                parent("gw", R_ACCEPTED, cond("ResolvedRefs", "False", "RefNotPermitted", "", 1))
            ),
            "unhealthy",
            "RefNotPermitted",
            None,
            0,
        ),
        (
            route(parent("gw", R_ACCEPTED, cond("ResolvedRefs", "False", "InvalidKind", "", 1))),
            "unhealthy",
            "InvalidKind",
            None,
            0,
        ),
        # Any failing parent makes the route unhealthy; the others are counted.
        (
            route(parent("a", *OK), parent("b", NOT_ALLOWED)),
            "unhealthy",
            "NotAllowedByListeners",
            None,
            0,
        ),
        (
            route(parent("a", NOT_ALLOWED), parent("b", R_ACCEPTED, NO_BACKEND)),
            "unhealthy",
            "NotAllowedByListeners",
            "parent gateway-ns/a: NotAllowedByListeners: no listener allows HTTPRoute from shop (and 1 more failing parent(s))",
            0,
        ),
        # Not decided yet, or decided for an older spec.
        (
            route(parent("gw", cond("Accepted", "Unknown", "Pending", ""))),
            "progressing",
            "Pending",
            f"parent gateway-ns/gw: {WAITING_CONTROLLER}",
            0,
        ),
        (
            route(parent("gw", R_ACCEPTED, cond("ResolvedRefs", "Unknown", "Pending", "", 1))),
            "progressing",
            "Pending",
            None,
            0,
        ),
        (
            route(parent("gw", R_RESOLVED)),
            "progressing",
            "Pending",
            f"parent gateway-ns/gw: Accepted: {WAITING_CONTROLLER}",
            0,
        ),
        (
            route(parent("gw", *OK), gen=2),
            "progressing",
            "LatestGenerationNotObserved",
            "parent gateway-ns/gw: Accepted describes generation 1, the object is at generation 2",
            0,
        ),
        (
            route(parent("gw", NOT_ALLOWED), gen=2),
            "progressing",
            "LatestGenerationNotObserved",
            None,
            0,
        ),
        # PartiallyInvalid: a warning; "Fall Back" keeps Accepted at the last good generation.
        (
            route(
                parent(
                    "gw",
                    R_ACCEPTED,
                    R_RESOLVED,
                    cond(
                        "PartiallyInvalid",
                        "True",
                        "UnsupportedValue",
                        "Fall Back: rule 2 invalid",
                        2,
                    ),
                ),
                gen=2,
            ),
            "healthy",
            "UnsupportedValue",
            "parent gateway-ns/gw: UnsupportedValue: Fall Back: rule 2 invalid",
            1,
        ),
        (
            route(
                parent(
                    "gw",
                    R_ACCEPTED,
                    cond("PartiallyInvalid", "True", "UnsupportedValue", "Dropped Rule 1", 1),
                )
            ),
            "healthy",
            "UnsupportedValue",
            None,
            1,
        ),
    ],
)
def test_route_rule(
    obj: dict[str, Any], status: str, reason: str, message: str | None, warnings: int
) -> None:
    check(evaluate("route", obj), status, reason, message, warnings)


# -- policy: Kuadrant ---------------------------------------------------------------------------


def policy(
    *conds: dict[str, Any], gen: int = 1, observed: int = 1, kind: str = "AuthPolicy"
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kuadrant.io/v1",
        "kind": kind,
        "metadata": {"name": "p", "namespace": "shop", "generation": gen},
        "spec": {
            "targetRef": {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}
        },
    }
    if conds:
        obj["status"] = {"observedGeneration": observed, "conditions": list(conds)}
    return obj


P_ACCEPTED = cond("Accepted", "True", "Accepted", "AuthPolicy has been accepted")
ENFORCED = cond("Enforced", "True", "Enforced", "AuthPolicy has been successfully enforced")
PARTIAL = cond("Enforced", "True", "Enforced", "AuthPolicy has been partially enforced")
OVERRIDDEN = cond(
    "Enforced", "False", "Overridden", "AuthPolicy is overridden by [gateway-ns/gw-auth]"
)


@pytest.mark.parametrize(
    ("obj", "status", "reason", "message", "warnings"),
    [
        (policy(), "unknown", "", None, 0),
        (policy(P_ACCEPTED, ENFORCED), "healthy", "Enforced", ENFORCED["message"], 0),
        (policy(P_ACCEPTED, PARTIAL), "healthy", "Enforced", PARTIAL["message"], 0),
        # Accepted=False (Kuadrant then removes Enforced).
        (
            policy(
                cond("Accepted", "False", "TargetNotFound", "AuthPolicy target web was not found")
            ),
            "unhealthy",
            "TargetNotFound",
            "AuthPolicy target web was not found",
            0,
        ),
        (
            policy(
                cond("Accepted", "False", "Conflicted", "AuthPolicy is conflicted by shop/other")
            ),
            "unhealthy",
            "Conflicted",
            None,
            0,
        ),
        (
            policy(cond("Accepted", "False", "Invalid", "AuthPolicy target is invalid: x")),
            "unhealthy",
            "Invalid",
            None,
            0,
        ),
        (
            policy(cond("Accepted", "False", "MissingDependency", "[Authorino] is not installed")),
            "unhealthy",
            "MissingDependency",
            None,
            0,
        ),
        # Overridden: in effect elsewhere, a warning.
        (policy(P_ACCEPTED, OVERRIDDEN), "healthy", "Overridden", OVERRIDDEN["message"], 1),
        (
            policy(P_ACCEPTED, cond("Enforced", "False", "Overridden", "")),
            "healthy",
            "Overridden",
            "overridden by another policy",
            1,
        ),
        # Enforced=False for any other reason.
        (
            policy(
                P_ACCEPTED,
                cond(
                    "Enforced",
                    "False",
                    "Unknown",
                    "AuthPolicy is not in the path to any existing routes",
                ),
            ),
            "unhealthy",
            "Unknown",
            "AuthPolicy is not in the path to any existing routes",
            0,
        ),
        (
            policy(P_ACCEPTED, cond("Enforced", "False", "MissingDependency", "")),
            "unhealthy",
            "MissingDependency",
            None,
            0,
        ),
        # Not decided yet.
        (policy(P_ACCEPTED), "progressing", "Pending", f"Enforced: {WAITING_CONTROLLER}", 0),
        (
            policy(P_ACCEPTED, cond("Enforced", "Unknown", "Unknown", "")),
            "progressing",
            "Unknown",
            WAITING_CONTROLLER,
            0,
        ),
        (policy(cond("Accepted", "Unknown", "Pending", "")), "progressing", "Pending", None, 0),
        (policy(ENFORCED), "progressing", "Pending", f"Accepted: {WAITING_CONTROLLER}", 0),
        (
            policy(cond("Accepted", "False", "TargetNotFound", ""), gen=3, observed=2),
            "progressing",
            "LatestGenerationNotObserved",
            None,
            0,
        ),
    ],
)
def test_policy_rule(
    obj: dict[str, Any], status: str, reason: str, message: str | None, warnings: int
) -> None:
    check(evaluate("policy", obj), status, reason, message, warnings)


@pytest.mark.parametrize("kind", ["AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy"])
def test_every_kuadrant_policy_uses_accepted_and_enforced(kind: str) -> None:
    accepted = cond("Accepted", "True", "Accepted", f"{kind} has been accepted")
    enforced = cond("Enforced", "True", "Enforced", f"{kind} has been successfully enforced")
    assert evaluate("policy", policy(accepted, enforced, kind=kind)).status == "healthy"
    assert evaluate("policy", policy(accepted, kind=kind)).status == "progressing"


def test_dns_policy_failing_health_checks_are_a_warning() -> None:
    unhealthy_records = cond(
        "SubResourcesHealthy",
        "False",
        "Unknown",
        "DNSPolicy has encountered some issues: not all sub-resources of policy are passing the "
        "policy defined health check. Not healthy DNSRecords are: web-api",
    )
    s = evaluate("policy", policy(P_ACCEPTED, ENFORCED, unhealthy_records, kind="DNSPolicy"))
    check(s, "healthy", "Unknown", None, 1)
    assert "web-api" in s.message


# -- revision -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"lastAppliedRevision": "main@sha1:1"}, "main@sha1:1"),
        ({"artifact": {"revision": "6.5.0@sha256:2"}}, "6.5.0@sha256:2"),
        ({"history": [{"chartVersion": "1.2.3"}]}, "1.2.3"),
        ({"lastAttemptedRevision": "1.2.4", "history": [{"chartVersion": "1.2.3"}]}, "1.2.4"),
        ({"latestRef": {"name": "ghcr.io/x/y", "tag": "1.0"}}, "ghcr.io/x/y:1.0"),
        ({}, ""),
    ],
)
def test_revision(status: dict[str, Any], expected: str) -> None:
    assert revision({"status": status}) == expected


def test_a_policy_controllers_parent_entry_does_not_count_as_a_gateway() -> None:
    """Kuadrant adds a `status.parents[]` entry with only its own `kuadrant.io/...Affected`
    condition to every route a policy affects; the Gateway's entry decides."""
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok"}
    affected = {"type": "kuadrant.io/AuthPolicyAffected", "status": "True", "reason": "Accepted"}
    gateway_entry = {
        "parentRef": {"name": "gw"},
        "controllerName": "istio.io/gateway-controller",
        "conditions": [accepted],
    }
    kuadrant_entry = {
        "parentRef": {"name": "gw"},
        "controllerName": "kuadrant.io/policy-controller",
        "conditions": [affected],
    }
    route = {
        "metadata": {"namespace": "shop"},
        "status": {"parents": [gateway_entry, kuadrant_entry]},
    }
    assert evaluate("route", route).status == "healthy"
    only_policy = {"metadata": {"namespace": "shop"}, "status": {"parents": [kuadrant_entry]}}
    assert evaluate("route", only_policy).status == "unknown"
    assert (
        evaluate("route", {"status": {"parents": [{**gateway_entry, "conditions": []}]}}).status
        == "progressing"
    )


def test_a_suspended_object_keeps_its_last_verdict_although_its_generation_moved() -> None:
    """`flux suspend` patches the spec (generation + 1) and the controller stops reconciling,
    so observedGeneration stays behind for as long as it is suspended."""
    failed = {"type": "Ready", "status": "False", "reason": "BuildFailed", "message": "boom"}
    obj = {
        "metadata": {"generation": 3},
        "spec": {"suspend": True},
        "status": {"observedGeneration": 2, "conditions": [failed]},
    }
    s = evaluate("flux", obj)
    assert (s.status, s.reason) == ("unhealthy", "BuildFailed") and is_suspended("flux", obj)
    resumed = {**obj, "spec": {"suspend": False}}
    assert evaluate("flux", resumed).status == "progressing"  # resumed: waiting for the controller


def test_a_non_ascii_digit_generation_is_no_generation() -> None:
    # "²".isdigit() holds and int("²") raises: one such object must not fail a cluster's sync.
    obj = {
        "metadata": {"generation": 2},
        "status": {
            "observedGeneration": "²",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded"}],
        },
    }
    assert evaluate("flux", obj).status in {"healthy", "progressing", "unknown"}


# -- stale conditions and Kuadrant's transient Enforced=False (issue #40) -----------------------
# A metav1.Condition names the generation it judged in its own observedGeneration: below
# metadata.generation it is a verdict on an older spec (gateway-api GEP-1364, Kuadrant and Flux
# set it per condition), whatever status.observedGeneration says.


@pytest.mark.parametrize(
    "ready",
    [
        cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:abc", 2),
        cond("Ready", "False", "BuildFailed", "kustomize build failed", 2),
    ],
)
def test_a_flux_ready_condition_of_an_older_generation_is_stale(ready: dict[str, Any]) -> None:
    s = evaluate("flux", flux(ready, gen=3, observed=3))
    check(s, "progressing", "LatestGenerationNotObserved", None)
    assert "generation 2" in s.message and "generation 3" in s.message, s.message
    # The same verdict at the current generation stands; a suspended object keeps its verdict.
    current = {**ready, "observedGeneration": 3}
    assert evaluate("flux", flux(current, gen=3, observed=3)).status != "progressing"
    assert evaluate("flux", flux(ready, gen=3, observed=3, suspend=True)).status != "progressing"


def test_a_stale_stalled_condition_is_not_a_failure() -> None:
    stalled = cond("Stalled", "True", "ArtifactFailed", "artifact not found", 1)
    s = evaluate("conditions", flux(stalled, NOT_READY, gen=2, observed=2))
    check(s, "progressing", "LatestGenerationNotObserved", None)


@pytest.mark.parametrize(
    "conds",
    [
        (
            cond("Accepted", "True", "Accepted", "ok", 1),
            cond("Enforced", "True", "Enforced", "", 2),
        ),
        (
            cond("Accepted", "True", "Accepted", "ok", 2),
            cond("Enforced", "True", "Enforced", "", 1),
        ),
        (cond("Accepted", "False", "TargetNotFound", "AuthPolicy target web was not found", 1),),
        (cond("Accepted", "True", "Accepted", "ok", 2), cond("Enforced", "False", "X", "no", 1)),
    ],
)
def test_a_policy_condition_of_an_older_generation_is_stale(
    conds: tuple[dict[str, Any], ...],
) -> None:
    # status.observedGeneration is current: only the condition's own generation is old.
    s = evaluate("policy", policy(*conds, gen=2, observed=2))
    check(s, "progressing", "LatestGenerationNotObserved", None)
    assert "describes generation 1" in s.message, s.message


def test_a_policy_with_current_conditions_is_judged_by_them() -> None:
    accepted = cond("Accepted", "True", "Accepted", "ok", 2)
    enforced = cond("Enforced", "True", "Enforced", "AuthPolicy has been successfully enforced", 2)
    assert evaluate("policy", policy(accepted, enforced, gen=2, observed=2)).status == "healthy"


@pytest.mark.parametrize("kind", ["AuthPolicy", "RateLimitPolicy", "TokenRateLimitPolicy"])
def test_kuadrant_waiting_for_components_to_sync_is_progressing(kind: str) -> None:
    message = f"{kind} waiting for the following components to sync: [Limitador]"
    s = evaluate("policy", policy(P_ACCEPTED, cond("Enforced", "False", "Unknown", message)))
    check(s, "progressing", "Unknown", message)
    # The same reason for a policy in the path of no route stays a failure.
    stuck = cond(
        "Enforced", "False", "Unknown", f"{kind} is not in the path to any existing routes"
    )
    assert evaluate("policy", policy(P_ACCEPTED, stuck)).status == "unhealthy"
