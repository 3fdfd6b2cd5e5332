"""`store_grants` against a real Redis (both topologies): every store raises the cluster's grants
generation; a store made `since_generation` a generation that moved stores nothing (a full RBAC
sync whose lists straddled a watcher's newer compile); a fenced store (a watcher's) stores
nothing once the lease is another replica's."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from common.errors import LockBusy
from common.index import keys
from common.index.lease import Lease
from common.kinds.registry import builtin_registry
from common.rbac.authorizer import RbacObjects
from common.rbac.encoding import HASH_FIELD
from common.rbac.grants import compile_grants, grants_generation, store_grants

REG = builtin_registry()
TOPOLOGIES = ["standalone", "cluster"]
C = "c1"
VIEWER = {
    "metadata": {"name": "viewer"},
    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}],
}


def team(*namespaces: str) -> Any:
    bindings = [
        {
            "metadata": {"name": "team-a", "namespace": ns},
            "roleRef": {"kind": "ClusterRole", "name": "viewer"},
            "subjects": [{"kind": "Group", "name": "team-a"}],
        }
        for ns in namespaces
    ]
    return compile_grants(RbacObjects([], [VIEWER], bindings, []), REG)


def stored_hash(r: redis.Redis) -> str | None:
    return r.hget(keys.rbac(C), HASH_FIELD)  # type: ignore[return-value]


def test_every_store_raises_the_generation_and_only_a_change_raises_the_version(
    r: redis.Redis,
) -> None:
    assert grants_generation(r, C) == 0
    assert store_grants(r, C, team("a"), 1.0)
    version = r.get(keys.VERSION)
    assert grants_generation(r, C) == 1
    assert not store_grants(r, C, team("a"), 2.0)  # unchanged: still a store
    assert grants_generation(r, C) == 2
    assert r.get(keys.VERSION) == version
    assert store_grants(r, C, team("a", "b"), 3.0)
    assert grants_generation(r, C) == 3
    assert r.get(keys.VERSION) != version


def test_a_store_since_a_generation_that_moved_stores_nothing(r: redis.Redis) -> None:
    store_grants(r, C, team("a", "b"), 1.0)
    since = grants_generation(r, C)  # a full sync is about to list; it sees team-a in a and b
    revoked = team("a")
    assert store_grants(r, C, revoked, 2.0)  # a watcher: b's binding deleted meanwhile
    assert not store_grants(r, C, team("a", "b"), 3.0, since_generation=since)
    assert stored_hash(r) == revoked.content_hash
    assert grants_generation(r, C) == since + 1
    assert r.hget(keys.sync(C), "rbac_synced_at") == "2.0"
    # A sync that listed after the watcher's store goes ahead.
    assert not store_grants(r, C, revoked, 4.0, since_generation=since + 1)
    assert grants_generation(r, C) == since + 2


def test_a_fenced_store_needs_the_lease(r: redis.Redis) -> None:
    mine = Lease(r, keys.lease(C), "watcher-a:1", 15_000)
    assert mine.acquire()
    store_grants(r, C, team("a"), 1.0, fence=mine.fence)
    mine.release()
    theirs = Lease(r, keys.lease(C), "watcher-b:2", 15_000)
    assert theirs.acquire()
    with pytest.raises(LockBusy):
        store_grants(r, C, team("a", "b"), 2.0, fence=mine.fence)
    assert stored_hash(r) == team("a").content_hash
    assert grants_generation(r, C) == 1
    store_grants(r, C, team("b"), 3.0, fence=theirs.fence)
    assert stored_hash(r) == team("b").content_hash
