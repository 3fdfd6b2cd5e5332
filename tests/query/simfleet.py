"""A kubesim fleet collected by the real collector, for query tests end to end: the simulator,
the settings that point the collector and the query service at it, and one collection."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collector import cli as collector_cli
from common.settings import Settings
from kubesim.server import KubeSim


def running(fleet: Any, tmp_path: Path) -> Iterator[KubeSim]:
    """kubesim serving `fleet`, its kubeconfigs in `tmp_path/clusters` (a fixture's body)."""
    s = KubeSim.start(fleet, kubeconfig_dir=tmp_path / "clusters")
    yield s
    s.stop()


def settings_for(tmp_path: Path, redis_url: str) -> Settings:
    """Collector and query settings for the fleet `running` serves: header auth from loopback."""
    return Settings(
        redis_url=redis_url,
        clusters_dir=str(tmp_path / "clusters"),
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        leaf_timeout_s=1.0,
    )


def collect(settings: Settings, cluster: str | None = None) -> None:
    """One collection of every cluster (or one), as `fleetscope collect --once` runs it."""
    args = argparse.Namespace(once=True, cluster=[cluster] if cluster else None, parallel=2)
    assert collector_cli.run(args, settings) == 0
