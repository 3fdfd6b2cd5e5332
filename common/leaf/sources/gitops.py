"""Registry source: Weave GitOps `GitopsCluster` objects (gitops.weave.works) on the management
cluster, read at the version discovery serves (v1alpha1 preferred).

A GitopsCluster `<ns>/<name>` in the namespaces of `FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE` is
registered as `<ns>.<name>` (or its label `fleetscope.io/cluster-name`, where allowed). As Weave GitOps' cluster controller does: `spec.secretRef.name`
names a Secret of the same namespace holding a kubeconfig under `value` or `value.yaml`;
`spec.capiClusterRef.name` names a Cluster API cluster of the same namespace, whose
`<name>-kubeconfig` Secret is read (and whose control plane must be ready). A GitopsCluster
whose `Ready` condition is False is registered as not ready, with the condition's reason, and
not synced (`ClusterConnectivity` is left to fleetscope's own syncs to find out).
"""

from __future__ import annotations

from common.index.registry_record import Problem
from common.leaf.claims import (
    Claim,
    claim_name,
    condition,
    condition_text,
    qualified,
    source_namespaces,
)
from common.leaf.management import Management, Obj
from common.leaf.sources import capi as registry_capi
from common.leaf.sources.capi import kubeconfig_claim, secret_claim, secrets_in
from common.settings import Settings

GROUP = "gitops.weave.works"
VERSIONS = ("v1alpha1",)
KEYS = ("value", "value.yaml")
SOURCE = "gitopscluster"


def load(mgmt: Management, settings: Settings) -> tuple[list[Claim], list[Problem]]:
    version = mgmt.served_version(GROUP, VERSIONS)
    if version is None:
        message = (
            f"{SOURCE}: the management cluster does not serve {GROUP} (is Weave GitOps installed?)"
        )
        return [], [Problem("source-error", message, source=SOURCE)]
    claims: list[Claim] = []
    problems: list[Problem] = []
    api_version = f"{GROUP}/{version}"
    setting = "FLEETSCOPE_GITOPSCLUSTERS_NAMESPACE"
    for where in source_namespaces(settings.gitopsclusters_namespace, setting, SOURCE):
        for gc in mgmt.list_objects(api_version, "gitopsclusters", where):
            meta = gc.get("metadata") or {}
            ns, obj_name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            origin = f"{SOURCE} {ns}/{obj_name}"
            name = claim_name(
                meta,
                qualified(ns, obj_name),
                SOURCE,
                origin,
                settings.cluster_name_label_namespaces,
            )
            if isinstance(name, Problem):
                problems.append(name)
                continue
            claims.append(_claim(mgmt, name, origin, ns, gc))
    return claims, problems


def _claim(mgmt: Management, name: str, origin: str, ns: str, gc: Obj) -> Claim:
    spec = gc.get("spec") or {}
    not_ready = _not_ready(gc)
    secret_ref = str((spec.get("secretRef") or {}).get("name") or "")
    capi_ref = str((spec.get("capiClusterRef") or {}).get("name") or "")
    if secret_ref:
        ref = f"secret {ns}/{secret_ref}"
        if not_ready:
            return Claim(name, SOURCE, origin, None, not_ready, "", ref)
        secret = secrets_in(mgmt, ns).get(secret_ref)
        return secret_claim(name, SOURCE, origin, secret, ref, KEYS)
    if capi_ref:
        return _capi_claim(mgmt, name, origin, ns, capi_ref, not_ready)
    return Claim(name, SOURCE, origin, None, "its spec has neither secretRef nor capiClusterRef")


def _not_ready(gc: Obj) -> str:
    if (gc.get("metadata") or {}).get("deletionTimestamp"):
        return "the GitopsCluster is being deleted"
    ready = condition(gc, "Ready")
    return condition_text(ready) if ready is not None and ready.get("status") == "False" else ""


def _capi_claim(
    mgmt: Management, name: str, origin: str, ns: str, capi_ref: str, not_ready: str
) -> Claim:
    ref = f"secret {ns}/{capi_ref}-kubeconfig"
    version = mgmt.served_version(registry_capi.GROUP, registry_capi.VERSIONS)
    if version is None:
        reason = f"capiClusterRef {capi_ref}: {registry_capi.GROUP} is not served"
        return Claim(name, SOURCE, origin, None, not_ready or reason, "", ref)
    clusters = mgmt.list_objects(f"{registry_capi.GROUP}/{version}", "clusters", ns)
    cluster = next((c for c in clusters if (c.get("metadata") or {}).get("name") == capi_ref), None)
    if cluster is None:
        reason = f"its Cluster API cluster {ns}/{capi_ref} does not exist"
        return Claim(name, SOURCE, origin, None, not_ready or reason, "", ref)
    return kubeconfig_claim(mgmt, name, SOURCE, origin, ns, capi_ref, cluster, KEYS, not_ready)
