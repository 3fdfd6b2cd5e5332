"""bench.soak_load.walk over a real HTTP server: it follows continue tokens to the end and
collects the clusters any page said it hid for stale RBAC (what a walk that misses a whole
cluster's rows has to be read with)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.soak_load import walk

PAGES = {
    "": {
        "items": [{"cluster": "c1", "namespace": "a", "kind": "Kustomization", "name": "x"}],
        "continue": "t1",
        "freshness": {"hiddenStaleRbac": []},
    },
    "t1": {
        "items": [{"cluster": "c1", "namespace": "b", "kind": "Kustomization", "name": "y"}],
        "continue": None,
        "freshness": {"hiddenStaleRbac": [{"cluster": "c2", "rbacSyncedAt": None}]},
    },
}


class Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        token = self.path.partition("continue=")[2]
        body = json.dumps(PAGES[token]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_walk_follows_the_pages_and_collects_the_clusters_hidden_for_stale_rbac() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hidden: set[str] = set()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        rows, code = walk(None, base, {}, hidden)
        assert code == 200
        assert rows == [("c1", "a", "Kustomization", "x"), ("c1", "b", "Kustomization", "y")]
        assert hidden == {"c2"}
    finally:
        server.shutdown()
        server.server_close()
