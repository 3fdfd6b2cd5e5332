"""kubesim in tests: the one way a test starts simulated leaf clusters, and a fleet collected by
the real collector for the tests that go end to end (the settings that point the collector and
the query service at it, and one collection as `fleetscope collect --once` runs it)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collector import cli as collector_cli
from common.settings import Settings
from kubesim.server import KubeSim


def start(fleet: Any, tmp_path: Path | None = None, **kw: Any) -> KubeSim:
    """kubesim serving `fleet` (a generated fleet, a ManagementFleet, ...), its kubeconfigs in
    `tmp_path/clusters` when `tmp_path` is given; `kw` as KubeSim.start takes them
    (`bookmark_interval_s`, `tls`, ...). Stop it, or use it as a context manager."""
    kubeconfig_dir = tmp_path / "clusters" if tmp_path is not None else None
    return KubeSim.start(fleet, kubeconfig_dir=kubeconfig_dir, **kw)


def running(fleet: Any, tmp_path: Path, **kw: Any) -> Iterator[KubeSim]:
    """A fixture's body: kubesim serving `fleet` (as `start`), stopped at teardown."""
    with start(fleet, tmp_path, **kw) as sim:
        yield sim


def settings_for(tmp_path: Path, redis_url: str, leaf_timeout_s: float = 1.0) -> Settings:
    """Collector and query settings for the fleet `start` serves from `tmp_path`: header auth
    from loopback."""
    return Settings(
        redis_url=redis_url,
        clusters_dir=str(tmp_path / "clusters"),
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        leaf_timeout_s=leaf_timeout_s,
    )


def collect(settings: Settings, cluster: str | None = None) -> None:
    """One collection of every cluster (or one), as `fleetscope collect --once` runs it."""
    args = argparse.Namespace(once=True, cluster=[cluster] if cluster else None, parallel=2)
    assert collector_cli.run(args, settings) == 0
