"""The Flux objects of a generated cluster: the platform's in `flux-system` and each app
namespace's, with references that resolve (but for `FluxShares.dangling` of them) and the
status their controllers write, failures propagated along references (`kubesim.gen.propagation`).

An app namespace has a Kustomization `apps` reading the namespace's GitRepository `apps-repo`,
else its OCIRepository `manifests` or Bucket `assets`, else the platform's
`flux-system/flux-system`; it may depend on a Kustomization `config` and on
`flux-system/infrastructure`. A HelmRelease `web` (depending on a HelmRelease `redis` at
times) takes its chart from a chart template (helm-controller makes the HelmChart
`<namespace>-<name>` in the source's namespace and labels it as the release's) or a `chartRef`
(an OCIRepository `web-chart`, a HelmChart `web`). ImagePolicy `web` follows ImageRepository
`web`, an ImageUpdateAutomation the namespace's GitRepository; an Alert its Provider.
The namespace's Kustomizations and sources are applied by the platform's `flux-system`
Kustomization; the rest, and most traffic objects, by `apps` (or `config`, or the `web`
release), as their labels say (`kubesim.gen.marks`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubesim.gen.marks import PLATFORM
from kubesim.gen.plan import LABELS, Manager, Planned
from kubesim.gen.propagation import Resolver
from kubesim.gen.rollouts import chart_version, commit
from kubesim.gen.shapes import FluxForm, flux_shape

Ref = tuple[str, str, str]  # (kind, namespace, name)
PLATFORM_GIT: Ref = ("GitRepository", "flux-system", "flux-system")
PLATFORM_CHARTS: Ref = ("HelmRepository", "flux-system", "charts")
INFRASTRUCTURE: Ref = ("Kustomization", "flux-system", "infrastructure")
SHARES = {  # app namespaces holding each part (the Flux mix as before references resolved)
    "git": 0.3,
    "oci": 0.03,
    "bucket": 0.02,
    "helm-repo": 0.05,
    "config": 0.1,
    "release": 0.25,
    "image": 0.03,
    "notify": 0.03,
    "receiver": 0.01,
    "platform-dep": 0.2,  # `apps` depends on flux-system/infrastructure
}
CHART_PATHS = (("template-git", 0.3), ("ref-helmchart", 0.15), ("ref-oci", 0.1))
REDIS_SHARE = 0.08  # releases depending on a `redis` release
AUTOMATION_SHARE = 0.67  # image namespaces that also automate updates
UNMANAGED_SHARE = 0.05  # app objects applied by hand (no managed-by labels)
DANGLING_REFS = ("source", "depends", "chart", "release-depends", "image", "automation",
                 "provider", "receiver")  # fmt: skip
FLUX_ITEMS = ("flux-source-failing", "flux-source-dangling", "flux-depends-chain",
              "flux-depends-cycle", "flux-suspended-failing")  # fmt: skip
TENANT_KINDS = ("Kustomization", "GitRepository", "OCIRepository", "Bucket", "HelmRepository")
HELM_KINDS = ("VirtualService", "DestinationRule", "HTTPRoute")  # `web*` ones come with the chart
CONFIG_KINDS = ("PeerAuthentication", "AuthorizationPolicy", "RequestAuthentication", "Sidecar",
                "Telemetry", "AuthPolicy", "RateLimitPolicy", "DNSPolicy", "TLSPolicy")  # fmt: skip
LIST_FIELDS = ("dependsOn", "resources")
NO_KIND = ("dependsOn", "imageRepositoryRef", "providerRef")  # the kind is implied


@dataclass(frozen=True)
class FluxShares:
    unhealthy: float
    progressing: float
    suspended: float
    dangling: float


@dataclass(slots=True)
class FluxObject:
    """One Flux object while planned: its own health draw (`variant`), its references (spec
    `refs` as JSON, `links` as (path, target)), what its controller reads first (`upstream`)
    and its `depends`; `state`, `reason`, `message` once resolved."""

    kind: str
    namespace: str
    name: str
    variant: str = "healthy"
    suspended: bool = False
    manager: Manager | None = None
    rev: str = ""
    refs: dict[str, Any] = field(default_factory=dict)
    links: list[tuple[str, Ref]] = field(default_factory=list)
    upstream: Ref | None = None
    depends: list[Ref] = field(default_factory=list)
    source: str = ""  # kind of the source its spec names (revision formats, chart paths)
    chart: str = ""
    helm_chart: str = ""  # HelmRelease status.helmChart
    chart_version: str = ""  # HelmRelease: the chart version it runs (kubesim.gen.rollouts)
    labelled: bool = True  # team labels (not on what a controller makes)
    fresh: bool = False  # never reconciled
    state: str = ""
    reason: str = ""
    message: str = ""

    @property
    def ref(self) -> Ref:
        return self.kind, self.namespace, self.name

    def link(self, spec_field: str, target: Ref) -> None:
        kind, namespace, name = target
        ref: dict[str, str] = (
            {"name": name} if spec_field in NO_KIND else {"kind": kind, "name": name}
        )
        if namespace != self.namespace:
            ref["namespace"] = namespace
        if spec_field in LIST_FIELDS:
            items = self.refs.setdefault(spec_field, [])
            path = f"spec.{spec_field}[{len(items)}]"
            items.append(ref)
        else:
            self.refs[spec_field] = ref
            path = "spec.chart.spec.sourceRef" if spec_field == "chart" else f"spec.{spec_field}"
        self.links.append((path, target))
        if spec_field == "dependsOn":
            self.depends.append(target)


@dataclass
class FluxContext:
    """What every namespace's Flux objects need: shares, served versions, the platform's."""

    shares: FluxShares
    api_version: Callable[[str], str]
    platform: dict[Ref, FluxObject] = field(default_factory=dict)
    seed: int = 0
    cluster: int = 0
    """The cluster's index in the fleet (chart rollouts differ per cluster)."""


