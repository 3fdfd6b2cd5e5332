"""collector.sync, jobs and the `collect --once` CLI against the small local API server (real
HTTP, real Redis): rows and status stored, RBAC compiled, failures recorded with the last good
rows kept, the lock respected, and the summary table with its exit status."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from collector import cli
from collector.clusters import ClusterSource
from collector.jobs import Collector, collect_once
from collector.lock import ClusterLock
from collector.sync import Work, run
from common.errors import ClusterUnreachable, LockBusy
from common.index import keys, syncstatus
from common.kinds.registry import builtin_registry
from common.leaf.client import ClusterConfig, LeafClient
from common.settings import Settings
from tests.support.fakeleaf import KS, FakeLeaf, flux_object

TOKEN = "sync-SECRET-token-31337"
RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture
def leaf() -> Iterator[FakeLeaf]:
    fake = FakeLeaf(token=TOKEN).start()
    for i in range(5):
        fake.add(KS, "kustomizations", flux_object(f"ns-{i}", "app", "False" if i == 0 else "True"))
    fake.add(
        RBAC,
        "rolebindings",
        {
            "metadata": {"namespace": "ns-1", "name": "team"},
            "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": RBAC},
            "subjects": [{"kind": "Group", "name": "team-1", "apiGroup": RBAC}],
        },
    )
    fake.add(
        RBAC,
        "clusterroles",
        {
            "metadata": {"name": "view"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}],
        },
    )
    fake.objects[(RBAC, "roles")] = []
    fake.objects[(RBAC, "clusterrolebindings")] = []
    yield fake
    fake.stop()


def leaf_client(leaf: FakeLeaf, name: str = "c1") -> LeafClient:
    return LeafClient(ClusterConfig(name, "dir", "x", leaf.kubeconfig(name)), 5, page_size=2)


def test_sync_stores_rows_and_status(r: redis.Redis, leaf: FakeLeaf) -> None:
    result = run(r, Work.OBJECTS, leaf_client(leaf), builtin_registry())
    assert (result.objects, result.added, result.kinds) == (5, 5, {"Kustomization": 5})
    # /apis + the one served registered group-version + 3 pages of 2
    assert result.requests == 1 + 1 + 3
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 1
    s = syncstatus.read_all(r, ["c1"])["c1"]
    assert (s.state, s.objects, s.requests, s.last_error) == ("ok", 5, 5, "")
    assert s.last_success is not None


def test_failed_sync_keeps_last_good_rows(r: redis.Redis, leaf: FakeLeaf) -> None:
    client = leaf_client(leaf)
    run(r, Work.OBJECTS, client, builtin_registry())
    leaf.fail_status = 503
    with pytest.raises(ClusterUnreachable):
        run(r, Work.OBJECTS, client, builtin_registry())
    s = syncstatus.read_all(r, ["c1"])["c1"]
    assert s.state == "error" and "HTTP 503" in s.last_error
    assert s.stale(stale_after_s=1e9)
    assert r.zcard(keys.rows("c1")) == 5


def test_locked_cluster_is_not_synced_twice(r: redis.Redis, leaf: FakeLeaf) -> None:
    with ClusterLock(r, "c1", ttl_s=5), pytest.raises(LockBusy):
        ClusterLock(r, "c1", ttl_s=5).acquire()
    assert r.exists(keys.lock("c1")) == 0  # released by compare-and-delete


def write_dir(tmp_path: Path, leaf: FakeLeaf, names: list[str]) -> str:
    for name in names:
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(leaf.kubeconfig(name)))
    return str(tmp_path)


def test_collect_once_cli(r: redis.Redis, leaf: FakeLeaf, tmp_path: Path, redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, clusters_dir=write_dir(tmp_path, leaf, ["a", "b"]))
    args = argparse.Namespace(once=True, cluster=None, parallel=2)
    assert cli.run(args, settings) == 0
    assert r.zcard(keys.rows("a")) == r.zcard(keys.rows("b")) == 5
    assert r.hexists(keys.rbac("a"), "g:team-1")
    assert syncstatus.read_all(r, ["a"])["a"].rbac_synced_at is not None

    leaf.fail_status = 500
    args = argparse.Namespace(once=True, cluster=["a", "nope"], parallel=1)
    assert cli.run(args, settings) == 1
    assert r.zcard(keys.rows("a")) == 5  # kept, marked stale


def test_summary_table(r: redis.Redis, leaf: FakeLeaf, tmp_path: Path, redis_url: str) -> None:
    settings = Settings(redis_url=redis_url, clusters_dir=write_dir(tmp_path, leaf, ["a"]))
    c = Collector(settings, r, builtin_registry(), ClusterSource(settings))
    out = io.StringIO()
    cli.print_summary(collect_once(c), out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == [
        "CLUSTER",
        "STATE",
        "OBJECTS",
        "CHANGED",
        "REQUESTS",
        "SECONDS",
        "RBAC",
        "ERROR",
    ]
    assert lines[1].split()[:4] == ["a", "ok", "5", "+5/-0"]
    assert lines[-1] == "1 clusters, 0 failed, 5 objects"
    assert TOKEN not in out.getvalue()
