"""The generated fleet: clusters, namespaces, Flux, Istio, Gateway API and Kuadrant objects,
the Services behind their hosts, and multi-tenant RBAC, all deterministic from a seed. A
cluster's objects are generated when it is first used, from pre-serialized templates, so a
1.5 M-object fleet starts at once and stays compact. Flux objects come from `kubesim.gen.flux`,
the traffic objects from `kubesim.gen.traffic`, namespace by namespace from a `ClusterPlan`; both
reference generated objects (but for a few dangling ones, annotated) and carry the managed-by
labels of the Flux object that applied them (`kubesim.gen.marks`).

Tenancy: namespace `app-NNNN` belongs to team `team-XX` (about 1 % of namespaces per team); a
RoleBinding `team-view` binds the team group to ClusterRole `view`, into which `flux-view`,
`istio-view`, `gateway-api-view` and `kuadrant-view` aggregate. `users()` lists identities
with the namespaces each may list.
"""

from __future__ import annotations

import functools
import random
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesim.catalog import Catalog, Resource
from kubesim.gen.flux import FluxContext, FluxShares, namespace_flux, platform_flux, to_planned
from kubesim.gen.marks import PLATFORM, marked_shape, marks
from kubesim.gen.plan import ClusterPlan, Manager, Planned, plan_cluster
from kubesim.gen.rbac_objects import cluster_rbac, namespace_shape, role_binding_shape
from kubesim.gen.seeds import mix64
from kubesim.gen.templates import Template
from kubesim.gen.traffic import cluster_traffic, namespace_traffic, system_traffic
from kubesim.store import ClusterStore

PRESETS = {"S": (10, 100), "M": (50, 500), "L": (200, 2000), "XL": (1000, 2000)}
SYSTEM_NAMESPACES = ("default", "kube-system", "flux-system", "istio-system")


@dataclass(frozen=True)
class FleetSpec:
    clusters: int = 2
    namespaces: int = 5
    seed: int = 1
    teams: int = 100
    unhealthy_share: float = 0.01
    """Flux objects failing (a quarter of them Stalled); Istio objects with an istiod ERROR."""
    progressing_share: float = 0.01
    suspended_share: float = 0.005
    """Flux objects with `spec.suspend: true`, drawn apart from their health."""
    team_users: int = 3
    gateway_share: float = 0.15
    """App namespaces holding Gateway API objects (a Gateway and its routes)."""
    breakage_share: float = 0.02
    """Relevant objects hit by each kind of broken reference or failing condition."""
    dangling_share: float = 0.015
    """Flux references (sourceRef, dependsOn, chart, image, provider, receiver) naming no
    object, each kind drawn apart."""


