"""Status rules: one raw Kubernetes object -> Status(status, reason, message, lastTransitionTime,
warnings). Suspension is not a status: `is_suspended` reports it beside the health.

The table (also in docs/architecture.md); within a rule, the first row that matches wins:

| rule       | when                                                              | status      |
|------------|-------------------------------------------------------------------|-------------|
| flux       | `metadata.deletionTimestamp` set                                  | progressing (Terminating) |
| flux       | observedGeneration < generation (not while suspended), Reconciling=True, Ready=Unknown | progressing |
| flux       | Ready or Stalled with its own observedGeneration < generation (not while suspended) | progressing (stale) |
| flux       | Stalled=True                                                      | unhealthy   |
| flux       | Ready=True                                                        | healthy     |
| flux       | Ready=False                                                       | unhealthy   |
| flux       | no Ready condition                                                | unknown ("waiting to be reconciled") |
| conditions | extra kinds: as flux                                              | as flux     |
| static     | Alert/Provider v1beta3, ReferenceGrant: no status by design       | healthy     |
| istio      | any error: fleetscope's findings first, then istiod's `validationMessages` | unhealthy (reason = code) |
| istio      | no findings (None: no check for the kind) and no istiod status    | unknown (NotChecked) |
| istio      | otherwise; the first warning (else INFO) is the message           | healthy (+ warnings) |
| gateway    | no conditions                                                     | progressing ("waiting for controller") |
| gateway    | a condition (object or listener) with observedGeneration < generation | progressing |
| gateway    | Accepted=False; Programmed=False (reason not Pending); ResolvedRefs=False | unhealthy |
| gateway    | a listener: Accepted=False, ResolvedRefs=False, Conflicted=True, Programmed=False (not Pending) | unhealthy |
| gateway    | Programmed=False/Pending; Accepted or Programmed missing/Unknown (object or listener) | progressing |
| gateway    | otherwise (SupportedVersion=False, listener OverlappingTLSConfig=True are warnings) | healthy |
| route      | no `status.parents`                                               | unknown ("not accepted by any Gateway yet") |
| route      | a parent's Accepted/ResolvedRefs observedGeneration < generation  | progressing |
| route      | a parent with Accepted=False or ResolvedRefs=False                | unhealthy   |
| route      | a parent with Accepted missing/Unknown or ResolvedRefs=Unknown    | progressing |
| route      | every parent Accepted=True (PartiallyInvalid=True is a warning)   | healthy     |
| policy     | no conditions                                                     | unknown     |
| policy     | status.observedGeneration < generation                            | progressing |
| policy     | Accepted or Enforced with its own observedGeneration < generation | progressing (stale) |
| policy     | Accepted=False                                                    | unhealthy   |
| policy     | Accepted missing/Unknown; Accepted=True with Enforced missing/Unknown | progressing |
| policy     | Enforced=False, reason Overridden                                 | healthy (a warning) |
| policy     | Enforced=False, reason Unknown, "waiting for the following components to sync" | progressing |
| policy     | Enforced=False, any other reason                                  | unhealthy   |
| policy     | Enforced=True (DNSPolicy SubResourcesHealthy=False is a warning)  | healthy     |

Flux's message is Stalled's, else Ready's, else Reconciling's; all messages are cut to
MESSAGE_MAX characters. Gateway (GatewayClass carries only Accepted and SupportedVersion, so
Programmed is required of a Gateway only) and routes follow gateway-api apis/v1 condition types;
a route parent with PartiallyInvalid=True is exempt from the generation check, since "Fall Back"
keeps Accepted at the last good generation on purpose. Istio's `Reconciled` condition reports
distribution to proxies, not validity: it does not change the status.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard

STATUSES = ("healthy", "unhealthy", "progressing", "unknown")
MESSAGE_MAX = 240
WAITING = "waiting to be reconciled"
WAITING_CONTROLLER = "waiting for controller"
NOT_ACCEPTED = "not accepted by any Gateway yet"
SYNCING = "waiting for the following components to sync"
NOT_CHECKED = "not validated: no fleetscope check for this kind and no istiod status"


class Status(NamedTuple):
    """An object's health and what explains it (a tuple: one is made per collected object, and
    a frozen dataclass cost a third of the simpler rules)."""

    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""
    warnings: int = 0
    """Warnings found on the object (Istio validation, an overridden policy ...): they keep the
    status, and set the message when nothing worse does."""


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
        return _istio(obj, findings)
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


# -- shared helpers ----------------------------------------------------------------------------


class _Note(NamedTuple):
    """A problem or warning found while evaluating: the reason and the whole message."""

    reason: str
    text: str
    last_transition_time: str = ""

    def status(self, status: str, warnings: int = 0) -> Status:
        return Status(status, self.reason, _cut(self.text), self.last_transition_time, warnings)


def _status_block(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _by_type(conds: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(conds, list):
        return {}
    return {c["type"]: c for c in conds if isinstance(c, dict) and isinstance(c.get("type"), str)}


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _by_type(_status_block(obj).get("conditions"))


def _int(value: Any) -> int | None:
    """A generation: an int, or a numeric string (Istio writes int64 as int-or-string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():  # "²".isdigit() holds
        return int(value)
    return None


def _generation(obj: dict[str, Any]) -> int | None:
    meta = obj.get("metadata")
    return _int(meta.get("generation")) if isinstance(meta, dict) else None


def _is(cond: dict[str, Any] | None, status: str) -> TypeGuard[dict[str, Any]]:
    return cond is not None and cond.get("status") == status


def _is_true(cond: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    return _is(cond, "True")


def _pending(cond: dict[str, Any] | None) -> bool:
    """Missing, Unknown, or False with reason Pending: the controller has not decided yet."""
    if cond is None or cond.get("status") not in ("True", "False"):
        return True
    return cond.get("status") == "False" and cond.get("reason") == "Pending"


def _note(cond: dict[str, Any], prefix: str = "", default_message: str = "") -> _Note:
    """`prefix: Reason: message` from a condition (the parts that are there)."""
    reason = str(cond.get("reason") or cond.get("type") or "")
    parts = [p for p in (prefix, reason, str(cond.get("message") or default_message)) if p]
    return _Note(reason, ": ".join(parts), str(cond.get("lastTransitionTime") or ""))


def _stale(
    conds: Iterable[dict[str, Any]], generation: int | None, prefix: str = ""
) -> _Note | None:
    """A note for the first condition that describes an older generation of the object."""
    if generation is None:
        return None
    for c in conds:
        observed = _int(c.get("observedGeneration"))
        if observed is not None and observed < generation:
            where = f"{prefix}: " if prefix else ""
            return _Note(
                "LatestGenerationNotObserved",
                f"{where}{c.get('type')} describes generation {observed}, "
                f"the object is at generation {generation}",
                str(c.get("lastTransitionTime") or ""),
            )
    return None


def _from(cond: dict[str, Any] | None, status: str, default_reason: str = "") -> Status:
    if cond is None:
        return Status(status, default_reason)
    return Status(
        status,
        str(cond.get("reason") or default_reason),
        _cut(str(cond.get("message") or "")),
        str(cond.get("lastTransitionTime") or ""),
    )


def _with_warnings(status: Status, warnings: Sequence[_Note]) -> Status:
    """Warnings keep the status; on a healthy object the first one becomes reason and message."""
    if not warnings:
        return status
    if status.status == "healthy":
        return warnings[0].status("healthy", len(warnings))
    return status._replace(warnings=len(warnings))


# -- flux and conditions: kstatus ---------------------------------------------------------------


def _kstatus(obj: dict[str, Any]) -> Status:
    meta = obj.get("metadata") or {}
    block = _status_block(obj)
    ready = stalled = reconciling = None
    conds = block.get("conditions")
    if isinstance(conds, list):  # as _by_type: the last condition of a type counts
        for c in conds:
            if isinstance(c, dict):
                kind = c.get("type")
                if kind == "Ready":
                    ready = c
                elif kind == "Stalled":
                    stalled = c
                elif kind == "Reconciling":
                    reconciling = c
    if meta.get("deletionTimestamp"):
        return Status("progressing", "Terminating", "object is being deleted")
    observed = _int(block.get("observedGeneration"))
    generation = _generation(obj)
    # A suspended object is not reconciled, so its controller never observes the generation
    # that suspended it (`flux suspend` patches the spec): its last verdict stands.
    spec = obj.get("spec")
    suspended = isinstance(spec, dict) and spec.get("suspend") is True
    behind = observed is not None and generation is not None and observed < generation
    if behind and not suspended:
        # The condition whose text explains the state best: Stalled, Ready, Reconciling.
        explain = next(
            (c for c in (stalled, ready, reconciling) if c is not None and _is_true(c)),
            stalled or ready or reconciling,
        )
        s = _from(explain, "progressing")
        return Status(
            "progressing", "LatestGenerationNotObserved", s.message, s.last_transition_time
        )
    # A Ready or Stalled condition carrying its own observedGeneration (metav1.Condition, as
    # Flux sets it) below the object's generation is a verdict on an older spec.
    stale = None
    if not suspended and generation is not None:
        stale = _stale([c for c in (ready, stalled) if c], generation)
    if stale:
        return stale.status("progressing")
    if _is_true(reconciling) or _is(ready, "Unknown"):
        return _from(reconciling if _is_true(reconciling) else ready, "progressing", "Progressing")
    if _is_true(stalled):
        return _from(stalled, "unhealthy", "Stalled")
    if ready is None:
        return Status("unknown", "", WAITING)
    if ready.get("status") == "True":
        return _from(ready, "healthy")
    return _from(ready, "unhealthy")


# -- istio: fleetscope's findings merged with istiod's validationMessages -----------------------

_LEVELS = {
    "ERROR": "error",
    "3": "error",
    "WARNING": "warning",
    "WARN": "warning",
    "8": "warning",
    "INFO": "info",
    "12": "info",
}


def _istio(obj: dict[str, Any], findings: Sequence[Finding] | None) -> Status:
    istiod = _istiod_messages(obj)
    if findings is None and istiod is None:
        return Status("unknown", "NotChecked", NOT_CHECKED)
    notes: dict[str, list[_Note]] = {"error": [], "warning": [], "info": []}
    for f in findings or ():
        level = _LEVELS.get(f.level.upper())
        if level:
            notes[level].append(_Note(f.code, f"{f.code} {f.message}".strip()))
    for level, note in istiod or ():
        notes[level].append(note)
    errors, warnings, infos = notes["error"], notes["warning"], notes["info"]
    if errors:
        return errors[0].status("unhealthy", len(warnings))
    if warnings:
        return warnings[0].status("healthy", len(warnings))
    return infos[0].status("healthy") if infos else Status("healthy")


def _istiod_messages(obj: dict[str, Any]) -> list[tuple[str, _Note]] | None:
    """istiod's validation messages as (level, note); None when istiod wrote no status at all
    (status is off by default), [] when it did and found nothing to report."""
    status = _status_block(obj)
    messages = status.get("validationMessages")
    wrote = (
        isinstance(messages, list)
        or bool(status.get("conditions"))
        or status.get("observedGeneration") not in (None, "")
    )
    if not wrote:
        return None
    out = []
    for m in messages if isinstance(messages, list) else ():
        level = _LEVELS.get(str(m.get("level", "")).upper()) if isinstance(m, dict) else None
        if level and isinstance(m, dict):
            out.append((level, _istiod_note(m)))
    return out


def _istiod_note(m: dict[str, Any]) -> _Note:
    typ = m.get("type")
    if isinstance(typ, dict):  # the API type: {type: {code, name}, level, documentationUrl}
        code, name = str(typ.get("code") or ""), str(typ.get("name") or "")
    else:  # older docs: {code, level, message}
        code, name = str(m.get("code") or ""), ""
    text = " ".join(p for p in (code, name) if p)
    if m.get("message"):
        text = f"{text}: {m['message']}" if name else f"{text} {m['message']}".strip()
    return _Note(code or name, text)


# -- gateway: GatewayClass and Gateway ---------------------------------------------------------

_GATEWAY_TYPES = ("Accepted", "Programmed", "ResolvedRefs", "SupportedVersion")
_LISTENER_TYPES = ("Accepted", "Programmed", "ResolvedRefs", "Conflicted", "OverlappingTLSConfig")


def _gateway(obj: dict[str, Any]) -> Status:
    conds = _conditions(obj)
    if not conds:
        return Status("progressing", "Pending", WAITING_CONTROLLER)
    listeners = _listeners(obj)
    generation = _generation(obj)
    stale = _stale((conds[t] for t in _GATEWAY_TYPES if t in conds), generation) or next(
        (
            note
            for name, lc in listeners
            if (note := _stale((lc[t] for t in _LISTENER_TYPES if t in lc), generation, name))
        ),
        None,
    )
    warnings = _gateway_warnings(conds, listeners)
    if stale:
        return stale.status("progressing")
    problem = _gateway_problem(conds) or next(
        (p for name, lc in listeners if (p := _listener_problem(name, lc))), None
    )
    if problem:
        return _with_warnings(problem.status("unhealthy"), warnings)
    required = ("Accepted",) if _is_gateway_class(obj) else ("Accepted", "Programmed")
    waiting = [_waiting(t, conds.get(t)) for t in required if _pending(conds.get(t))]
    waiting += [
        _waiting(t, lc[t], name)
        for name, lc in listeners
        for t in ("Accepted", "Programmed")
        if t in lc and _pending(lc[t])
    ]
    if waiting:
        return _with_warnings(waiting[0].status("progressing"), warnings)
    return _with_warnings(_from(conds.get(required[-1]), "healthy"), warnings)


def _is_gateway_class(obj: dict[str, Any]) -> bool:
    spec = obj.get("spec")
    return obj.get("kind") == "GatewayClass" or (
        isinstance(spec, dict) and "controllerName" in spec
    )


def _listeners(obj: dict[str, Any]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    listeners = _status_block(obj).get("listeners")
    if not isinstance(listeners, list):
        return []
    return [
        (f"listener {item.get('name') or '?'}", _by_type(item.get("conditions")))
        for item in listeners
        if isinstance(item, dict)
    ]


def _gateway_problem(conds: dict[str, dict[str, Any]]) -> _Note | None:
    accepted, programmed, refs = (conds.get(t) for t in ("Accepted", "Programmed", "ResolvedRefs"))
    if _is(accepted, "False"):
        return _note(accepted)
    if _is(programmed, "False") and not _pending(programmed):
        return _note(programmed)
    if _is(refs, "False"):
        return _note(refs)
    return None


def _listener_problem(name: str, lc: dict[str, dict[str, Any]]) -> _Note | None:
    for t, bad in (("Accepted", "False"), ("ResolvedRefs", "False"), ("Conflicted", "True")):
        cond = lc.get(t)
        if _is(cond, bad):
            return _note(cond, name)
    programmed = lc.get("Programmed")
    if _is(programmed, "False") and not _pending(programmed):
        return _note(programmed, name)
    return None


def _gateway_warnings(
    conds: dict[str, dict[str, Any]], listeners: list[tuple[str, dict[str, dict[str, Any]]]]
) -> list[_Note]:
    warnings = []
    version = conds.get("SupportedVersion")
    if _is(version, "False"):
        warnings.append(_note(version))
    for name, lc in listeners:
        overlap = lc.get("OverlappingTLSConfig")
        if _is_true(overlap):
            warnings.append(_note(overlap, name))
    return warnings


def _waiting(type_: str, cond: dict[str, Any] | None, where: str = "") -> _Note:
    """A condition the controller has not decided yet (missing, Unknown, or Pending)."""
    if cond is None:
        return _Note("Pending", ": ".join(p for p in (where, type_, WAITING_CONTROLLER) if p))
    message = str(cond.get("message") or WAITING_CONTROLLER)
    text = f"{where}: {message}" if where else message
    return _Note(
        str(cond.get("reason") or "Pending"), text, str(cond.get("lastTransitionTime") or "")
    )


# -- route: HTTPRoute, GRPCRoute, TLSRoute, TCPRoute (status per parent) ------------------------


def _route(obj: dict[str, Any]) -> Status:
    parents = _parents(obj)
    if not parents:
        return Status("unknown", "", NOT_ACCEPTED)
    generation = _generation(obj)
    warnings = [
        _note(pc["PartiallyInvalid"], p)
        for p, pc in parents
        if _is_true(pc.get("PartiallyInvalid"))
    ]
    for where, pc in parents:
        if "PartiallyInvalid" in pc:  # "Fall Back" keeps Accepted at an older generation
            continue
        stale = _stale((pc[t] for t in ("Accepted", "ResolvedRefs") if t in pc), generation, where)
        if stale:
            return _with_warnings(stale.status("progressing"), warnings)
    failing = [
        (where, _note(c, where))
        for where, pc in parents
        for c in (pc.get("Accepted"), pc.get("ResolvedRefs"))
        if _is(c, "False")
    ]
    if failing:
        first = failing[0][1]
        more = len({where for where, _ in failing}) - 1
        if more:
            first = first._replace(text=f"{first.text} (and {more} more failing parent(s))")
        return _with_warnings(first.status("unhealthy"), warnings)
    for where, pc in parents:
        accepted, refs = pc.get("Accepted"), pc.get("ResolvedRefs")
        if not _is_true(accepted):
            return _with_warnings(
                _waiting("Accepted", accepted, where).status("progressing"), warnings
            )
        if _is(refs, "Unknown"):
            return _with_warnings(
                _waiting("ResolvedRefs", refs, where).status("progressing"), warnings
            )
    return _with_warnings(_from(parents[0][1].get("Accepted"), "healthy"), warnings)


def _parents(obj: dict[str, Any]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    parents = _status_block(obj).get("parents")
    if not isinstance(parents, list):
        return []
    meta = obj.get("metadata")
    namespace = str(meta.get("namespace") or "") if isinstance(meta, dict) else ""
    out = []
    for p in parents:
        if not isinstance(p, dict):
            continue
        conds = _by_type(p.get("conditions"))
        # Policy controllers (Kuadrant's `kuadrant.io/policy-controller`) add their own entry
        # holding only domain-prefixed conditions (`kuadrant.io/AuthPolicyAffected`): it says
        # nothing about whether a Gateway accepted the route.
        if conds and all("/" in t for t in conds):
            continue
        out.append((_parent_name(p.get("parentRef"), namespace), conds))
    return out


def _parent_name(ref: Any, route_namespace: str) -> str:
    """`parent gw-ns/gw (section https, port 443)`; the kind is named when not a Gateway."""
    ref = ref if isinstance(ref, dict) else {}
    kind = str(ref.get("kind") or "Gateway")
    namespace = str(ref.get("namespace") or route_namespace)
    name = f"{namespace}/{ref.get('name') or '?'}" if namespace else str(ref.get("name") or "?")
    details = [f"section {ref['sectionName']}"] if ref.get("sectionName") else []
    details += [f"port {ref['port']}"] if ref.get("port") else []
    text = "parent " + ("" if kind == "Gateway" else f"{kind} ") + name
    return f"{text} ({', '.join(details)})" if details else text


# -- policy: Kuadrant AuthPolicy, RateLimitPolicy, DNSPolicy, TLSPolicy -------------------------


def _policy(obj: dict[str, Any]) -> Status:
    conds = _conditions(obj)
    if not conds:
        return Status("unknown", "", "no status from the Kuadrant operator yet")
    observed, generation = _int(_status_block(obj).get("observedGeneration")), _generation(obj)
    if observed is not None and generation is not None and observed < generation:
        return Status(
            "progressing",
            "LatestGenerationNotObserved",
            f"status describes generation {observed}, the policy is at generation {generation}",
        )
    accepted, enforced = conds.get("Accepted"), conds.get("Enforced")
    stale = _stale((c for c in (accepted, enforced) if c), generation)
    if stale:
        return stale.status("progressing")
    if _is(accepted, "False"):
        return _from(accepted, "unhealthy")
    if not _is_true(accepted):
        return _waiting("Accepted", accepted).status("progressing")
    if enforced is None or enforced.get("status") not in ("True", "False"):
        return _waiting("Enforced", enforced).status("progressing")
    if _is(enforced, "False") and enforced.get("reason") == "Overridden":
        return _overridden(enforced).status("healthy", 1)
    if _is(enforced, "False") and _syncing(enforced):
        return _waiting("Enforced", enforced).status("progressing")
    if _is(enforced, "False"):
        return _from(enforced, "unhealthy")
    health = conds.get("SubResourcesHealthy")  # DNSPolicy with health checks
    warnings = [_note(health)] if _is(health, "False") else []
    return _with_warnings(_from(enforced, "healthy"), warnings)


def _syncing(enforced: dict[str, Any]) -> bool:
    """Kuadrant's transient Enforced=False (reason `Unknown`, "<Kind> waiting for the following
    components to sync: [...]"): a component it relies on (Limitador, Authorino, the Gateway) has
    not caught up yet. The same reason with "not in the path to any existing routes" stays a
    failure: nothing will enforce that policy until its target changes."""
    message = str(enforced.get("message") or "").lower()
    return enforced.get("reason") == "Unknown" and SYNCING in message


def _overridden(enforced: dict[str, Any]) -> _Note:
    message = str(enforced.get("message") or "")
    if "overridden" not in message.lower():
        message = (
            f"overridden by another policy: {message}"
            if message
            else "overridden by another policy"
        )
    return _Note("Overridden", message, str(enforced.get("lastTransitionTime") or ""))


# -- revision -----------------------------------------------------------------------------------


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
