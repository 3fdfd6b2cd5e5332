"""`fleetscope demo --registry SOURCE`: the demo's kubesim serves a management cluster that
registers the fleet through SOURCE, and the settings the demo gives its children collect it
(`fleetscope kubesim` and `fleetscope collect --once` as subprocesses, as the demo runs them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetscope.demo import registry_setup
from tests.support.paths import REPO

ROOT = REPO


def test_the_default_is_the_kubeconfig_directory(tmp_path: Path) -> None:
    assert registry_setup("dir", tmp_path) == ([], {})


@pytest.mark.parametrize("source", ["gitopscluster", "argocd"])
def test_the_fleet_is_collected_through_a_management_cluster(
    source: str, tmp_path: Path, redis_url: str
) -> None:
    args, env_changes = registry_setup(source, tmp_path)
    kubesim = subprocess.Popen(
        [sys.executable, "-m", "fleetscope", "kubesim", "--clusters", "2", "--namespaces", "1",
         "--kubeconfig-dir", str(tmp_path / "clusters"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert kubesim.stdout is not None
        assert "kubesim ready" in kubesim.stdout.readline()
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
        env.update(FLEETSCOPE_REDIS_URL=redis_url, **env_changes)
        collect = subprocess.run(
            [sys.executable, "-m", "fleetscope", "collect", "--once"],
            env=env, capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
        assert collect.returncode == 0, collect.stdout + collect.stderr
        assert "2 clusters, 0 failed" in collect.stdout
        assert {"cluster-000", "cluster-001"} <= set(collect.stdout.split())
    finally:
        kubesim.terminate()
        kubesim.wait(timeout=30)
        if kubesim.stdout is not None:
            kubesim.stdout.close()
