"""Registry source: Argo CD's declarative cluster Secrets (label
`argocd.argoproj.io/secret-type=cluster`) in `FLEETSCOPE_ARGOCD_CLUSTERS_NAMESPACE`.

The cluster's name is the Secret's `name` (Argo CD's own cluster name; the label
`fleetscope.io/cluster-name` overrides it). `server` and `config` become a kubeconfig in memory,
so the kubernetes client's loader in common.leaf does the rest as for any kubeconfig: bearer
token, basic auth, TLS client certificate, CA data, server name, `insecure`, and
`execProviderConfig` (an exec plugin). `awsAuthConfig` becomes `aws eks get-token`. A plugin
runs only when its command's absolute path is in `FLEETSCOPE_EXEC_COMMANDS` (the operator's
allow-list, empty by default); otherwise the cluster is registered as not ready with why, as
when the aws CLI is not on PATH. Secrets are read in the namespaces of
`FLEETSCOPE_ARGOCD_CLUSTERS_NAMESPACE`. Argo CD's in-cluster entry (`https://kubernetes.default.svc`) is skipped
unless `FLEETSCOPE_ARGOCD_INCLUDE_IN_CLUSTER`; then it is reached as the management cluster is.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from common.index.registry_record import Problem
from common.leaf.claims import Claim, claim_name, revision, secret_value, source_namespaces
from common.leaf.client import ClusterConfig
from common.leaf.management import Management, Obj
from common.settings import Settings

log = logging.getLogger(__name__)
SOURCE = "argocd"
LABEL = "argocd.argoproj.io/secret-type=cluster"
IN_CLUSTER = "https://kubernetes.default.svc"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
EXEC_API = "client.authentication.k8s.io/v1beta1"


def load(mgmt: Management, settings: Settings) -> tuple[list[Claim], list[Problem]]:
    claims: list[Claim] = []
    problems: list[Problem] = []
    setting = "FLEETSCOPE_ARGOCD_CLUSTERS_NAMESPACE"
    for namespace in source_namespaces(settings.argocd_clusters_namespace, setting, SOURCE):
        for secret in mgmt.list_objects("v1", "secrets", namespace, LABEL):
            claim = _claim(secret, settings)
            if isinstance(claim, Problem):
                problems.append(claim)
            elif claim is not None:
                claims.append(claim)
    return claims, problems


def _claim(secret: Obj, settings: Settings) -> Claim | Problem | None:
    """One cluster Secret's claim (None: the in-cluster entry, not asked for)."""
    meta = secret.get("metadata") or {}
    ref = f"secret {meta.get('namespace', '')}/{meta.get('name', '')}"
    origin = f"argocd {ref}"
    server = _text(secret, "server").rstrip("/")
    in_cluster = server in (IN_CLUSTER, IN_CLUSTER + ":443")
    if in_cluster and not settings.argocd_include_in_cluster:
        return None
    default = _text(secret, "name") or ("in-cluster" if in_cluster else "")
    name = claim_name(meta, default, SOURCE, origin, settings.cluster_name_label_namespaces)
    if isinstance(name, Problem):
        return name
    if in_cluster:
        return _in_cluster(name, origin, settings, revision(secret))
    allowed = settings.exec_commands
    kubeconfig, unusable = argocd_kubeconfig(name, server, _config(secret), allowed)
    config = ClusterConfig(
        name,
        SOURCE,
        origin,
        kubeconfig,
        exec_commands=allowed,
        exec_timeout_s=settings.exec_timeout_s,
    )
    return Claim(name, SOURCE, origin, config, unusable, revision(secret), ref, error=unusable)


def _text(secret: Obj, key: str) -> str:
    return (secret_value(secret, key) or b"").decode(errors="replace").strip()


def _config(secret: Obj) -> dict[str, Any]:
    try:
        config = json.loads(secret_value(secret, "config") or b"{}")
    except ValueError:
        config = None
    return config if isinstance(config, dict) else {}


