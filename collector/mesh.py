"""Istio rows with fleetscope's own validation (common.kinds.istio_checks), for the full sync and
the watcher alike.

istiod writes `status.validationMessages` only with PILOT_ENABLE_STATUS and analysis on (both off
by default), so the collector checks each cluster's Istio config itself: over the cluster's Istio
objects plus its Services and Namespaces, which are listed for the checks and kept only as the
checks need them (they are not rows). A row of a checked kind is built with its findings; other
Istio kinds read `unknown` ("not checked") unless istiod reported on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.index import rows
from common.kinds import istio_checks
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


def validated_kinds(registry: KindRegistry, served: Mapping[str, str]) -> list[Kind]:
    """The served kinds whose rows need the cluster's validation."""
    return [k for k in registry if k.key in served and validated(k)]


@dataclass(frozen=True)
class Held:
    """One object of a checked kind, waiting for its cluster's findings."""

    kind: Kind
    api_version: str
    obj: dict[str, Any]

    @property
    def identity(self) -> tuple[str, str, str]:
        meta = self.obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), self.kind.kind, str(meta.get("name") or "")


def slim(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """What building the row and the checks read of an object (the watcher keeps these)."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("namespace", "name", "generation") if k in meta}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and rows.UI_URL_ANNOTATION in annotations:
        kept["annotations"] = {rows.UI_URL_ANNOTATION: annotations[rows.UI_URL_ANNOTATION]}
    out = {**istio_checks.essentials(kind.kind, obj), "metadata": kept}
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
    """Validate one cluster's held objects (namespace, Istio kind, name) -> findings."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for h in held:
        by_kind.setdefault(h.kind.kind, []).append(h.obj)
    return istio_checks.validate(by_kind, services, namespaces)


def members(
    cluster: str,
    held: Iterable[Held],
    services: Iterable[dict[str, Any]] | None,
    namespaces: Iterable[str] | None,
) -> list[str]:
    """Encoded rows of the held objects, with their findings. Without the Services or Namespaces
    (not listable) nothing is validated: the rows then say they were not checked."""
    held = list(held)
    found = (
        findings_for(held, services, namespaces)
        if services is not None and namespaces is not None
        else None
    )
    out = []
    for h in held:
        f = None if found is None else found.get(h.identity, [])
        out.append(rows.encode(rows.build_row(cluster, h.kind, h.api_version, h.obj, f)))
    return out
