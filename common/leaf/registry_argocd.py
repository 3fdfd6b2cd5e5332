"""Registry source: Argo CD's declarative cluster Secrets (label
`argocd.argoproj.io/secret-type=cluster`) in `FLEETSCOPE_ARGOCD_CLUSTERS_NAMESPACE`.

The cluster's name is the Secret's `name` (Argo CD's own cluster name; the label
`fleetscope.io/cluster-name` overrides it). `server` and `config` become a kubeconfig in memory,
so the kubernetes client's loader in common.leaf does the rest as for any kubeconfig: bearer
token, basic auth, TLS client certificate, CA data, server name, `insecure`, and
`execProviderConfig` (an exec plugin). `awsAuthConfig` becomes `aws eks get-token`. Credentials
that cannot work here (an exec command or the aws CLI not on PATH) register the cluster as not
ready, with why. Argo CD's in-cluster entry (`https://kubernetes.default.svc`) is skipped
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
from common.leaf.client import ClusterConfig
from common.leaf.management import Management, Obj
from common.leaf.registry import Claim, claim_name, revision, secret_value
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
    for secret in mgmt.list_objects("v1", "secrets", settings.argocd_clusters_namespace, LABEL):
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
    name = claim_name(meta, default, SOURCE, origin)
    if isinstance(name, Problem):
        return name
    if in_cluster:
        return _in_cluster(name, origin, settings, revision(secret))
    kubeconfig, unusable = argocd_kubeconfig(name, server, _config(secret))
    config = ClusterConfig(name, SOURCE, origin, kubeconfig)
    return Claim(name, SOURCE, origin, config, unusable, revision(secret), ref)


def _text(secret: Obj, key: str) -> str:
    return (secret_value(secret, key) or b"").decode(errors="replace").strip()


def _config(secret: Obj) -> dict[str, Any]:
    try:
        config = json.loads(secret_value(secret, "config") or b"{}")
    except ValueError:
        config = None
    return config if isinstance(config, dict) else {}


def argocd_kubeconfig(name: str, server: str, config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A kubeconfig from Argo CD's cluster `config`, and why it cannot work here ("" if it can)."""
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
        user["exec"], unusable = _exec(config["execProviderConfig"])
    elif config.get("awsAuthConfig"):
        user["exec"], unusable = _aws(config["awsAuthConfig"])
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


def _exec(spec: dict[str, Any]) -> tuple[dict[str, Any], str]:
    command = str(spec.get("command") or "")
    plugin = {
        "command": command,
        "args": [str(a) for a in spec.get("args") or []],
        "env": [{"name": str(k), "value": str(v)} for k, v in (spec.get("env") or {}).items()],
        "apiVersion": str(spec.get("apiVersion") or EXEC_API),
    }
    if spec.get("installHint"):
        plugin["installHint"] = str(spec["installHint"])
    if not command or not _on_path(command):
        hint = f" ({spec['installHint']})" if spec.get("installHint") else ""
        return plugin, f"execProviderConfig: command {command!r} is not on PATH here{hint}"
    return plugin, ""


def _aws(spec: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Argo CD runs `argocd-k8s-auth aws`; the aws CLI's `eks get-token` gives the same token."""
    args = ["eks", "get-token", "--cluster-name", str(spec.get("clusterName") or "")]
    if spec.get("roleARN"):
        args += ["--role-arn", str(spec["roleARN"])]
    env = [{"name": "AWS_PROFILE", "value": str(spec["profile"])}] if spec.get("profile") else []
    plugin = {
        "command": "aws",
        "args": [*args, "--output", "json"],
        "env": env,
        "apiVersion": EXEC_API,
    }
    if not _on_path("aws"):
        return plugin, "awsAuthConfig needs the aws CLI, which is not on PATH here"
    return plugin, ""


def _on_path(command: str) -> bool:
    if os.sep in command:
        return os.access(command, os.X_OK)
    return shutil.which(command) is not None


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
        )
        return Claim(name, SOURCE, origin, config, "", rev, "management")
    cluster = {"server": IN_CLUSTER, "certificate-authority": f"{SA_DIR}/ca.crt"}
    kubeconfig = _kubeconfig(name, cluster, {"tokenFile": f"{SA_DIR}/token"})
    config = ClusterConfig(name, SOURCE, origin, kubeconfig)
    return Claim(name, SOURCE, origin, config, "", rev, "management")
