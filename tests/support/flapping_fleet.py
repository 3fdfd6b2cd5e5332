"""The flapping tests' fleet: two clusters of team-a and team-b Kustomizations (tests.support.
team_cluster), some of them flipped as many times as FLIPS says through the watcher's writer,
the app over them in `header` mode, and a walk of the list validated against the OpenAPI
document. A test module offers the fixtures with `r, client = flapping_fleet.r,
flapping_fleet.client`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from common.index import keys
from common.index.write import store, store_events
from common.rbac.grants import compile_grants, store_grants
from common.settings import Settings
from tests.support import topology
from tests.support.http import make_app
from tests.support.query_fleet import REG, headers, mark_synced
from tests.support.schema import check_response
from tests.support.team_cluster import member, rbac

CLUSTERS = ("c1", "c2")
FLIPS = {  # (namespace, name): transitions written
    ("team-a", "f0"): 4,
    ("team-a", "f1"): 6,
    ("team-a", "calm"): 3,
    ("team-b", "f2"): 5,
    ("team-b", "calm"): 1,
}


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    for c in CLUSTERS:
        quiet = [member(ns, f"q{i}") for ns in ("team-a", "team-b") for i in range(30)]
        flipping = [member(ns, n) for ns, n in FLIPS]
        store.replace_rows(client, c, quiet + flipping)
        client.hset(keys.CLUSTERS, c, json.dumps({"source": "dir"}))
        store_grants(client, c, compile_grants(rbac(), REG), time.time())
        mark_synced(client, c, objects=len(quiet) + len(flipping))
        for (ns, name), n in FLIPS.items():
            for i in range(n):
                change = store_events.Change.of(member(ns, name, i % 2 == 1))
                store_events.apply_changes(client, c, [change])
    yield client
    client.close()


@pytest.fixture
def client(r: Any, redis_url: str) -> Any:
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    return make_app(settings).test_client()


def walk(client: Any, user: Any, limit: int, **params: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = None
    while True:
        query = {**params, "limit": str(limit), **({"continue": token} if token else {})}
        resp = client.get("/api/v1/objects", headers=headers(user), query_string=query)
        check_response("/api/v1/objects", resp.status_code, resp.get_json())
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        out += body["items"]
        token = body["continue"]
        if not token:
            return out
