"""The query service's leaf clients (query.leaves.LeafPool): a client per cluster, rebuilt when
the cluster's kubeconfig changes (a rotated token must reach detail reads), kept otherwise, and
closed once no detail read used it for a whole memo sweep round."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

from common.errors import ClusterUnreachable
from common.index.read import memo
from common.settings import Settings
from query import leaves
from query.leaves import LeafPool


def kubeconfig(token: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def test_a_rotated_token_builds_a_new_client_and_an_unchanged_one_does_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(kubeconfig("old-token")))
    pool = LeafPool(Settings(clusters_dir=str(tmp_path)))
    first = pool.client("prod", version=1)
    assert pool.client("prod", version=2) is first  # reloaded, same kubeconfig: same client
    path.write_text(yaml.safe_dump(kubeconfig("new-token")))
    rotated = pool.client("prod", version=3)
    assert rotated is not first
    assert rotated.headers()["Authorization"] == "Bearer new-token"


def test_a_client_no_detail_read_used_for_a_whole_sweep_round_is_closed_and_dropped(
    tmp_path: Path,
) -> None:
    for name in ("busy", "idle"):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(kubeconfig("t")))
    pool = LeafPool(Settings(clusters_dir=str(tmp_path)))
    busy, idle = pool.client("busy", version=1), pool.client("idle", version=1)
    with pytest.raises(ClusterUnreachable):  # nothing listens on port 1: a connection pool made
        idle._get_json("/api")
    assert len(idle._pool.pools) == 1
    memo.sweep_idle()  # a new round: both were used in the last one
    assert len(pool) == 2
    assert pool.client("busy", version=1) is busy  # used in this round
    held = REGISTRY.get_sample_value("fleetscope_query_leaf_clients")
    memo.sweep_idle()  # "idle" was last used two rounds ago
    assert len(pool) == 1 and pool.dropped == 1
    # the process's pools in all (other tests' apps may hold some; a sweep only drops)
    now = REGISTRY.get_sample_value("fleetscope_query_leaf_clients")
    assert now == leaves.clients_held() and held is not None and now <= held - 1
    assert len(idle._pool.pools) == 0  # its connections closed, not left to the collector
    assert pool.client("busy", version=1) is busy
    again = pool.client("idle", version=1)
    assert again is not idle and len(pool) == 2  # asked again: a new client


def test_a_pool_that_is_gone_is_not_swept(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(kubeconfig("t")))
    pool = LeafPool(Settings(clusters_dir=str(tmp_path)))
    pool.client("c", version=1)
    gone = weakref.ref(pool)
    del pool
    gc.collect()
    assert gone() is None  # the sweeps hold it weakly
    memo.sweep_idle()