def _variant(shares: FluxShares, rng: random.Random) -> str:
    u = rng.random()
    if u < shares.unhealthy:
        return "stalled" if u < shares.unhealthy / 4 else "unhealthy"
    if u < shares.unhealthy + shares.progressing:
        return "progressing"
    return "healthy"


def _rev(ctx: FluxContext, rng: random.Random, kind: str, namespace: str, name: str) -> str:
    """The commit the object's revision names (kubesim.gen.rollouts: the same on every cluster but
    for sources mid-update); drawn from `rng` as before, so every later draw stays as it was."""
    rng.getrandbits(160)
    return commit(ctx.seed, ctx.cluster, namespace, kind, name)


def platform_flux(ctx: FluxContext, rng: random.Random) -> list[FluxObject]:
    """Flux's bootstrap objects (healthy: the platform team keeps them so) and what every
    cluster shares: the `charts` HelmRepository, the `infrastructure` Kustomization."""

    def new(kind: str, name: str) -> FluxObject:
        obj = FluxObject(kind, "flux-system", name, manager=PLATFORM)
        obj.rev = _rev(ctx, rng, kind, obj.namespace, name)
        ctx.platform[obj.ref] = obj
        return obj

    git = new("GitRepository", "flux-system")
    for name in ("flux-system", "infrastructure"):
        kustomization = new("Kustomization", name)
        kustomization.link("sourceRef", git.ref)
        kustomization.upstream, kustomization.source = git.ref, "GitRepository"
        kustomization.rev = git.rev  # applied the repository's artifact
    new("HelmRepository", "charts")
    provider = new("Provider", "slack")
    new("Alert", "on-call").link("providerRef", provider.ref)
    new("Receiver", "github").link("resources", git.ref)
    objects = list(ctx.platform.values())
    _resolve(objects, ctx.platform)
    return objects


@dataclass
class Layout:
    """Which Flux objects an app namespace holds, how its release gets its chart, which of
    its references dangle (`DANGLING_REFS`), and its showcase item."""

    has: dict[str, bool]
    chart: str
    redis: bool
    automation: bool
    dangle: set[str]
    item: str = ""


