"""An independent reading of the references in Kubernetes objects, from the upstream API types
rather than kubesim's generator: which objects each one names (with the namespace each API
defaults to), and what the Flux controllers would write on an object whose references fail
(fluxcd kustomize-controller, helm-controller, source-controller, image-reflector-controller,
image-automation-controller sources).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str, str]  # (group, kind, namespace or "" if cluster-scoped, name)

SOURCE = "source.toolkit.fluxcd.io"
KUSTOMIZE = "kustomize.toolkit.fluxcd.io"
HELM = "helm.toolkit.fluxcd.io"
GW = "gateway.networking.k8s.io"
ISTIO = "networking.istio.io"
FLUX_GROUPS = {
    "GitRepository": SOURCE,
    "HelmRepository": SOURCE,
    "OCIRepository": SOURCE,
    "Bucket": SOURCE,
    "HelmChart": SOURCE,
    "Kustomization": KUSTOMIZE,
    "HelmRelease": HELM,
    "ImageRepository": "image.toolkit.fluxcd.io",
    "Provider": "notification.toolkit.fluxcd.io",
}
ROUTES = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute")
KUADRANT = ("AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy")
MANAGERS = {KUSTOMIZE: "Kustomization", HELM: "HelmRelease"}


@dataclass(frozen=True)
class Reference:
    path: str  # where the object names it; "metadata.labels[<group>]" for managed-by labels
    target: Key
    also: tuple[Key, ...] = ()  # other objects that satisfy it as well

    def resolves(self, objs: dict[Key, Obj]) -> bool:
        return self.target in objs or any(k in objs for k in self.also)


def key(obj: Obj) -> Key:
    api = obj["apiVersion"]
    meta = obj["metadata"]
    group = api.split("/")[0] if "/" in api else ""
    return group, obj["kind"], meta.get("namespace", ""), meta["name"]


def dangling(obj: Obj) -> set[str]:
    text = (obj["metadata"].get("annotations") or {}).get("kubesim.fleetscope.io/dangling", "")
    return set(text.split(",")) - {""}


def _flux(path: str, ref: Obj, ns: str, kind: str = "", local: bool = False) -> Reference:
    kind = ref.get("kind") or kind
    namespace = ns if local else ref.get("namespace") or ns
    return Reference(path, (FLUX_GROUPS[kind], kind, namespace, ref["name"]))


def _listed(spec: Obj, field: str) -> Iterator[tuple[str, Any]]:
    for i, ref in enumerate(spec.get(field) or []):
        yield f"spec.{field}[{i}]", ref


def _flux_refs(kind: str, spec: Obj, ns: str) -> Iterator[Reference]:
    """Flux: namespace defaults to the object's; HelmChart sources and Alert providers are
    local references (no namespace field)."""
    if kind in ("Kustomization", "HelmChart", "ImageUpdateAutomation") and "sourceRef" in spec:
        local = kind == "HelmChart"
        yield _flux("spec.sourceRef", spec["sourceRef"], ns, "GitRepository", local)
    if kind in ("Kustomization", "HelmRelease"):
        for path, ref in _listed(spec, "dependsOn"):
            yield _flux(path, ref, ns, kind)
    if kind == "HelmRelease" and "chart" in spec:
        yield _flux("spec.chart.spec.sourceRef", spec["chart"]["spec"]["sourceRef"], ns)
    if kind == "HelmRelease" and "chartRef" in spec:
        yield _flux("spec.chartRef", spec["chartRef"], ns)
    if kind == "ImagePolicy":
        yield _flux("spec.imageRepositoryRef", spec["imageRepositoryRef"], ns, "ImageRepository")
    if kind == "Alert":
        yield _flux("spec.providerRef", spec["providerRef"], ns, "Provider", local=True)
    if kind == "Receiver":
        for path, ref in _listed(spec, "resources"):
            if ref.get("name", "*") != "*":
                yield _flux(path, ref, ns)


def _traffic_refs(group: str, kind: str, spec: Obj, ns: str) -> Iterator[Reference]:
    """Istio `gateways` ("mesh", "name" or "ns/name"); Gateway API parentRefs and backendRefs
    (group, kind, namespace defaulted); Kuadrant targets (local)."""
    if group == ISTIO and kind == "VirtualService":
        for path, name in _listed(spec, "gateways"):
            if name != "mesh":
                gw_ns, _, gw = name.rpartition("/")
                # istioctl analyze (virtualservice/gateways.go) accepts an Istio Gateway or a
                # Gateway API Gateway of that name.
                also = ((GW, "Gateway", gw_ns or ns, gw),)
                yield Reference(path, (ISTIO, "Gateway", gw_ns or ns, gw), also)
    if group == GW and kind == "Gateway":
        yield Reference("spec.gatewayClassName", (GW, "GatewayClass", "", spec["gatewayClassName"]))
    if group == GW and kind in ROUTES:
        for path, ref in _listed(spec, "parentRefs"):
            target = (ref.get("group", GW), ref.get("kind", "Gateway"))
            yield Reference(path, (*target, ref.get("namespace", ns), ref["name"]))
        for r, rule in enumerate(spec.get("rules", [])):
            for b, ref in enumerate(rule.get("backendRefs", [])):
                target = (ref.get("group", ""), ref.get("kind", "Service"))
                path = f"spec.rules[{r}].backendRefs[{b}]"
                yield Reference(path, (*target, ref.get("namespace", ns), ref["name"]))
    if kind in KUADRANT:
        refs = [("spec.targetRef", spec["targetRef"])] if "targetRef" in spec else []
        for path, ref in [*refs, *_listed(spec, "targetRefs")]:
            yield Reference(path, (ref["group"], ref["kind"], ns, ref["name"]))


def references(obj: Obj) -> list[Reference]:
    group, kind, ns, _ = key(obj)
    spec = obj.get("spec") or {}
    refs = list(_traffic_refs(group, kind, spec, ns))
    if group.endswith(".toolkit.fluxcd.io"):
        refs += _flux_refs(kind, spec, ns)
    labels = obj["metadata"].get("labels") or {}
    for manager_group, manager_kind in MANAGERS.items():
        name = labels.get(f"{manager_group}/name")
        if name is not None:
            target = (manager_group, manager_kind, labels[f"{manager_group}/namespace"], name)
            refs.append(Reference(f"metadata.labels[{manager_group}]", target))
    return refs


# -- what the Flux controllers write when a reference fails --------------------------------


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


def ready_at_generation(obj: Obj) -> bool:
    """kustomize-/helm-controller's dependency check."""
    status = obj.get("status") or {}
    ready = conditions(obj).get("Ready") or {}
    observed = status.get("observedGeneration")
    return ready.get("status") == "True" and observed == obj["metadata"]["generation"]


