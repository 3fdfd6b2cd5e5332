"""A tiny Kubernetes-like API server for unit tests of common.leaf.client (discovery, paginated lists,
410 on expired continue tokens, single GETs, bearer auth), recording every request it gets.
End-to-end tests use kubesim instead."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KS = "kustomize.toolkit.fluxcd.io/v1"  # Flux Kustomizations' apiVersion


@dataclass
class FakeLeaf:
    token: str
    # (api_version, plural) -> objects (each with metadata.namespace/name)
    objects: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    expire_continue: int = 0  # answer 410 to this many continued list requests
    fail_status: int = 0  # answer every request with this status (0 = normal)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, name: str = "leaf", token: str | None = None) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": {"token": token or self.token}}],
        }

    def add(self, api_version: str, plural: str, obj: dict[str, Any]) -> None:
        self.objects.setdefault((api_version, plural), []).append(obj)

    def start(self) -> FakeLeaf:
        leaf = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                headers: dict[str, list[str]] = {}
                for k, v in self.headers.items():
                    headers.setdefault(k.lower(), []).append(v)
                leaf.requests.append((self.path, headers))
                status, body = leaf.answer(self.path, headers)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def answer(self, raw_path: str, headers: dict[str, list[str]]) -> tuple[int, Any]:
        if headers.get("authorization") != [f"Bearer {self.token}"]:
            return 401, {"kind": "Status", "message": "Unauthorized"}
        if self.fail_status:
            return self.fail_status, {"kind": "Status", "message": "injected failure"}
        url = urlsplit(raw_path)
        parts = url.path.strip("/").split("/")
        if url.path == "/apis":
            return 200, self._groups()
        if parts[0] == "apis" and len(parts) == 3:
            gv = f"{parts[1]}/{parts[2]}"
            plurals = [p for (v, p) in self.objects if v == gv]
            if not plurals:
                return 404, {"kind": "Status", "message": "not found"}
            return 200, {"groupVersion": gv, "resources": [{"name": p} for p in plurals]}
        if parts[0] == "apis" and len(parts) == 4:
            return self._list(f"{parts[1]}/{parts[2]}", parts[3], parse_qs(url.query))
        if parts[0] == "apis" and len(parts) == 7 and parts[3] == "namespaces":
            return self._get(f"{parts[1]}/{parts[2]}", parts[5], parts[4], parts[6])
        return 404, {"kind": "Status", "message": "not found"}

    def _groups(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for gv, _ in self.objects:
            g, v = gv.split("/")
            if v not in groups.setdefault(g, []):
                groups[g].append(v)
        return {
            "kind": "APIGroupList",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in groups.items()
            ],
        }

    def _list(self, gv: str, plural: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        if (gv, plural) not in self.objects:
            return 404, {"kind": "Status", "message": "not found"}
        items = self.objects[(gv, plural)]
        limit = int(query.get("limit", ["500"])[0])
        start = int(query.get("continue", ["0"])[0])
        if start and self.expire_continue > 0:
            self.expire_continue -= 1
            return 410, {"kind": "Status", "message": "continue token expired"}
        page = items[start : start + limit]
        more = start + limit < len(items)
        return 200, {"items": page, "metadata": {"continue": str(start + limit) if more else ""}}

    def _get(self, gv: str, plural: str, ns: str, name: str) -> tuple[int, Any]:
        for obj in self.objects.get((gv, plural), []):
            meta = obj["metadata"]
            if meta["namespace"] == ns and meta["name"] == name:
                return 200, obj
        return 404, {"kind": "Status", "message": f'{plural} "{name}" not found'}


def flux_object(ns: str, name: str, ready: str = "True", kind: str = "Kustomization") -> dict:
    return {
        "apiVersion": KS,
        "kind": kind,
        "metadata": {"namespace": ns, "name": name, "generation": 1},
        "status": {
            "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": ready, "reason": "R", "message": "m"}],
        },
    }