def _layout(item: str, dangling: float, rng: random.Random) -> Layout:
    has = {part: rng.random() < share for part, share in SHARES.items()}
    u, chart = rng.random(), "template-platform"
    for path, share in CHART_PATHS:
        if u < share:
            chart = path if path == "ref-oci" or has["git"] else chart
            break
        u -= share
    if has["helm-repo"]:
        chart = "template-local"
    redis = has["release"] and rng.random() < REDIS_SHARE
    automation = has["image"] and rng.random() < AUTOMATION_SHARE
    dangle = {ref for ref in DANGLING_REFS if rng.random() < dangling}
    lay = Layout(has, chart, redis, automation, set() if item else dangle, item)
    if item in FLUX_ITEMS:
        _force(lay)
    return lay


def _force(lay: Layout) -> None:
    """The showcase: one propagation story per namespace."""
    item, has = lay.item, lay.has
    has.update({"oci": False, "bucket": False, "platform-dep": False})
    if item == "flux-source-failing":  # apps-repo fails: apps, config, the chart, web
        has.update({"git": True, "config": True, "release": True, "helm-repo": False})
        lay.chart, lay.redis = "template-git", False
    elif item == "flux-source-dangling":
        has["git"] = False
        lay.dangle = {"source"}
    elif item in ("flux-depends-chain", "flux-depends-cycle"):
        has.update({"git": False, "config": item == "flux-depends-cycle"})
    if not has["git"] and lay.chart in ("template-git", "ref-helmchart"):
        lay.chart = "template-platform"


