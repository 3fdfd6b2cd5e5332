"""bench.soak_load.walk over a real HTTP server: it follows continue tokens to the end and
collects the clusters any page said it hid for stale RBAC (what a walk that misses a whole
cluster's rows has to be read with)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from bench.soak_load import walk
from tests.support.http import serve

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


def pages(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    body = json.dumps(PAGES[query.get("continue", [""])[0]]).encode()
    start("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def test_a_walk_follows_the_pages_and_collects_the_clusters_hidden_for_stale_rbac() -> None:
    with serve(pages) as host:
        hidden: set[str] = set()
        rows, code = walk(None, f"http://{host}", {}, hidden)
    assert code == 200
    assert rows == [("c1", "a", "Kustomization", "x"), ("c1", "b", "Kustomization", "y")]
    assert hidden == {"c2"}