@dataclass
class GeneratedFleet:
    """A fleet made from a `FleetSpec`; `load(name, store)` fills one cluster's store."""

    spec: FleetSpec
    cluster_names: list[str] = field(default_factory=list)
    _templates: dict[tuple[Any, ...], Template] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        width = max(3, len(str(self.spec.clusters - 1)))
        self.cluster_names = [f"cluster-{i:0{width}d}" for i in range(self.spec.clusters)]

    # -- naming and tenancy (cheap, no objects needed) -----------------------------------

    def namespace_names(self) -> list[str]:
        width = max(4, len(str(self.spec.namespaces - 1)))
        return [f"app-{i:0{width}d}" for i in range(self.spec.namespaces)]

    def team_of(self, cluster_index: int, ns_index: int) -> str:
        return f"team-{mix64(self.spec.seed, cluster_index, ns_index) % self.spec.teams:02d}"

    def solo_namespace(self) -> tuple[str, str]:
        """(cluster, namespace) of the user `solo`, who may list in that one namespace."""
        return self.cluster_names[0], self.namespace_names()[self.spec.namespaces // 2]

    # -- objects -------------------------------------------------------------------------

    def load(self, name: str, store: ClusterStore) -> None:
        index = self.cluster_names.index(name)
        objects = list(self.objects(index, store.catalog))
        store.load(objects, len(objects))

    def objects(self, index: int, catalog: Catalog) -> Iterator[tuple[Resource, str, str, bytes]]:
        """Every object of cluster `index`, resourceVersions 1..N in this order."""
        rng = random.Random(f"{self.spec.seed}/{index}")
        epoch = (int(time.time()) // 86400 - 31) * 86400  # ages stay plausible; same all day
        rv = 0
        cluster = self.cluster_names[index]
        values = {"uid": "", "rv": "", "created": "", "name": "", "ns": ""}

        def stamp(name: str, ns: str = "") -> dict[str, str]:
            nonlocal rv
            rv += 1
            u = f"{rng.getrandbits(128):032x}"
            t = epoch + rng.randrange(30 * 86400)
            values.update(
                name=name,
                ns=ns,
                rv=str(rv),
                uid=f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}",
                created=_iso(t),
                ltt=_iso(t + rng.randrange(86400)),
            )
            return values

        ns_names = self.namespace_names()
        for ns in SYSTEM_NAMESPACES:
            yield catalog.find("Namespace"), "", ns, self._ns(ns, "platform", stamp(ns))
        for i, ns in enumerate(ns_names):
            team = self.team_of(index, i)
            yield catalog.find("Namespace"), "", ns, self._ns(ns, team, stamp(ns))
        for res, ns, name, tmpl, extra in cluster_rbac(self, cluster, catalog):
            yield res, ns, name, tmpl.render({**stamp(name, ns), **extra})
        rb = catalog.find("RoleBinding")
        for i, ns in enumerate(ns_names):
            team = self.team_of(index, i)
            sa = i % 100 == 0  # a few ServiceAccount subjects
            tmpl = self._template(
                ("rb", "sa" if sa else "", ""), lambda sa=sa: role_binding_shape(sa)
            )
            yield rb, ns, "team-view", tmpl.render({**stamp("team-view", ns), "team": team})
        plan = self.plan(index, catalog)
        flux = self._flux_context(catalog, index)
        for obj in platform_flux(flux, rng):
            planned = to_planned(obj, flux, flux.platform)
            yield self._render(catalog, planned, "platform", rng, stamp, planned.manager)
        for planned in system_traffic(plan):
            yield self._render(catalog, planned, "platform", rng, stamp, PLATFORM)
        for i, ns in enumerate(ns_names):
            team = self.team_of(index, i)
            ns_flux = namespace_flux(flux, ns, plan.item(i), rng)
            for planned in ns_flux.planned(flux):
                yield self._render(catalog, planned, team, rng, stamp, planned.manager)
            for planned in namespace_traffic(plan, i, rng):
                manager = ns_flux.manager_of(planned, rng)
                yield self._render(catalog, planned, team, rng, stamp, manager)
        for planned in cluster_traffic(plan):
            manager = None if planned.kind == "Service" else PLATFORM
            yield self._render(catalog, planned, "platform", rng, stamp, manager)

    def plan(self, index: int, catalog: Catalog) -> ClusterPlan:
        """What cluster `index`'s traffic objects will be (cheap: no objects are made)."""
        s = self.spec
        return plan_cluster(
            s.seed,
            index,
            self.namespace_names(),
            (s.gateway_share, s.breakage_share, s.unhealthy_share),
            lambda kind: catalog.find(kind).api_version,
        )

    def _flux_context(self, catalog: Catalog, index: int) -> FluxContext:
        s = self.spec
        shares = FluxShares(
            s.unhealthy_share, s.progressing_share, s.suspended_share, s.dangling_share
        )
        api_version = lambda kind: catalog.find(kind).api_version  # noqa: E731
        return FluxContext(shares, api_version, seed=s.seed, cluster=index)

    def _render(
        self,
        catalog: Catalog,
        planned: Planned,
        team: str,
        rng: random.Random,
        stamp: Callable[[str, str], dict[str, str]],
        manager: Manager | None = None,
    ) -> tuple[Resource, str, str, bytes]:
        res = catalog.find(planned.kind)
        key, extra = marks(planned, manager)
        tmpl = self._templates.get(key)
        if tmpl is None:
            tmpl = self._templates[key] = Template(marked_shape(planned, manager))
        gen = rng.randrange(1, 6)
        values = {
            **stamp(planned.name, planned.namespace),
            "gen": str(gen),
            "ogen": str(gen - 1),
            "team": team,
            **recommended_values(planned, res.group, manager),
            **planned.values,
            **extra,
        }
        return res, planned.namespace, planned.name, tmpl.render(values)

    def _ns(self, name: str, team: str, values: dict[str, str]) -> bytes:
        tmpl = self._template(("ns", "", ""), namespace_shape)
        return tmpl.render({**values, "team": team})

    def _template(self, key: tuple[Any, ...], make: Any) -> Template:
        tmpl = self._templates.get(key)
        if tmpl is None:
            tmpl = self._templates[key] = Template(make())
        return tmpl


COMPONENTS = {
    "toolkit.fluxcd.io": "gitops",
    "istio.io": "mesh",
    "gateway.networking.k8s.io": "gateway",
    "kuadrant.io": "policy",
}
"""`app.kubernetes.io/component` by the API group (suffix) of the object's kind."""


def recommended_values(planned: Planned, group: str, manager: Manager | None) -> dict[str, str]:
    """Slot values of the recommended labels (`kubesim.gen.plan.LABELS`): functions of the name,
    namespace, API group and manager only, so no random draw moves."""
    h = zlib.crc32(f"{planned.namespace}/{planned.name}".encode())
    component = next((c for g, c in COMPONENTS.items() if group.endswith(g)), "app")
    managed_by = {"helm": "Helm", "kustomize": "flux"}.get(manager[0], "") if manager else ""
    return {
        "appver": f"1.{h % 4}.{h // 4 % 3}",
        "component": component,
        "managedby": managed_by or "kubectl",
    }


@functools.lru_cache(maxsize=65536)
def _iso_minute(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _iso(t: int) -> str:
    """RFC 3339 at minute precision (cached: generation makes millions of these)."""
    return _iso_minute(t - t % 60)


def generate_fleet(
    clusters: int = 2, namespaces: int = 5, seed: int = 1, **kw: Any
) -> GeneratedFleet:
    """A fleet of `clusters` x `namespaces` app namespaces (plus system namespaces)."""
    return GeneratedFleet(FleetSpec(clusters, namespaces, seed, **kw))


def preset_fleet(preset: str, seed: int = 1) -> GeneratedFleet:
    clusters, namespaces = PRESETS[preset.upper()]
    return generate_fleet(clusters, namespaces, seed)