def argocd_kubeconfig(
    name: str, server: str, config: dict[str, Any], allowed: tuple[str, ...] = ()
) -> tuple[dict[str, Any], str]:
    """A kubeconfig from Argo CD's cluster `config`, and why it cannot work here ("" if it can):
    an exec plugin needs its command's absolute path in `allowed`."""
    tls = config.get("tlsClientConfig") or {}
    cluster: dict[str, Any] = {"server": server}
    if tls.get("insecure"):
        cluster["insecure-skip-tls-verify"] = True  # client-go refuses a CA with it: drop the CA
    elif tls.get("caData"):
        cluster["certificate-authority-data"] = tls["caData"]
    if tls.get("serverName"):
        cluster["tls-server-name"] = tls["serverName"]
    user: dict[str, Any] = {}
    if tls.get("certData") and tls.get("keyData"):
        user["client-certificate-data"], user["client-key-data"] = tls["certData"], tls["keyData"]
    if config.get("bearerToken"):
        user["token"] = config["bearerToken"]
    elif config.get("username") and config.get("password"):
        user["username"], user["password"] = config["username"], config["password"]
    unusable = ""
    if config.get("execProviderConfig"):
        user["exec"], unusable = _exec(config["execProviderConfig"], allowed)
    elif config.get("awsAuthConfig"):
        user["exec"], unusable = _aws(config["awsAuthConfig"], allowed)
    return _kubeconfig(name, cluster, user), unusable


def _kubeconfig(name: str, cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def _exec(spec: Any, allowed: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    spec = spec if isinstance(spec, dict) else {}
    command = str(spec.get("command") or "")
    env = spec.get("env") if isinstance(spec.get("env"), dict) else {}
    plugin = {
        "command": _resolve(command) or command,
        "args": [str(a) for a in spec.get("args") or []],
        "env": [{"name": str(k), "value": str(v)} for k, v in env.items()],
        "apiVersion": str(spec.get("apiVersion") or EXEC_API),
    }
    if plugin["command"] not in allowed:
        return plugin, (
            f"execProviderConfig: command {command[:80]!r} is refused: its absolute path is not "
            "in FLEETSCOPE_EXEC_COMMANDS (the operator's allow-list of exec plugins)"
        )
    return plugin, ""


def _aws(spec: Any, allowed: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """Argo CD runs `argocd-k8s-auth aws`; the aws CLI's `eks get-token` gives the same token."""
    spec = spec if isinstance(spec, dict) else {}
    args = ["eks", "get-token", "--cluster-name", str(spec.get("clusterName") or "")]
    if spec.get("roleARN"):
        args += ["--role-arn", str(spec["roleARN"])]
    env = [{"name": "AWS_PROFILE", "value": str(spec["profile"])}] if spec.get("profile") else []
    aws = _resolve("aws")
    plugin = {
        "command": aws or "aws",
        "args": [*args, "--output", "json"],
        "env": env,
        "apiVersion": EXEC_API,
    }
    if not aws:
        return plugin, "awsAuthConfig needs the aws CLI, which is not on PATH here"
    if aws not in allowed:
        return plugin, (
            f"awsAuthConfig is refused: it runs {aws}, which FLEETSCOPE_EXEC_COMMANDS (the "
            "operator's allow-list of exec plugins) does not list"
        )
    return plugin, ""


def _resolve(command: str) -> str:
    """The absolute path `command` runs ("" when it is not found or not absolute)."""
    if os.sep in command:
        return command if os.path.isabs(command) else ""
    return shutil.which(command) or ""


def _in_cluster(name: str, origin: str, settings: Settings, rev: str) -> Claim:
    """Argo CD's in-cluster entry is the management cluster: reached with fleetscope's own
    management kubeconfig, else the pod's service account."""
    if settings.management_kubeconfig:
        path = Path(settings.management_kubeconfig)
        try:
            kubeconfig = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            kubeconfig = None
        config = ClusterConfig(
            name,
            SOURCE,
            origin,
            kubeconfig if isinstance(kubeconfig, dict) else {},
            str(path.parent),
            operator=True,  # the operator's own file, not the Secret's content
            exec_timeout_s=settings.exec_timeout_s,
        )
        return Claim(name, SOURCE, origin, config, "", rev, "management")
    # fleetscope's own service account: files of the pod, whatever the Secret says
    cluster = {"server": IN_CLUSTER, "certificate-authority": f"{SA_DIR}/ca.crt"}
    kubeconfig = _kubeconfig(name, cluster, {"tokenFile": f"{SA_DIR}/token"})
    config = ClusterConfig(name, SOURCE, origin, kubeconfig, operator=True)
    return Claim(name, SOURCE, origin, config, "", rev, "management")
