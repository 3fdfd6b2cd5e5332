"""Status rules: one raw Kubernetes object -> (status, reason, message, lastTransitionTime).

The table (also in docs/architecture.md), applied in this order:

| rule       | when                                                      | status      |
|------------|-----------------------------------------------------------|-------------|
| flux       | `spec.suspend: true`                                      | suspended   |
| flux       | `metadata.deletionTimestamp` set                          | progressing (Terminating) |
| flux       | observedGeneration < generation, Reconciling=True, Ready=Unknown | progressing |
| flux       | Stalled=True                                              | unhealthy   |
| flux       | Ready=True                                                | healthy     |
| flux       | Ready=False                                               | unhealthy   |
| flux       | no Ready condition                                        | unknown ("waiting to be reconciled") |
| static     | (notification Alert/Provider v1beta3: no status by design)| healthy     |
| istio      | a `validationMessages` entry of level ERROR               | unhealthy   |
| istio      | otherwise (WARNING/INFO text becomes the message)         | healthy     |
| conditions | extra kinds: the flux rule without `spec.suspend`         | as flux     |

The message is Stalled's, else Ready's, else Reconciling's, cut to MESSAGE_MAX characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

STATUSES = ("healthy", "unhealthy", "progressing", "unknown")
MESSAGE_MAX = 240
WAITING = "waiting to be reconciled"


@dataclass(frozen=True)
class Status:
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    warnings: int = 0
    """Warnings found on the object (Istio validation, an overridden policy): they keep the
    status but set the message."""


@dataclass(frozen=True)
class Finding:
    """One validation result on one object: `level` is `error` or `warning`, `code` a Kiali
    validation code where the check is the same as Kiali's (KIA1102 ...)."""

    level: str
    code: str
    message: str


def evaluate(rule: str, obj: dict[str, Any], findings: Sequence[Finding] | None = None) -> Status:
    """The status of `obj` under `rule` (one of common.kinds.registry.STATUS_RULES).

    `findings` are fleetscope's own validation results for the object (Istio kinds): None when
    no check ran for its kind, () when checks ran and found nothing."""
    if rule == "static":
        return Status("healthy")
    if rule == "istio":
        return _istio(obj)
    if rule == "gateway":
        return _gateway(obj)
    if rule == "route":
        return _route(obj)
    if rule == "policy":
        return _policy(obj)
    return _kstatus(obj)


def is_suspended(rule: str, obj: dict[str, Any]) -> bool:
    """Whether reconciliation is suspended (`spec.suspend: true`, Flux kinds): shown beside the
    health, never instead of it (as `flux get` shows SUSPENDED and READY apart)."""
    if rule != "flux":
        return False
    spec = obj.get("spec")
    return isinstance(spec, dict) and spec.get("suspend") is True


def _gateway(obj: dict[str, Any]) -> Status:
    return Status("unknown", "", "rule not implemented yet")


def _route(obj: dict[str, Any]) -> Status:
    return Status("unknown", "", "rule not implemented yet")


def _policy(obj: dict[str, Any]) -> Status:
    return Status("unknown", "", "rule not implemented yet")


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    status = obj.get("status") or {}
    conds = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conds, list):
        return {}
    return {c["type"]: c for c in conds if isinstance(c, dict) and isinstance(c.get("type"), str)}


def _from(cond: dict[str, Any] | None, status: str, default_reason: str = "") -> Status:
    if cond is None:
        return Status(status, default_reason)
    return Status(
        status,
        str(cond.get("reason") or default_reason),
        _cut(str(cond.get("message") or "")),
        str(cond.get("lastTransitionTime") or ""),
    )


def _kstatus(obj: dict[str, Any]) -> Status:
    meta = obj.get("metadata") or {}
    conds = _conditions(obj)
    ready, stalled, reconciling = conds.get("Ready"), conds.get("Stalled"), conds.get("Reconciling")
    # The condition whose text explains the state best: Stalled, then Ready, then Reconciling.
    explain = next(
        (c for c in (stalled, ready, reconciling) if c is not None and c.get("status") == "True"),
        stalled or ready or reconciling,
    )
    if meta.get("deletionTimestamp"):
        return Status("progressing", "Terminating", "object is being deleted")
    status_block = obj.get("status") or {}
    observed = status_block.get("observedGeneration") if isinstance(status_block, dict) else None
    generation = meta.get("generation")
    if isinstance(observed, int) and isinstance(generation, int) and observed < generation:
        s = _from(explain, "progressing")
        return Status(
            "progressing", "LatestGenerationNotObserved", s.message, s.last_transition_time
        )
    if _is_true(reconciling) or (ready is not None and ready.get("status") == "Unknown"):
        return _from(reconciling if _is_true(reconciling) else ready, "progressing", "Progressing")
    if _is_true(stalled):
        return _from(stalled, "unhealthy", "Stalled")
    if ready is None:
        return Status("unknown", "", WAITING)
    if ready.get("status") == "True":
        return _from(ready, "healthy")
    return _from(ready, "unhealthy")


def _is_true(cond: dict[str, Any] | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def _istio(obj: dict[str, Any]) -> Status:
    status = obj.get("status") or {}
    messages = status.get("validationMessages") if isinstance(status, dict) else None
    if not isinstance(messages, list) or not messages:
        return Status("healthy")
    worst: tuple[int, str, str] | None = None
    for m in messages:
        if not isinstance(m, dict):
            continue
        rank = _LEVELS.get(str(m.get("level", "")).upper(), 0)
        code, name = _istio_code(m)
        text = f"{code} {name}".strip()
        if m.get("message"):
            text = f"{text}: {m['message']}" if text else str(m["message"])
        if worst is None or rank > worst[0]:
            worst = (rank, code or name, text)
    if worst is None:
        return Status("healthy")
    rank, reason, text = worst
    return Status("unhealthy" if rank >= 3 else "healthy", reason, _cut(text))


_LEVELS = {"ERROR": 3, "WARNING": 2, "WARN": 2, "INFO": 1}


def _istio_code(m: dict[str, Any]) -> tuple[str, str]:
    typ = m.get("type")
    if isinstance(typ, dict):  # API type: {type: {code, name}}
        return str(typ.get("code") or ""), str(typ.get("name") or "")
    return str(m.get("code") or ""), ""  # older docs: {code, level, message}


def revision(obj: dict[str, Any]) -> str:
    """What Flux's list views show as REVISION (empty when the kind has none)."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return ""
    for key in ("lastAppliedRevision", "lastAttemptedRevision"):
        if status.get(key):
            return str(status[key])
    artifact = status.get("artifact")
    if isinstance(artifact, dict) and artifact.get("revision"):
        return str(artifact["revision"])
    history = status.get("history")
    if isinstance(history, list) and history and isinstance(history[0], dict):
        return str(history[0].get("chartVersion") or "")
    latest = status.get("latestImage") or status.get("latestRef")
    if isinstance(latest, dict):
        return ":".join(str(latest.get(k, "")) for k in ("name", "tag") if latest.get(k))
    return str(latest or "")


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "\u2026"
