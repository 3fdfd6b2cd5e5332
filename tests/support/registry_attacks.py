"""Helpers for the registry attack tests: a listener that records what reaches it (a tenant's
"API server"), registration objects carrying an attacker's kubeconfig through each management
source, and exec plugins as shell scripts an operator could allow-list."""

from __future__ import annotations

import json
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from kubesim.server import KubeSim
from tests.support import mgmtsim
from tests.support.mgmtsim import MGMT

Obj = dict[str, Any]
EXEC_API = "client.authentication.k8s.io/v1beta1"
# the registered name each source gives an object called `evil` (docs/operations.md)
NAMES = {"secret": "evil", "gitopscluster": "fleet.evil", "capi": "fleet.evil"}
SWITCHES = {
    "secret": "cluster_secrets",
    "gitopscluster": "gitopsclusters",
    "capi": "capi_clusters",
    "argocd": "argocd_clusters",
}


@dataclass
class Listener:
    """A plain HTTP server that answers 401 to everything and remembers each request's path
    and headers: a server of the tenant's choosing."""

    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    url: str = ""


@contextmanager
def listener() -> Iterator[Listener]:
    seen = Listener()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.requests.append((self.path, dict(self.headers.items())))
            body = b'{"kind":"Status","code":401,"message":"Unauthorized"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def kubeconfig(server: str, user: Obj, cluster: Obj | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def _secret(name: str, namespace: str, key: str, config: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {key: mgmtsim.b64(yaml.safe_dump(config))},
    }


def register(sim: KubeSim, source: str, config: Obj) -> str:
    """Register `config` as cluster `evil` through `source`; its fleetscope name."""
    if source == "secret":
        secret = _secret("evil", "fleetscope", "kubeconfig", config)
        secret["metadata"]["labels"] = {"fleetscope.io/cluster": "true"}
        sim.apply(MGMT, secret)
    elif source == "gitopscluster":
        sim.apply(MGMT, _secret("evil-access", "fleet", "value", config))
        sim.apply(MGMT, mgmtsim.gitopscluster("evil", secret_ref="evil-access"))
    elif source == "capi":
        sim.apply(MGMT, _secret("evil-kubeconfig", "fleet", "value", config))
        sim.apply(MGMT, mgmtsim.capi_cluster("evil"))
    else:
        raise ValueError(source)
    return NAMES[source]


def script(path: Path, body: str) -> str:
    """An executable shell script at `path` (what an operator installs as a plugin)."""
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def credential(token: str) -> str:
    """An ExecCredential answer carrying `token`, as a shell-quoted JSON string."""
    doc = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": token}}
    return "'" + json.dumps(doc) + "'"
