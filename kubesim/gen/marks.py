"""Marks on generated objects that let clients and tests follow references: Flux's "managed
by" labels, and the annotation naming the references kubesim leaves dangling on purpose.

kustomize-controller labels every object it applies with `kustomize.toolkit.fluxcd.io/name`
and `/namespace` of its Kustomization; helm-controller labels a release's objects, and the
HelmChart it makes from a chart template, with `helm.toolkit.fluxcd.io/name` and `/namespace`.
`DANGLING` lists, comma-separated, the paths of an object's references that name no object
(`spec.sourceRef`, `spec.dependsOn[1]`, `spec.gateways[0]`, ...). Every other reference
resolves.
"""

from __future__ import annotations

from typing import Any

from kubesim.gen.plan import Manager, Planned
from kubesim.gen.templates import slot

DANGLING = "kubesim.fleetscope.io/dangling"
PLATFORM: Manager = ("kustomize", "flux-system", "flux-system")  # Flux's bootstrap Kustomization
GROUPS = {"kustomize": "kustomize.toolkit.fluxcd.io", "helm": "helm.toolkit.fluxcd.io"}


def manager_labels(manager: Manager) -> dict[str, str]:
    """The labels the manager's controller puts on what it applies."""
    tool, name, namespace = manager
    return {f"{GROUPS[tool]}/name": name, f"{GROUPS[tool]}/namespace": namespace}


def marks(planned: Planned, manager: Manager | None) -> tuple[tuple[Any, ...], dict[str, str]]:
    """The template key of `planned` applied by `manager` (passed apart: traffic objects learn
    theirs from the namespace's Flux objects), and the slot values its marks need."""
    if manager is None and not planned.dangling:
        return planned.key, {}
    values = {"dangling": planned.dangling} if planned.dangling else {}
    labels = _label_form(planned, manager)
    if labels and labels[1] == M_NAME:
        values.update(m_name=manager[1], m_ns=manager[2])  # type: ignore[index]
    return (*planned.key, "marks", labels, bool(planned.dangling)), values


def marked_shape(planned: Planned, manager: Manager | None) -> dict[str, Any]:
    """The shape of `planned` with its marks (made once per `marks` key)."""
    shape = planned.make()
    meta = shape["metadata"]
    labels = _label_form(planned, manager)
    if labels:
        meta["labels"] = {**meta.get("labels", {}), **manager_labels(labels)}
    if planned.dangling:
        meta["annotations"] = {**meta.get("annotations", {}), DANGLING: slot("dangling")}
    return shape


M_NAME = slot("m_name")


def _label_form(planned: Planned, manager: Manager | None) -> Manager | None:
    """The manager as template text: literal when it is in the object's namespace (the
    template stays shared), slots otherwise."""
    if manager is None:
        return None
    tool, name, namespace = manager
    if namespace == planned.namespace:
        return tool, name, slot("ns")
    return tool, M_NAME, slot("m_ns")
