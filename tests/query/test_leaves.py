"""The query service's leaf clients (query.leaves.LeafPool): a client per cluster, rebuilt when
the cluster's kubeconfig changes (a rotated token must reach detail reads), kept otherwise."""

from __future__ import annotations

from pathlib import Path

import yaml

from common.settings import Settings
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
