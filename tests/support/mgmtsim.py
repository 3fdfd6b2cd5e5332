"""kubesim as the management cluster, for the cluster registry's tests: leaves plus an empty
cluster `management` (namespaces fleet, argocd, fleetscope), and the registration objects each
source reads, built from a leaf's real address, CA and a bearer token chosen by the test."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml

from common.rbac.authorizer import AUTHENTICATED
from common.settings import Settings
from kubesim.auth import COLLECTOR_USER
from kubesim.gen.fleet import generate_fleet
from kubesim.registration import ManagementFleet
from kubesim.server import KubeSim
from tests.support import sims

Obj = dict[str, Any]
MGMT = "management"


def start(tmp_path: Path, clusters: int = 2, namespaces: int = 1, **kw: Any) -> KubeSim:
    return sims.start(
        ManagementFleet(generate_fleet(clusters, namespaces, seed=11)), tmp_path, **kw
    )


def management_settings(sim: KubeSim, tmp_path: Path, token: str = "", **changes: Any) -> Settings:
    """Settings reading `sim`'s management cluster (as the collector identity, or `token`)."""
    path = tmp_path / "management.yaml"
    path.write_text(yaml.safe_dump(sim.kubeconfig(MGMT, token)))
    base = Settings(
        management_kubeconfig=str(path),
        registry_interval_s=3600.0,
        gitopsclusters_namespace="fleet",
        capi_clusters_namespace="fleet",
    )
    return base.replace(**changes)


def leaf_token(sim: KubeSim, token: str) -> str:
    """`token` becomes a collector identity on every simulated cluster."""
    return sim.token_for(COLLECTOR_USER, (AUTHENTICATED,), token=token)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig_secret(
    sim: KubeSim,
    leaf: str,
    name: str,
    namespace: str = "fleet",
    token: str = "",
    key: str = "value",
) -> Obj:
    text = yaml.safe_dump(sim.kubeconfig(leaf, token))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {key: b64(text)},
    }


def fleetscope_secret(sim: KubeSim, leaf: str, name: str, token: str = "") -> Obj:
    secret = kubeconfig_secret(sim, leaf, name, "fleetscope", token, key="kubeconfig")
    secret["metadata"]["labels"] = {"fleetscope.io/cluster": "true"}
    return secret


def condition(kind: str, status: str, reason: str = "", message: str = "") -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def gitopscluster(
    name: str,
    namespace: str = "fleet",
    secret_ref: str = "",
    capi_ref: str = "",
    ready: str | None = "True",
    reason: str = "SecretFound",
    message: str = "",
    labels: dict[str, str] | None = None,
    version: str = "v1alpha1",
) -> Obj:
    spec = {"secretRef": {"name": secret_ref}} if secret_ref else {}
    if capi_ref:
        spec["capiClusterRef"] = {"name": capi_ref}
    obj: Obj = {
        "apiVersion": f"gitops.weave.works/{version}",
        "kind": "GitopsCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }
    if ready is not None:
        obj["status"] = {"conditions": [condition("Ready", ready, reason, message)]}
    return obj


def capi_cluster(
    name: str, namespace: str = "fleet", ready: bool = True, version: str = "v1beta1"
) -> Obj:
    status: Obj = {"phase": "Provisioned" if ready else "Provisioning"}
    status["controlPlaneReady"] = ready
    if not ready:
        status["conditions"] = [
            condition("ControlPlaneReady", "False", "WaitingForControlPlane", "0 of 3 ready")
        ]
    return {
        "apiVersion": f"cluster.x-k8s.io/{version}",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"controlPlaneEndpoint": {"host": f"{name}.example.internal", "port": 6443}},
        "status": status,
    }


def capi_secret(
    sim: KubeSim, leaf: str, cluster: str, namespace: str = "fleet", token: str = ""
) -> Obj:
    secret = kubeconfig_secret(sim, leaf, f"{cluster}-kubeconfig", namespace, token)
    secret["type"] = "cluster.x-k8s.io/secret"
    secret["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": cluster}
    return secret


def argocd_secret(
    sim: KubeSim,
    leaf: str,
    name: str,
    cluster_name: str = "",
    token: str = "",
    config: Obj | None = None,
    server: str = "",
    namespace: str = "argocd",
) -> Obj:
    cfg = config
    if cfg is None:
        ca = base64.b64encode(sim.ca_pem).decode()
        cfg = {"bearerToken": token or sim.collector_token, "tlsClientConfig": {"caData": ca}}
    data = {"server": server or sim.url(leaf), "config": json.dumps(cfg)}
    if cluster_name:
        data["name"] = cluster_name
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "type": "Opaque",
        "data": {k: b64(v) for k, v in data.items()},
    }


class Registration:
    """Registers one leaf through one source, rotates its token, and removes it again."""

    def __init__(self, sim: KubeSim, source: str, leaf: str) -> None:
        self.sim, self.source, self.leaf = sim, source, leaf

    @property
    def name(self) -> str:
        """The fleetscope name the naming rule gives (docs/operations.md)."""
        return {"gitopscluster": "fleet.gc-x", "capi": "fleet.capi-x", "argocd": "argo-x"}.get(
            self.source, "secret-x"
        )

    def settings(self, base: Settings) -> Settings:
        flag = {
            "gitopscluster": "gitopsclusters",
            "capi": "capi_clusters",
            "argocd": "argocd_clusters",
            "secret": "cluster_secrets",
        }[self.source]
        return base.replace(**{flag: True})

    def objects(self, token: str) -> list[Obj]:
        sim, leaf = self.sim, self.leaf
        if self.source == "gitopscluster":
            return [
                kubeconfig_secret(sim, leaf, "gc-x-access", token=token, key="value.yaml"),
                gitopscluster("gc-x", secret_ref="gc-x-access"),
            ]
        if self.source == "capi":
            return [capi_secret(sim, leaf, "capi-x", token=token), capi_cluster("capi-x")]
        if self.source == "argocd":
            return [argocd_secret(sim, leaf, "cluster-argo-x", "argo-x", token=token)]
        return [fleetscope_secret(sim, leaf, "secret-x", token=token)]

    def apply(self, token: str) -> None:
        for obj in self.objects(token):
            self.sim.apply(MGMT, obj)

    def remove(self) -> None:
        # The registering object goes; the Secret may stay (as after `kubectl delete gitopscluster`).
        obj = self.objects("x")[-1]
        meta = obj["metadata"]
        self.sim.delete(MGMT, f"{obj['kind']}", meta["namespace"], meta["name"])