class _Builder:
    """Makes one app namespace's Flux objects from its layout."""

    def __init__(self, ctx: FluxContext, ns: str, lay: Layout, rng: random.Random) -> None:
        self.ctx, self.ns, self.lay, self.rng = ctx, ns, lay, rng
        self.objects: list[FluxObject] = []
        self.local: dict[Ref, FluxObject] = {}
        self.index: dict[Ref, FluxObject] = {}  # the platform's and the namespace's, once built
        self.apps: Manager = ("kustomize", "apps", ns)

    def new(self, kind: str, name: str, namespace: str = "", variant: str = "") -> FluxObject:
        rng, shares = self.rng, self.ctx.shares
        drawn, suspended = _variant(shares, rng), rng.random() < shares.suspended
        if self.lay.item in FLUX_ITEMS:
            suspended = False  # the stories show propagation, not suspension
        manager: Manager | None = PLATFORM if kind in TENANT_KINDS else self.apps
        if manager is self.apps and rng.random() < UNMANAGED_SHARE:
            manager = None
        obj = FluxObject(kind, namespace or self.ns, name, variant or drawn, suspended, manager)
        obj.rev = _rev(self.ctx, rng, kind, obj.namespace, name)
        self.objects.append(obj)
        self.local[obj.ref] = obj
        return obj

    def local_ref(self, part: str, kind: str, name: str) -> Ref | None:
        return (kind, self.ns, name) if self.lay.has[part] else None

    def build(self) -> list[FluxObject]:
        self.sources()
        self.kustomizations()
        if self.lay.has["release"]:
            self.releases()
        if self.lay.has["image"]:
            self.images()
        self.notifications()
        self.index = {**self.ctx.platform, **self.local}
        _resolve(self.objects, self.index)
        return self.objects

    def sources(self) -> None:
        failing = self.lay.item == "flux-source-failing"
        for part, kind, name in (
            ("git", "GitRepository", "apps-repo"),
            ("oci", "OCIRepository", "manifests"),
            ("bucket", "Bucket", "assets"),
            ("helm-repo", "HelmRepository", "charts"),
        ):
            if self.lay.has[part]:
                self.new(kind, name, variant="stalled" if failing and part == "git" else "")

    def git(self, dangling: str) -> Ref:
        """The namespace's GitRepository, else the platform's (or a missing one)."""
        if dangling in self.lay.dangle:
            return "GitRepository", self.ns, "app-repo"
        return self.local_ref("git", "GitRepository", "apps-repo") or PLATFORM_GIT

    def kustomization(self, name: str, source: Ref, variant: str = "") -> FluxObject:
        obj = self.new("Kustomization", name, variant=variant)
        obj.link("sourceRef", source)
        obj.upstream, obj.source = source, source[0]
        found = self.local.get(source) or self.ctx.platform.get(source)
        obj.rev = found.rev if found else obj.rev
        return obj

    def kustomizations(self) -> None:
        lay = self.lay
        source = self.git("source")
        if "source" not in lay.dangle and not lay.has["git"]:
            source = (self.local_ref("oci", "OCIRepository", "manifests")
                      or self.local_ref("bucket", "Bucket", "assets") or source)  # fmt: skip
        suspended_failing = lay.item == "flux-suspended-failing"
        apps = self.kustomization("apps", source, "unhealthy" if suspended_failing else "")
        apps.suspended |= suspended_failing
        if lay.item == "flux-depends-chain":  # infra (failing) <- platform <- apps
            infra = self.kustomization("infra", source, "unhealthy")
            platform = self.kustomization("platform", source)
            platform.link("dependsOn", infra.ref)
            apps.link("dependsOn", platform.ref)
        if lay.has["config"]:
            config = self.kustomization("config", source)
            apps.link("dependsOn", config.ref)
            if lay.item == "flux-depends-cycle":  # apps <-> config, never reconciled
                config.link("dependsOn", apps.ref)
                apps.fresh = config.fresh = True
        if lay.has["platform-dep"]:
            apps.link("dependsOn", INFRASTRUCTURE)
        if "depends" in lay.dangle:  # flux-system's, without `namespace: flux-system`
            apps.link("dependsOn", ("Kustomization", self.ns, "infrastructure"))

    def releases(self) -> None:
        lay = self.lay
        web = self.release("web")
        if lay.chart == "ref-oci":
            self.new("OCIRepository", "web-chart").manager = self.apps
            self.chart_ref(web, ("OCIRepository", self.ns, "web-chart"))
        elif lay.chart == "ref-helmchart":
            chart = self.new("HelmChart", "web")
            chart.chart, chart.manager = "web", self.apps
            self.chart_source(chart, ("GitRepository", self.ns, "apps-repo"))
            self.chart_ref(web, chart.ref)
        else:
            self.template(web, self.chart_repository())
        if lay.redis:
            redis = self.release("redis")
            repo = self.chart_repository() if lay.chart.startswith("template") else PLATFORM_CHARTS
            self.template(redis, repo)
            web.link("dependsOn", redis.ref)
        elif "release-depends" in lay.dangle:
            web.link("dependsOn", ("HelmRelease", self.ns, "redis"))

    def release(self, name: str) -> FluxObject:
        obj = self.new("HelmRelease", name)
        obj.chart_version = chart_version(self.ctx.seed, self.ctx.cluster, self.ns, name)
        return obj

    def chart_repository(self) -> Ref:
        chart = self.lay.chart
        if chart == "template-local":
            return "HelmRepository", self.ns, "charts"
        if chart == "template-git":
            return "GitRepository", self.ns, "apps-repo"
        if "chart" in self.lay.dangle:  # flux-system's, without `namespace: flux-system`
            return "HelmRepository", self.ns, "charts"
        return PLATFORM_CHARTS

    def chart_ref(self, release: FluxObject, target: Ref) -> None:
        release.link("chartRef", target)
        release.upstream, release.source = target, target[0]

    def chart_source(self, chart: FluxObject, source: Ref) -> None:
        chart.link("sourceRef", source)
        chart.upstream, chart.source = source, source[0]

    def template(self, release: FluxObject, source: Ref) -> None:
        """A chart template: helm-controller makes and owns the HelmChart."""
        release.link("chart", source)
        release.source, release.chart = source[0], release.name
        made = self.new("HelmChart", f"{self.ns}-{release.name}", namespace=source[1])
        made.suspended, made.labelled = False, False
        made.manager, made.chart = ("helm", release.name, self.ns), release.name
        self.chart_source(made, source)
        release.upstream = made.ref
        release.helm_chart = f"{made.namespace}/{made.name}"

    def images(self) -> None:
        self.new("ImageRepository", "web")
        policy = self.new("ImagePolicy", "web")
        name = "webapp" if "image" in self.lay.dangle else "web"
        policy.link("imageRepositoryRef", ("ImageRepository", self.ns, name))
        policy.upstream = ("ImageRepository", self.ns, name)
        if self.lay.automation:
            automation = self.new("ImageUpdateAutomation", "web")
            automation.upstream = self.git("automation")
            automation.link("sourceRef", automation.upstream)

    def notifications(self) -> None:
        if self.lay.has["notify"]:
            self.new("Provider", "slack")
            name = "msteams" if "provider" in self.lay.dangle else "slack"
            self.new("Alert", "on-call").link("providerRef", ("Provider", self.ns, name))
        if self.lay.has["receiver"]:
            self.new("Receiver", "github").link("resources", self.git("receiver"))


