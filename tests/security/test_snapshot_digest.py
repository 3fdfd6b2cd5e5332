"""The unchanged-snapshot check (collector.sync, `store.confirm_unchanged`) takes each listed
object's uid and resourceVersion from the leaf: hostile ones (huge, control characters, the
digest's own separators) are hashed, never stored or logged as sent; a leaf cannot make another
cluster's re-sync skip its rows; and a leaf that changes an object without changing its
resourceVersion (no conforming API server does) keeps only its own rows, and only until
`sync_rebuild_after_s`."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
import redis

from collector.sync import Work, run
from common.index import keys
from common.kinds.registry import builtin_registry
from common.leaf.client import ClusterConfig, LeafClient
from tests.support.fakeleaf import KS, FakeLeaf, flux_object

HOSTILE = "\x1b[31m\n\x00/../" + "x" * 20_000


def stamped(ns: str, name: str, uid: str, version: str, ready: str = "True") -> dict:
    obj = flux_object(ns, name, ready)
    obj["metadata"].update(uid=uid, resourceVersion=version)
    return obj


@pytest.fixture
def leaf() -> Iterator[FakeLeaf]:
    fake = FakeLeaf(token="digest-token").start()
    fake.add(KS, "kustomizations", stamped("ns-0", "a", HOSTILE, HOSTILE))
    fake.add(KS, "kustomizations", stamped("ns-0", "b", "u\n2", "7\n"))
    yield fake
    fake.stop()


def client(leaf: FakeLeaf, name: str) -> LeafClient:
    return LeafClient(ClusterConfig(name, "dir", "x", leaf.kubeconfig(name)), 5)


def every_value(r: redis.Redis) -> str:
    out = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        if kind == "string":
            out.append(str(r.get(key)))
        elif kind == "hash":
            out += [f"{k}={v}" for k, v in r.hgetall(key).items()]
        elif kind == "zset":
            out += list(r.zrange(key, 0, -1))
        out.append(key)
    return "\n".join(out)


def test_hostile_versions_are_hashed_never_stored_or_logged(
    r: redis.Redis, leaf: FakeLeaf, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        first = run(r, Work.OBJECTS, client(leaf, "c1"), builtin_registry())
        again = run(r, Work.OBJECTS, client(leaf, "c1"), builtin_registry())
    assert first.ok and not first.unchanged and again.unchanged
    assert re.fullmatch(r"[0-9a-f]{32}", r.hget(keys.sync("c1"), "snapshot") or "")
    stored = every_value(r)
    assert "xxxxxxxxxx" not in stored and "\x1b" not in stored and "u\n2" not in stored
    assert "xxxxxxxxxx" not in caplog.text and "\x1b" not in caplog.text


def test_another_cluster_cannot_make_a_resync_skip(r: redis.Redis, leaf: FakeLeaf) -> None:
    run(r, Work.OBJECTS, client(leaf, "c1"), builtin_registry())
    # c2 is served the same objects: its own first sync must build its rows regardless
    second = run(r, Work.OBJECTS, client(leaf, "c2"), builtin_registry())
    assert not second.unchanged and second.added == 2
    assert r.zcard(keys.rows("c2")) == 2


def test_a_changed_object_with_an_unchanged_version_is_built_after_the_bound(
    r: redis.Redis, leaf: FakeLeaf
) -> None:
    run(r, Work.OBJECTS, client(leaf, "c1"), builtin_registry())
    leaf.objects[(KS, "kustomizations")][1] = stamped("ns-0", "b", "u\n2", "7\n", ready="False")
    assert run(r, Work.OBJECTS, client(leaf, "c1"), builtin_registry()).unchanged
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 0  # trusted, within the bound
    rebuilt = run(r, Work.OBJECTS, client(leaf, "c1"), builtin_registry(), rebuild_after_s=0)
    assert not rebuilt.unchanged and r.zcard(keys.by_status("c1", "unhealthy")) == 1
