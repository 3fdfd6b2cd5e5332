"""How a failure travels along Flux references, as the controllers check them before doing
their own work (fluxcd kustomize-controller, helm-controller, source-controller,
image-reflector-controller, image-automation-controller):

| object | checks, in order | Ready=False reason: message |
|---|---|---|
| Kustomization | sourceRef exists | ArtifactFailed: `GitRepository.source.toolkit.fluxcd.io "x" not found` |
| | the source has an artifact | ArtifactFailed: Source artifact not found, retrying in 30s |
| | each dependsOn exists, is Ready at its generation | DependencyNotReady: dependency 'ns/x' not found: ... / is not ready |
| HelmRelease | each dependsOn exists, is Ready at its generation | DependencyNotReady: unable to get 'ns/x' dependency: ... / dependency 'ns/x' is not ready |
| | its chart source (HelmChart made from the template, or chartRef) exists | ArtifactFailed: could not get Source object: ... |
| | that source is ready (generation observed, not Stalled, has an artifact) | SourceNotReady: HelmChart 'ns/x' is not ready: does not have an artifact |
| HelmChart | sourceRef exists | SourceUnavailable: failed to get source: ... |
| | the source has an artifact | NoSourceArtifact: no artifact available for HelmRepository source 'x' |
| ImagePolicy | imageRepositoryRef exists | DependencyNotReady: failed to get the referred ImageRepository: ... |
| | the repository has tags (a failing one has none: its database is an emptyDir too) | DependencyNotReady: retrying in 30s error: no tags in database |
| ImageUpdateAutomation | sourceRef exists (it clones the repository itself) | SourceManagerFailed: failed configuring source manager: ... |

A suspended object is not reconciled: it keeps the status its controller last wrote. Sources
hold an artifact when healthy or progressing (a new generation in progress keeps the last
one); failing ones hold none (see `kubesim.gen.shapes`). Cached clients name a missing object by
kind (`GitRepository.source.toolkit.fluxcd.io`), API reads (dependsOn) by resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kubesim.gen.shapes import failure

if TYPE_CHECKING:
    from kubesim.gen.flux import FluxObject, Ref

REQUEUE = "30s"  # the controllers' --requeue-dependency default
GROUPS = {
    "Kustomization": "kustomize.toolkit.fluxcd.io",
    "HelmRelease": "helm.toolkit.fluxcd.io",
    "ImageRepository": "image.toolkit.fluxcd.io",
}
SOURCE_GROUP = "source.toolkit.fluxcd.io"
WITH_ARTIFACT = ("healthy", "progressing")
Why = tuple[str, str] | None  # (Ready's reason, message) when blocked


def not_found(ref: Ref) -> str:
    """A cached client's NotFound error: the group qualified by the kind."""
    kind, _, name = ref
    return f'{kind}.{GROUPS.get(kind, SOURCE_GROUP)} "{name}" not found'


def text(obj: FluxObject, message: str) -> str:
    """A shape's message with the object's slots filled in."""
    for slot, value in (("ns", obj.namespace), ("name", obj.name), ("cname", obj.chart)):
        message = message.replace(f"@@{slot}@@", value)
    return message.replace("@@rev@@", obj.rev)


class Resolver:
    """Settles each object's `state` (and `reason`, `message` when blocked) from what it
    references, resolving referenced objects first; an object met again while it is being
    resolved (a dependsOn cycle) is not ready."""

    def __init__(self, index: Mapping[Ref, FluxObject]) -> None:
        self.index = index
        self._visiting: set[Ref] = set()

    def get(self, ref: Ref | None) -> FluxObject | None:
        obj = self.index.get(ref) if ref is not None else None
        if obj is not None and not obj.state and ref not in self._visiting:
            self._visiting.add(obj.ref)
            self._settle(obj)
            self._visiting.discard(obj.ref)
        return obj

    def _settle(self, obj: FluxObject) -> None:
        check = CHECKS.get(obj.kind)
        why = None if obj.suspended or check is None else check(self, obj)
        if why is None:
            obj.state = obj.variant
            return
        obj.state = "fresh" if obj.fresh else "blocked"
        obj.reason, obj.message = why

    def dependencies(self, obj: FluxObject, missing: Callable[[str, str], str]) -> Why:
        for dep in obj.depends:
            found = self.get(dep)
            name = f"{dep[1]}/{dep[2]}"
            if found is None:
                return "DependencyNotReady", missing(name, dep[2])
            if found.state != "healthy":
                return "DependencyNotReady", f"dependency '{name}' is not ready"
        return None


def _kustomization(r: Resolver, obj: FluxObject) -> Why:
    source = r.get(obj.upstream)
    if source is None:
        return "ArtifactFailed", not_found(_ref(obj.upstream))
    if source.state not in WITH_ARTIFACT:
        return "ArtifactFailed", f"Source artifact not found, retrying in {REQUEUE}"
    return r.dependencies(
        obj,
        lambda name, short: (
            f"dependency '{name}' not found: "
            f'kustomizations.kustomize.toolkit.fluxcd.io "{short}" not found'
        ),
    )


def _helm_release(r: Resolver, obj: FluxObject) -> Why:
    why = r.dependencies(
        obj,
        lambda name, short: (
            f"unable to get '{name}' dependency: "
            f'helmreleases.helm.toolkit.fluxcd.io "{short}" not found'
        ),
    )
    if why is not None:
        return why
    source = r.get(obj.upstream)
    if source is None:
        return "ArtifactFailed", f"could not get Source object: {not_found(_ref(obj.upstream))}"
    reason = _not_ready(source)
    if reason:
        where = f"{source.kind} '{source.namespace}/{source.name}'"
        return "SourceNotReady", f"{where} is not ready: {reason}"
    return None


def _not_ready(source: FluxObject) -> str:
    """helm-controller's isReady on a chart source."""
    if source.state == "progressing":
        return "latest generation of object has not been reconciled"
    if source.state == "stalled":
        return text(source, failure(source.kind, "stalled")[1])
    return "" if source.state == "healthy" else "does not have an artifact"


def _helm_chart(r: Resolver, obj: FluxObject) -> Why:
    source = r.get(obj.upstream)
    if source is None:
        return "SourceUnavailable", f"failed to get source: {not_found(_ref(obj.upstream))}"
    if source.state not in WITH_ARTIFACT:
        return "NoSourceArtifact", f"no artifact available for {source.kind} source '{source.name}'"
    return None


def _image_policy(r: Resolver, obj: FluxObject) -> Why:
    repository = r.get(obj.upstream)
    if repository is None:
        return "DependencyNotReady", (
            "failed to get the referred ImageRepository: referenced ImageRepository does not "
            f"exist: {not_found(_ref(obj.upstream))}"
        )
    if repository.state in ("unhealthy", "stalled"):
        return "DependencyNotReady", f"retrying in {REQUEUE} error: no tags in database"
    return None


def _automation(r: Resolver, obj: FluxObject) -> Why:
    if r.get(obj.upstream) is None:
        return "SourceManagerFailed", (
            "failed configuring source manager: referenced git repository does not exist: "
            f"{not_found(_ref(obj.upstream))}"
        )
    return None


def _ref(ref: Ref | None) -> Ref:
    assert ref is not None, "a checked object names what it depends on"
    return ref


CHECKS: dict[str, Callable[[Resolver, FluxObject], Why]] = {
    "Kustomization": _kustomization,
    "HelmRelease": _helm_release,
    "HelmChart": _helm_chart,
    "ImagePolicy": _image_policy,
    "ImageUpdateAutomation": _automation,
}
