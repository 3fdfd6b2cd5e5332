"""Registry source: Cluster API `Cluster` objects (cluster.x-k8s.io) on the management cluster.

A Cluster `<ns>/<name>` in the namespaces of `FLEETSCOPE_CAPI_CLUSTERS_NAMESPACE` is registered
as `<ns>.<name>` (or its label `fleetscope.io/cluster-name`, where allowed)
with the kubeconfig Cluster API writes into the Secret `<name>-kubeconfig` of its namespace (key
`value`). Only a Cluster whose control plane is ready is synced (`status.controlPlaneReady`, or
the condition `ControlPlaneReady`/`Ready`; v1beta2's `controlPlaneInitialized` and
`ControlPlaneAvailable`/`Available` too); the others are registered as not ready, with why.
Reads: discovery of the group, a list of Clusters, a list of Secrets per namespace with Clusters.
"""

from __future__ import annotations

from common.index.registry_record import Problem
from common.leaf.claims import (
    Claim,
    claim_name,
    condition,
    condition_text,
    parse_kubeconfig,
    qualified,
    revision,
    secret_value,
    source_namespaces,
)
from common.leaf.client import ClusterConfig
from common.leaf.management import Management, Obj
from common.settings import Settings

GROUP = "cluster.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")  # the semantics read here; else whatever the server prefers
KUBECONFIG_KEY = "value"
READY_CONDITIONS = ("ControlPlaneReady", "Ready", "ControlPlaneAvailable", "Available")


def load(mgmt: Management, settings: Settings) -> tuple[list[Claim], list[Problem]]:
    version = mgmt.served_version(GROUP, VERSIONS)
    if version is None:
        return [], [not_served("capi")]
    claims: list[Claim] = []
    problems: list[Problem] = []
    setting = "FLEETSCOPE_CAPI_CLUSTERS_NAMESPACE"
    for where in source_namespaces(settings.capi_clusters_namespace, setting, "capi"):
        for cluster in mgmt.list_objects(f"{GROUP}/{version}", "clusters", where):
            meta = cluster.get("metadata") or {}
            ns, obj_name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            origin = f"capi cluster {ns}/{obj_name}"
            name = claim_name(
                meta,
                qualified(ns, obj_name),
                "capi",
                origin,
                settings.cluster_name_label_namespaces,
            )
            if isinstance(name, Problem):
                problems.append(name)
                continue
            claims.append(kubeconfig_claim(mgmt, name, "capi", origin, ns, obj_name, cluster))
    return claims, problems


def not_served(source: str) -> Problem:
    return Problem(
        "source-error",
        f"{source}: the management cluster does not serve {GROUP} (is Cluster API installed?)",
        source=source,
    )


def kubeconfig_claim(
    mgmt: Management,
    name: str,
    source: str,
    origin: str,
    namespace: str,
    cluster_name: str,
    cluster: Obj,
    keys: tuple[str, ...] = (KUBECONFIG_KEY,),
    not_ready: str = "",
) -> Claim:
    """A claim on the kubeconfig Secret of Cluster API cluster `namespace/cluster_name`."""
    secret_name = f"{cluster_name}-kubeconfig"
    ref = f"secret {namespace}/{secret_name}"
    not_ready = not_ready or control_plane_not_ready(cluster)
    server = endpoint(cluster)
    if not_ready:  # not read: its kubeconfig does not matter until it is ready
        return Claim(name, source, origin, None, not_ready, "", ref, server)
    secret = secrets_in(mgmt, namespace).get(secret_name)
    return secret_claim(name, source, origin, secret, ref, keys, server)


def secrets_in(mgmt: Management, namespace: str) -> dict[str, Obj]:
    """The Secrets of one namespace by name (one list per namespace and registry round)."""
    return {
        str((s.get("metadata") or {}).get("name")): s
        for s in mgmt.list_objects("v1", "secrets", namespace)
    }


def secret_claim(
    name: str,
    source: str,
    origin: str,
    secret: Obj | None,
    ref: str,
    keys: tuple[str, ...],
    server: str = "",
) -> Claim:
    """A claim on the kubeconfig in the first of `keys` of `secret` (not ready when missing).
    Its revision is the Secret's resourceVersion: a rotated token changes the record."""
    if secret is None:
        reason = f"its kubeconfig {ref} does not exist"
        return Claim(name, source, origin, None, reason, "", ref, server)
    rev = revision(secret)
    for key in keys:
        content = secret_value(secret, key)
        if content is not None:
            config = ClusterConfig(name, source, origin, parse_kubeconfig(content, ref))
            return Claim(name, source, origin, config, "", rev, ref)
    reason = f"{ref} has no key {' or '.join(keys)}"
    return Claim(name, source, origin, None, reason, rev, ref, server)


def control_plane_not_ready(cluster: Obj) -> str:
    """Why a Cluster's control plane is not ready ("" when it is)."""
    meta, status = cluster.get("metadata") or {}, cluster.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "the Cluster is being deleted"
    if status.get("controlPlaneReady") is True:
        return ""
    if (status.get("initialization") or {}).get("controlPlaneInitialized") is True:
        return ""
    conditions = [condition(cluster, kind) for kind in READY_CONDITIONS]
    if any(c is not None and c.get("status") == "True" for c in conditions):
        return ""
    known = [c for c in conditions if c is not None]
    detail = condition_text(known[0]) if known else f"phase {status.get('phase') or 'unknown'}"
    return f"control plane not ready: {detail}"


def endpoint(cluster: Obj) -> str:
    """`spec.controlPlaneEndpoint` as a URL (shown while there is no kubeconfig yet)."""
    ep = (cluster.get("spec") or {}).get("controlPlaneEndpoint") or {}
    host, port = ep.get("host"), ep.get("port")
    if not host:
        return ""
    return f"https://{host}:{port}" if port else f"https://{host}"
