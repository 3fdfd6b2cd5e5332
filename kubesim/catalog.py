"""The resource types kubesim serves, and the discovery documents that describe them.

Core `namespaces` and `services`, the four RBAC kinds, and every kind of the fleetscope kind
registry (Flux, Istio, Gateway API, Kuadrant, plus `FLEETSCOPE_KINDS_FILE` extras) at its
preferred version and scope; plus what a management cluster holds for fleetscope's cluster
registry (Secrets, ConfigMaps, Weave GitOps `GitopsCluster`, Cluster API `Cluster`). Manifests
may add more types (`Catalog.ensure`).
Discovery answers are JSON built once and cached until a type is added.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from common.kinds.registry import KindRegistry, builtin_registry

RBAC_GROUP = "rbac.authorization.k8s.io"
READ_VERBS = ["get", "list", "watch"]
ALL_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Resource:
    """One served resource type: `plural.group` at one version."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status_rule: str = ""  # the fleetscope status rule of registry kinds ("" for others)
    status_subresource: bool = False  # a `status` subresource without a fleetscope status rule

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return self.status_subresource or (bool(self.status_rule) and self.status_rule != "static")

    def discovery_entry(self) -> dict[str, object]:
        entry: dict[str, object] = {
            "name": self.plural,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ALL_VERBS,
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.status_rule:
            entry["categories"] = ["all", "fleetscope"]
        return entry


CORE = (
    Resource("", "v1", "Namespace", "namespaces", namespaced=False, short_names=("ns",)),
    Resource(RBAC_GROUP, "v1", "Role", "roles"),
    Resource(RBAC_GROUP, "v1", "RoleBinding", "rolebindings"),
    Resource(RBAC_GROUP, "v1", "ClusterRole", "clusterroles", namespaced=False),
    Resource(RBAC_GROUP, "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
)
NAMESPACES = CORE[0]
ROLES, ROLE_BINDINGS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS = CORE[1:]
RBAC_KEYS = frozenset(r.key for r in CORE[1:])
# Services are no fleetscope rows, but its Istio validation reads them (hosts must resolve).
SERVICES = Resource("", "v1", "Service", "services", short_names=("svc",), status_subresource=True)
# What a management cluster holds for the cluster registry (common.leaf.registry's sources), at the
# versions upstream serves: Weave GitOps v1alpha1, Cluster API v1beta1.
MANAGEMENT = (
    Resource("", "v1", "Secret", "secrets"),
    Resource("", "v1", "ConfigMap", "configmaps", short_names=("cm",)),
    Resource("gitops.weave.works", "v1alpha1", "GitopsCluster", "gitopsclusters",
             short_names=("gc",), status_subresource=True),
    Resource("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters",
             short_names=("cl",), status_subresource=True),
)  # fmt: skip
SECRETS = MANAGEMENT[0]

_SHORT = {"Kustomization": ("ks",), "HelmRelease": ("hr",), "GitRepository": ("gitrepo",)}


def guess_plural(kind: str) -> str:
    low = kind.lower()
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return low[:-1] + "ies"
    if low.endswith(("s", "x", "ch", "sh")):
        return low + "es"
    return low + "s"


@dataclass
class Catalog:
    """Served resource types, looked up by (group, plural), kind, plural or `plural.group`."""

    resources: dict[tuple[str, str], Resource] = field(default_factory=dict)
    _docs: dict[str, bytes] = field(default_factory=dict, repr=False)
    _found: dict[str, Resource] = field(default_factory=dict, repr=False)

    @classmethod
    def default(cls, registry: KindRegistry | None = None) -> Catalog:
        cat = cls()
        for res in (*CORE, SERVICES, *MANAGEMENT):
            cat.add(res)
        for k in registry or builtin_registry():
            short = _SHORT.get(k.kind, ())
            v = k.versions[0]
            cat.add(Resource(k.group, v, k.kind, k.plural, k.namespaced, short, k.status_rule))
        return cat

    def add(self, res: Resource) -> Resource:
        self.resources[res.key] = res
        self._docs.clear()
        return res

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources.values())

    def get(self, group: str, plural: str) -> Resource | None:
        return self.resources.get((group, plural))

    def for_api(self, group: str, version: str, plural: str) -> Resource | None:
        res = self.resources.get((group, plural))
        return res if res is not None and res.version == version else None

    def find(self, name: str) -> Resource:
        """A type by kind (`Kustomization`), plural, short name or `plural.group`."""
        found = self._found.get(name)
        if found is not None and self.resources.get(found.key) is found:
            return found
        low = name.lower()
        for res in self.resources.values():
            if low in (res.kind.lower(), res.plural, res.resource, *res.short_names):
                self._found[name] = res
                return res
        raise KeyError(f"kubesim serves no resource type {name!r}")

    def ensure(self, api_version: str, kind: str, namespaced: bool) -> Resource:
        """The type of a manifest object, added on first sight (plural guessed from the kind)."""
        group, _, version = api_version.rpartition("/")
        for res in self.resources.values():
            if res.group == group and res.kind == kind:
                return res
        return self.add(Resource(group, version, kind, guess_plural(kind), namespaced))

    # -- discovery documents ------------------------------------------------------------

    def doc(self, path: str) -> bytes | None:
        """The discovery answer for `/api`, `/api/v1`, `/apis` or `/apis/<group>/<version>`."""
        if path not in self._docs:
            built = self._build(path)
            if built is None:
                return None
            self._docs[path] = json.dumps(built, separators=(",", ":")).encode()
        return self._docs[path]

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for res in self.resources.values():
            versions = out.setdefault(res.group, [])
            if res.version not in versions:
                versions.append(res.version)
        return out

    def _build(self, path: str) -> dict[str, object] | None:
        parts = path.strip("/").split("/")
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [],
            }
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group_doc(g, vs) for g, vs in self.groups().items() if g],
            }
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1")
        if len(parts) == 3 and parts[0] == "apis" and parts[2] in self.groups().get(parts[1], []):
            return self._resource_list(parts[1], parts[2])
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in self.groups():
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group_doc(parts[1], [])}
        return None

    def _group_doc(self, group: str, versions: list[str]) -> dict[str, object]:
        versions = versions or self.groups()[group]
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def _resource_list(self, group: str, version: str) -> dict[str, object]:
        entries: list[dict[str, object]] = []
        for res in self.resources.values():
            if res.group == group and res.version == version:
                entries.append(res.discovery_entry())
                if res.has_status:
                    entries.append(
                        {
                            "name": f"{res.plural}/status",
                            "singularName": "",
                            "namespaced": res.namespaced,
                            "kind": res.kind,
                            "verbs": ["get", "patch", "update"],
                        }
                    )
        gv = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": gv,
            "resources": entries,
        }
