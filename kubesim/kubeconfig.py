"""Kubeconfig files kubesim writes: one per cluster, bearer-token auth.

The current context uses the collector identity (read everything, impersonate); a second
context `<cluster>-admin` uses the admin identity (`system:masters`) for writes with kubectl.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

from kubesim.auth import ADMIN_USER, COLLECTOR_USER, Tokens


def kubeconfig(cluster: str, server: str, tokens: Tokens, ca_pem: bytes) -> dict[str, object]:
    """The collector's context (current) and an admin context `<cluster>-admin`."""
    doc = collector_kubeconfig(cluster, server, tokens.collector, ca_pem)
    doc["users"].append({"name": ADMIN_USER, "user": {"token": tokens.admin}})
    doc["contexts"].append(
        {"name": f"{cluster}-admin", "context": {"cluster": cluster, "user": ADMIN_USER}}
    )
    doc["preferences"] = {}
    return doc


def collector_kubeconfig(cluster: str, server: str, token: str, ca_pem: bytes) -> dict[str, Any]:
    """A kubeconfig with one context: `token` at `server` (what a registration Secret holds)."""
    entry: dict[str, str] = {"server": server}
    if ca_pem:
        entry["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": COLLECTOR_USER, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": COLLECTOR_USER}}],
        "current-context": cluster,
    }


def write_kubeconfig(
    directory: Path, cluster: str, server: str, tokens: Tokens, ca_pem: bytes = b""
) -> Path:
    """Write `<directory>/<cluster>.yaml` (mode 0600, atomically) and return its path."""
    path = directory / f"{cluster}.yaml"
    tmp = directory / f".{cluster}.yaml.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(kubeconfig(cluster, server, tokens, ca_pem), f, sort_keys=False)
    os.replace(tmp, path)
    return path