def has_artifact(obj: Obj) -> bool:
    return "artifact" in (obj.get("status") or {})


def _not_found(target: Key) -> str:
    return f'{target[1]}.{target[0]} "{target[3]}" not found'


def _dependencies(obj: Obj, objs: dict[Key, Obj], missing: str) -> tuple[str, str] | None:
    for ref in references(obj):
        if not ref.path.startswith("spec.dependsOn"):
            continue
        _, _, ns, name = ref.target
        dep = objs.get(ref.target)
        if dep is None:
            return "DependencyNotReady", missing.format(ns=ns, name=name)
        if not ready_at_generation(dep):
            return "DependencyNotReady", f"dependency '{ns}/{name}' is not ready"
    return None


def _ref_at(obj: Obj, path: str) -> Key | None:
    return next((r.target for r in references(obj) if r.path == path), None)


def expected_failure(obj: Obj, objs: dict[Key, Obj]) -> tuple[str, str] | None:
    """(Ready reason, message) the object's controller writes because of a failing reference,
    or None when its references are fine."""
    kind = obj["kind"]
    if kind == "Kustomization":
        source = _ref_at(obj, "spec.sourceRef")
        assert source is not None
        if source not in objs:
            return "ArtifactFailed", _not_found(source)
        if not has_artifact(objs[source]):
            return "ArtifactFailed", "Source artifact not found, retrying in 30s"
        missing = f"dependency '{{ns}}/{{name}}' not found: kustomizations.{KUSTOMIZE} \"{{name}}\" not found"
        return _dependencies(obj, objs, missing)
    if kind == "HelmRelease":
        return _helm_release(obj, objs)
    if kind == "HelmChart":
        source = _ref_at(obj, "spec.sourceRef")
        assert source is not None
        if source not in objs:
            return "SourceUnavailable", f"failed to get source: {_not_found(source)}"
        if not has_artifact(objs[source]):
            return "NoSourceArtifact", f"no artifact available for {source[1]} source '{source[3]}'"
    if kind == "ImagePolicy":
        repo = _ref_at(obj, "spec.imageRepositoryRef")
        assert repo is not None
        if repo not in objs:
            return "DependencyNotReady", (
                "failed to get the referred ImageRepository: referenced ImageRepository does "
                f"not exist: {_not_found(repo)}"
            )
        if conditions(objs[repo])["Ready"]["status"] == "False":
            return "DependencyNotReady", "retrying in 30s error: no tags in database"
    if kind == "ImageUpdateAutomation":
        source = _ref_at(obj, "spec.sourceRef")
        if source not in objs:
            return "SourceManagerFailed", (
                "failed configuring source manager: referenced git repository does not exist: "
                f"{_not_found(source)}"  # type: ignore[arg-type]
            )
    return None


def helm_chart_of(release: Obj) -> Key:
    """The source helm-controller reads: the HelmChart it makes from the chart template
    (`<namespace>-<name>` in the template source's namespace), or the chartRef."""
    _, _, ns, name = key(release)
    if "chartRef" in release["spec"]:
        target = _ref_at(release, "spec.chartRef")
        assert target is not None
        return target
    source = _ref_at(release, "spec.chart.spec.sourceRef")
    assert source is not None
    return SOURCE, "HelmChart", source[2], f"{ns}-{name}"


def _helm_release(obj: Obj, objs: dict[Key, Obj]) -> tuple[str, str] | None:
    missing = (
        f"unable to get '{{ns}}/{{name}}' dependency: helmreleases.{HELM} \"{{name}}\" not found"
    )
    why = _dependencies(obj, objs, missing)
    if why is not None:
        return why
    target = helm_chart_of(obj)
    source = objs.get(target)
    if source is None:
        return "ArtifactFailed", f"could not get Source object: {_not_found(target)}"
    status, conds = source.get("status") or {}, conditions(source)
    where = f"{target[1]} '{target[2]}/{target[3]}' is not ready"
    if status.get("observedGeneration") != source["metadata"]["generation"]:
        ready = conds.get("Ready")
        text = "latest generation of object has not been reconciled"
        if ready and ready["status"] == "False":
            text = ready["message"]
        return "SourceNotReady", f"{where}: {text}"
    if "Stalled" in conds and conds["Stalled"]["status"] == "True":
        return "SourceNotReady", f"{where}: {conds['Stalled']['message']}"
    if not has_artifact(source):
        return "SourceNotReady", f"{where}: does not have an artifact"
    return None
