"""End to end through a real Celery worker (prefork) and beat, started as subprocesses against
the test Redis with 1-second intervals: clusters in the kubeconfig directory get collected,
a cluster added later is picked up without a restart, a removed one loses its data, and the
worker's /metrics merges what its children recorded (no per-cluster series: those are the query
service's)."""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from common.index import keys, syncstatus
from tests.support.celery_procs import TOKEN, start, start_worker, stop
from tests.support.fakeleaf import KS, FakeLeaf, flux_object
from tests.support.waiting import wait_for


@pytest.fixture
def leaf() -> Iterator[FakeLeaf]:
    fake = FakeLeaf(token=TOKEN).start()
    for i in range(4):
        fake.add(KS, "kustomizations", flux_object(f"ns-{i}", "app"))
    for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"):
        fake.objects[("rbac.authorization.k8s.io/v1", plural)] = []
    yield fake
    fake.stop()


def test_worker_and_beat_collect_the_fleet(
    leaf: FakeLeaf, r: redis.Redis, redis_url: str, broker_url: str, tmp_path: Path
) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for name in ("alpha", "beta"):
        (clusters / f"{name}.yaml").write_text(yaml.safe_dump(leaf.kubeconfig(name)))
    env = {
        **os.environ,
        "FLEETSCOPE_REDIS_URL": redis_url,
        "FLEETSCOPE_BROKER_URL": broker_url,
        "FLEETSCOPE_CLUSTERS_DIR": str(clusters),
        "FLEETSCOPE_SYNC_INTERVAL_S": "1",
        "FLEETSCOPE_RBAC_SYNC_INTERVAL_S": "1",
        "FLEETSCOPE_REGISTRY_INTERVAL_S": "1",
        "FLEETSCOPE_METRICS_DIR": str(tmp_path),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    worker, port = start_worker(env, tmp_path / "worker.log")
    beat = start(
        ["beat", "--schedule", str(tmp_path / "beat-schedule"), "--max-interval", "1"],
        env,
        tmp_path / "beat.log",
    )
    try:

        def synced(name: str) -> bool:
            s = syncstatus.read_all(r, [name])[name]
            return s.state == "ok" and s.rbac_synced_at is not None

        wait_for(lambda: synced("alpha") and synced("beta"), what="first collection")
        assert r.zcard(keys.rows("alpha")) == r.zcard(keys.rows("beta")) == 4

        (clusters / "gamma.yaml").write_text(yaml.safe_dump(leaf.kubeconfig("gamma")))
        (clusters / "beta.yaml").unlink()
        wait_for(lambda: synced("gamma"), what="the added cluster")
        wait_for(lambda: not r.exists(*keys.cluster_keys("beta")), what="the removed cluster")
        assert syncstatus.registered_clusters(r) == ["alpha", "gamma"]

        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        text = metrics.decode()
        count = re.search(
            r'fleetscope_collector_sync_duration_seconds_count\{what="objects"\} (\S+)', text
        )
        assert count and float(count.group(1)) >= 3  # alpha, beta, gamma: at least once each
        assert 'fleetscope_build_info{python="' in text
        assert "cluster=" not in text
    finally:
        stop(beat)
        stop(worker)
    logs = (tmp_path / "worker.log").read_text() + (tmp_path / "beat.log").read_text()
    assert TOKEN not in logs