def _resolve(objects: list[FluxObject], index: Mapping[Ref, FluxObject]) -> None:
    resolver = Resolver(index)
    for obj in objects:
        resolver.get(obj.ref)


@dataclass
class NamespaceFlux:
    """An app namespace's Flux objects, and who applies its other objects."""

    namespace: str
    objects: list[FluxObject]
    layout: Layout
    index: Mapping[Ref, FluxObject]

    def planned(self, ctx: FluxContext) -> Iterator[Planned]:
        for obj in self.objects:
            yield to_planned(obj, ctx, self.index)

    def manager_of(self, planned: Planned, rng: random.Random) -> Manager | None:
        """Who applied a traffic object of the namespace (Services are no rows: none)."""
        if planned.kind == "Service" or rng.random() < UNMANAGED_SHARE:
            return None
        ns, has = self.namespace, self.layout.has
        if has["release"] and planned.kind in HELM_KINDS and planned.name.startswith("web"):
            return "helm", "web", ns
        if has["config"] and planned.kind in CONFIG_KINDS:
            return "kustomize", "config", ns
        return "kustomize", "apps", ns


def namespace_flux(ctx: FluxContext, ns: str, item: str, rng: random.Random) -> NamespaceFlux:
    lay = _layout(item, ctx.shares.dangling, rng)
    builder = _Builder(ctx, ns, lay, rng)
    return NamespaceFlux(ns, builder.build(), lay, builder.index)


def to_planned(obj: FluxObject, ctx: FluxContext, index: Mapping[Ref, FluxObject]) -> Planned:
    form = FluxForm(obj.kind, obj.state, obj.suspended, tuple(obj.refs), obj.reason, obj.source)
    make = partial(_shape, ctx.api_version, form, obj.labelled)
    values = {"rev": obj.rev, "cname": obj.chart, "hc": obj.helm_chart}
    if obj.kind == "HelmRelease":
        values["cver"], values["chartat"] = obj.chart_version, f"@{obj.chart_version}"
    for spec_field, ref in obj.refs.items():
        values[f"ref_{spec_field}"] = _json(ref)
    if obj.message:
        values["msg"] = json.dumps(obj.message)
    dangling = ""
    if obj.links:
        dangling = ",".join([path for path, target in obj.links if target not in index])
    key = ("flux", form, obj.labelled)
    return Planned(obj.kind, obj.namespace, obj.name, key, make, values, obj.manager, dangling)


def _shape(api_version: Callable[[str], str], form: FluxForm, labelled: bool) -> dict[str, Any]:
    return flux_shape(api_version(form.kind), form, LABELS if labelled else {})


def _json(ref: dict[str, str] | list[dict[str, str]]) -> str:
    """A reference as JSON (generated names never need escaping; json.dumps is slower)."""
    if isinstance(ref, list):
        return "[" + ",".join(_json(item) for item in ref) + "]"
    return "{" + ",".join(f'"{k}":"{v}"' for k, v in ref.items()) + "}"
