"""Status rules: the table in common/kinds/status.py, row by row, for Flux, Istio and extra kinds."""

from __future__ import annotations

from typing import Any

import pytest

from common.kinds.status import MESSAGE_MAX, WAITING, evaluate, revision


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-01T00:00:00Z",
    }


def flux(
    *conds: dict[str, str],
    gen: int = 1,
    observed: int = 1,
    suspend: bool = False,
    deleting: bool = False,
    status: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x", "namespace": "n", "generation": gen}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-01T00:00:00Z"
    obj: dict[str, Any] = {"metadata": meta, "spec": {"suspend": suspend}}
    if status:
        obj["status"] = {"observedGeneration": observed, "conditions": list(conds)}
    return obj


READY = cond("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:abc")
NOT_READY = cond("Ready", "False", "BuildFailed", "kustomize build failed")
STALLED = cond("Stalled", "True", "ArtifactFailed", "artifact not found")
RECONCILING = cond("Reconciling", "True", "Progressing", "reconciliation in progress")


@pytest.mark.parametrize(
    ("obj", "status", "reason", "message"),
    [
        (flux(READY, suspend=True), "suspended", "Suspended", READY["message"]),
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
    s = evaluate("flux", obj)
    assert (s.status, s.reason, s.message) == (status, reason, message)


def test_static_kinds_are_healthy_without_status() -> None:
    assert evaluate("static", {"metadata": {}}).status == "healthy"


def test_conditions_rule_ignores_suspend() -> None:
    assert evaluate("conditions", flux(READY, suspend=True)).status == "healthy"


def test_long_messages_are_cut() -> None:
    long = cond("Ready", "False", "Failed", "x " * 500)
    assert len(evaluate("flux", flux(long)).message) == MESSAGE_MAX


@pytest.mark.parametrize(
    ("messages", "status", "reason"),
    [
        (None, "healthy", ""),
        (
            [{"type": {"code": "IST0101", "name": "ReferencedResourceNotFound"}, "level": "ERROR"}],
            "unhealthy",
            "IST0101",
        ),
        (
            [{"code": "IST0101", "level": "Error", "message": "host not found"}],
            "unhealthy",
            "IST0101",
        ),
        (
            [{"type": {"code": "IST0102", "name": "NamespaceNotInjected"}, "level": "WARNING"}],
            "healthy",
            "IST0102",
        ),
        (
            [{"code": "IST0102", "level": "Warn"}, {"code": "IST0106", "level": "ERROR"}],
            "unhealthy",
            "IST0106",
        ),
    ],
)
def test_istio_rules(messages: list[dict[str, Any]] | None, status: str, reason: str) -> None:
    obj: dict[str, Any] = {"metadata": {}, "status": {}}
    if messages is not None:
        obj["status"]["validationMessages"] = messages
    s = evaluate("istio", obj)
    assert (s.status, s.reason) == (status, reason)


def test_istio_warning_text_becomes_message() -> None:
    obj = {
        "status": {
            "validationMessages": [
                {
                    "type": {"code": "IST0102", "name": "NamespaceNotInjected"},
                    "level": "WARNING",
                    "message": "namespace is not injected",
                }
            ]
        }
    }
    assert (
        evaluate("istio", obj).message == "IST0102 NamespaceNotInjected: namespace is not injected"
    )


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
