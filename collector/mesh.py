"""Rows that need the cluster's other objects, for the full sync and the watcher alike: Istio rows
with fleetscope's own validation (common.kinds.istio_checks) and VirtualService -> DestinationRule
edges, and rows of kinds whose edges name Services (route backends), which record whether each
Service exists.

istiod writes `status.validationMessages` only with PILOT_ENABLE_STATUS and analysis on (both off
by default), so the collector checks each cluster's Istio config itself: over the cluster's Istio
objects plus its Services and Namespaces, which are listed for the checks and kept only as the
checks need them (they are not rows). A row of a checked kind is built with its findings; other
Istio kinds read `unknown` ("not checked") unless istiod reported on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from common.index import label_field, rows
from common.kinds import istio_checks, relations
from common.kinds.registry import Kind, KindRegistry
from common.kinds.status import Finding

MESH_GROUPS = frozenset({"networking.istio.io", "security.istio.io", "telemetry.istio.io"})
CORE_API = "v1"
SERVICES, NAMESPACES = "services", "namespaces"


def validated(kind: Kind) -> bool:
    """Whether rows of `kind` are built with fleetscope's findings (a checked Istio kind)."""
    return (
        kind.status_rule == "istio"
        and kind.group in MESH_GROUPS
        and kind.kind in istio_checks.CHECKED_KINDS
    )


def needs_services(kind: Kind) -> bool:
    """Whether rows of `kind` have edges to Services (route backends)."""
    return "gateway-backends" in kind.relations


CONTEXT_KINDS = frozenset({"K8sGateway"})
"""Kinds (registry keys) the checks read beside the checked ones: a VirtualService's
`gateways` may name a Gateway API Gateway, which satisfies the reference as istioctl analyze
has it."""


def held(kind: Kind) -> bool:
    """Whether rows of `kind` are built once the cluster's context is known (validated kinds,
    the kinds the checks read and kinds with Service edges): the full sync holds them to the
    end, the watcher keeps them (and re-validates when they change)."""
    return validated(kind) or needs_services(kind) or kind.key in CONTEXT_KINDS


def held_kinds(registry: KindRegistry, served: Mapping[str, str]) -> list[Kind]:
    """The served kinds whose rows need the cluster's context (`held`)."""
    return [k for k in registry if k.key in served and held(k)]


class Held(NamedTuple):
    """One object of a checked kind, waiting for its cluster's findings (a tuple: one per
    held object of a sync)."""

    kind: Kind
    api_version: str
    obj: dict[str, Any]

    @property
    def identity(self) -> tuple[str, str, str]:
        meta = self.obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), self.kind.kind, str(meta.get("name") or "")


_MANAGED_LABELS = tuple(
    f"{group}/{f}" for group, _ in relations.MANAGERS for f in ("name", "namespace")
)


def slim(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """What building the row, its edges and the checks read of an object (the watcher keeps
    these)."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("namespace", "name", "generation") if k in meta}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and rows.UI_URL_ANNOTATION in annotations:
        kept["annotations"] = {rows.UI_URL_ANNOTATION: annotations[rows.UI_URL_ANNOTATION]}
    labels = meta.get("labels")
    if isinstance(labels, dict) and any(k in labels for k in _MANAGED_LABELS):
        kept["labels"] = {k: labels[k] for k in _MANAGED_LABELS if k in labels}
    if isinstance(labels, dict) and labels:
        # the row's labels as its stored field (a short string, not the leaf's whole dict),
        # made as `rows.member` makes it: the member takes it as it is
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        field = label_field.of_object(labels, name, namespace if kind.namespaced else "")
        kept[rows.SLIM_LABELS] = field  # type: ignore[index]
    if validated(kind):
        out = {**istio_checks.essentials(kind.kind, obj), "metadata": kept}
    else:
        out = {"metadata": kept, "spec": obj.get("spec") or {}}
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def service_slim(obj: dict[str, Any]) -> dict[str, Any]:
    return istio_checks.essentials("Service", obj)


def namespace_name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def findings_for(
    held: Iterable[Held], services: Iterable[dict[str, Any]], namespaces: Iterable[str]
) -> dict[tuple[str, str, str], list[Finding]]:
    """Validate one cluster's held objects (namespace, Istio kind, name) -> findings. Objects
    are passed to the checks by registry key (`K8sGateway` apart from Istio's `Gateway`)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for h in held:
        by_kind.setdefault(h.kind.key, []).append(h.obj)
    return istio_checks.validate(by_kind, services, namespaces)


def members(
    cluster: str,
    held: Iterable[Held],
    services: Iterable[dict[str, Any]] | None,
    namespaces: Iterable[str] | None,
) -> list[str]:
    """Encoded rows of the held objects, with their findings and edges. Without the Services or
    Namespaces (not listable) nothing is validated (the rows then say they were not checked) and
    Service backends are not checked for existence."""
    held = list(held)
    known = services is not None and namespaces is not None
    kinds = {h.kind.key: h.kind for h in held}  # a registry's keys are unique
    checked_keys = {key for key, kind in kinds.items() if validated(kind)}
    checked = [h for h in held if h.kind.key in checked_keys]
    context = [h for h in held if h.kind.key in CONTEXT_KINDS]
    found = findings_for([*checked, *context], services or (), namespaces or ()) if known else None
    rules = relations.DestinationRuleIndex(
        [h.obj for h in checked if h.kind.kind == "DestinationRule"], namespaces or ()
    )
    service_keys = {_service_key(s) for s in services or ()} if known else None
    out = []
    for h in held:
        f = None
        extra: list[relations.Ref] = []
        if h.kind.key in checked_keys:
            f = None if found is None else found.get(h.identity, [])
            if h.kind.kind == "VirtualService":
                extra = rules.refs(h.obj)
        out.append(rows.member(cluster, h.kind, h.api_version, h.obj, f, extra, service_keys))
    return out


def _service_key(service: dict[str, Any]) -> tuple[str, str]:
    meta = service.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
