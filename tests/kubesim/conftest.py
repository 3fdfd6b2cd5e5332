"""kubesim fixtures; copy `kubesim` into your own conftest.py to test against simulated clusters.

def test_x(kubesim):
    kubesim.kubeconfig_path("cluster-000")   # a kubeconfig for FLEETSCOPE_CLUSTERS_DIR
    kubesim.set_fault("cluster-001", down=True)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim


@pytest.fixture
def kubesim(tmp_path: Path) -> Iterator[KubeSim]:
    """Two clusters x five app namespaces (seed 1); kubeconfigs in tmp_path/clusters."""
    sim = KubeSim.start(
        generate_fleet(clusters=2, namespaces=5, seed=1),
        kubeconfig_dir=tmp_path / "clusters",
        bookmark_interval_s=0.2,
    )
    yield sim
    sim.stop()


@pytest.fixture
def http(kubesim: KubeSim, tmp_path: Path) -> Iterator[requests.Session]:
    """A session to kubesim's API as the collector identity, trusting its CA."""
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would override the session's verify
    s.verify = str(kubesim.ca_file(tmp_path))
    s.headers["Authorization"] = f"Bearer {kubesim.collector_token}"
    yield s
    s.close()
