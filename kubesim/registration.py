"""kubesim as the management cluster: registration objects whose credentials point at the
simulated leaves.

A Secret annotated `kubesim.fleetscope.io/kubeconfig-of: <cluster>` gets that simulated
cluster's collector kubeconfig under the key named by `kubesim.fleetscope.io/kubeconfig-key`
(default `value`, as Cluster API and Weave GitOps write it); one annotated
`kubesim.fleetscope.io/argocd-cluster-of: <cluster>` gets Argo CD's `name`, `server` and `config`
(bearer token, CA data). Ports, tokens and the CA exist only once kubesim serves, so the fill
happens when the cluster is loaded. `ManagementFleet` adds a generated cluster `management`
that registers every cluster of a fleet through one of fleetscope's registry sources.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from common.errors import ConfigError
from kubesim.catalog import NAMESPACES, SECRETS, Catalog
from kubesim.kubeconfig import collector_kubeconfig
from kubesim.store import ClusterStore, Obj

KUBECONFIG_OF = "kubesim.fleetscope.io/kubeconfig-of"
KUBECONFIG_KEY = "kubesim.fleetscope.io/kubeconfig-key"
ARGOCD_CLUSTER_OF = "kubesim.fleetscope.io/argocd-cluster-of"
MANAGEMENT = "management"
SOURCES = ("gitopscluster", "capi", "argocd", "secret")
NAME_LABEL = "fleetscope.io/cluster-name"


@dataclass(frozen=True)
class Credentials:
    """How to reach one simulated cluster as the collector."""

    cluster: str
    server: str
    token: str
    ca_pem: bytes

    def kubeconfig(self) -> dict[str, Any]:
        return collector_kubeconfig(self.cluster, self.server, self.token, self.ca_pem)

    def argocd(self) -> dict[str, str]:
        """The data of an Argo CD cluster Secret (decoded)."""
        tls: dict[str, Any] = {"insecure": False}
        if self.ca_pem:
            tls["caData"] = base64.b64encode(self.ca_pem).decode()
        config = {"bearerToken": self.token, "tlsClientConfig": tls}
        return {"name": self.cluster, "server": self.server, "config": json.dumps(config)}


def fill_credentials(store: ClusterStore, credentials: Callable[[str], Credentials]) -> int:
    """Write credentials into the annotated Secrets of `store`; how many were filled."""
    filled = 0
    table = store.tables.get(SECRETS.key)
    for raw in list(table.items.values()) if table else []:
        secret = json.loads(raw)
        notes = (secret.get("metadata") or {}).get("annotations") or {}
        data = dict(secret.get("data") or {})
        if notes.get(KUBECONFIG_OF):
            text = yaml.safe_dump(credentials(notes[KUBECONFIG_OF]).kubeconfig(), sort_keys=False)
            data[notes.get(KUBECONFIG_KEY) or "value"] = _b64(text)
        elif notes.get(ARGOCD_CLUSTER_OF):
            argo = credentials(notes[ARGOCD_CLUSTER_OF]).argocd()
            if "name" in data:
                del argo["name"]  # a name the manifest chose stays
            data.update({k: _b64(v) for k, v in argo.items()})
        else:
            continue
        meta = secret["metadata"]
        store.upsert(SECRETS, meta.get("namespace", ""), {**secret, "data": data})
        filled += 1
    return filled


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def registration_objects(source: str, clusters: list[str]) -> Iterator[Obj]:
    """Objects that register `clusters` through `source` (see SOURCES); Secrets are annotated
    so that kubesim fills their credentials. Each object carries the label
    `fleetscope.io/cluster-name` so fleetscope names the clusters as kubesim does."""
    if source not in SOURCES:
        raise ConfigError(f"kubesim can register clusters through {', '.join(SOURCES)}")
    for cluster in clusters:
        yield from _REGISTRATIONS[source](cluster)


def _meta(name: str, namespace: str, cluster: str, **extra: Any) -> dict[str, Any]:
    labels = {NAME_LABEL: cluster, **extra.pop("labels", {})}
    return {"name": name, "namespace": namespace, "labels": labels, **extra}


def _kubeconfig_secret(name: str, namespace: str, cluster: str, key: str = "value") -> Obj:
    notes = {KUBECONFIG_OF: cluster, KUBECONFIG_KEY: key}
    meta = _meta(name, namespace, cluster, annotations=notes)
    meta["labels"].pop(NAME_LABEL)  # the registering object names the cluster, not its Secret
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}


def _ready(reason: str) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": "True",
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def _gitopscluster(cluster: str) -> Iterator[Obj]:
    yield _kubeconfig_secret(f"{cluster}-kubeconfig", "fleet", cluster)
    yield {
        "apiVersion": "gitops.weave.works/v1alpha1",
        "kind": "GitopsCluster",
        "metadata": _meta(cluster, "fleet", cluster),
        "spec": {"secretRef": {"name": f"{cluster}-kubeconfig"}},
        "status": {"conditions": [_ready("SecretFound")]},
    }


def _capi(cluster: str) -> Iterator[Obj]:
    secret = _kubeconfig_secret(f"{cluster}-kubeconfig", "fleet", cluster)
    secret["type"] = "cluster.x-k8s.io/secret"
    secret["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] = cluster
    yield secret
    yield {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": _meta(cluster, "fleet", cluster),
        "spec": {},
        "status": {
            "phase": "Provisioned",
            "controlPlaneReady": True,
            "infrastructureReady": True,
            "conditions": [_ready("")],
        },
    }


def _argocd(cluster: str) -> Iterator[Obj]:
    labels = {"argocd.argoproj.io/secret-type": "cluster"}
    meta = _meta(f"cluster-{cluster}", "argocd", cluster, labels=labels)
    meta["annotations"] = {ARGOCD_CLUSTER_OF: cluster}
    yield {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}


def _secret(cluster: str) -> Iterator[Obj]:
    secret = _kubeconfig_secret(f"fleetscope-cluster-{cluster}", "fleetscope", cluster)
    secret["metadata"]["labels"].update({"fleetscope.io/cluster": "true", NAME_LABEL: cluster})
    secret["metadata"]["annotations"][KUBECONFIG_KEY] = "kubeconfig"
    yield secret


_REGISTRATIONS: dict[str, Callable[[str], Iterator[Obj]]] = {
    "gitopscluster": _gitopscluster,
    "capi": _capi,
    "argocd": _argocd,
    "secret": _secret,
}


class ManagementFleet:
    """`fleet` plus a cluster `management` that registers every cluster of it through `source`
    (None: an empty management cluster, for tests that add objects themselves)."""

    def __init__(self, fleet: Any, source: str | None = None, name: str = MANAGEMENT) -> None:
        if name in fleet.cluster_names:
            raise ConfigError(f"the fleet already has a cluster named {name!r}")
        self.inner, self.source, self.name = fleet, source, name
        self.cluster_names: list[str] = [*fleet.cluster_names, name]
        self.catalog: Catalog = getattr(fleet, "catalog", None) or Catalog.default()

    def load(self, name: str, store: ClusterStore) -> None:
        if name != self.name:
            self.inner.load(name, store)
            return
        for ns in ("default", "fleet", "argocd", "fleetscope"):
            store.upsert(NAMESPACES, "", {"metadata": {"name": ns}})
        if self.source:
            for obj in registration_objects(self.source, list(self.inner.cluster_names)):
                res = self.catalog.ensure(obj["apiVersion"], obj["kind"], True)
                store.upsert(res, obj["metadata"]["namespace"], obj)
        store.compact()
