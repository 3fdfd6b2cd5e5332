"""common.index.lease.delete_if: a key beside a lease (a watcher's handover claim) is deleted
only while it holds one of the caller's values, on a real Redis (one server and a cluster)."""

from __future__ import annotations

import redis

from common.index import keys, lease

TOPOLOGIES = ("standalone", "cluster")


def test_delete_if_deletes_only_what_holds_one_of_the_values(r: redis.Redis) -> None:
    key = keys.handover("c1")
    r.set(key, "me:1 ready")
    assert not lease.delete_if(r, key, "other:2", "other:2 ready")
    assert r.get(key) == "me:1 ready"
    assert lease.delete_if(r, key, "me:1", "me:1 ready")
    assert r.get(key) is None
    assert not lease.delete_if(r, key, "me:1")  # nothing there: nothing to do
    r.set(key, "me:1")
    assert lease.delete_if(r, key, "me:1", "me:1 ready") and not r.exists(key)
