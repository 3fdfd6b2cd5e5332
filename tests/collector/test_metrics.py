"""Worker metrics: syncs are recorded by `what` only (no per-cluster series), and a metrics port
already in use is logged in plain words without stopping the worker."""

from __future__ import annotations

import logging
import socket

import pytest
from prometheus_client import REGISTRY

from collector import metrics
from collector.sync import SyncResult
from common.settings import Settings


def test_syncs_are_recorded_without_a_cluster_label() -> None:
    for cluster in ("alpha", "beta"):
        metrics.record_sync(SyncResult(cluster, "objects", error="HTTP 500", duration_s=0.2))
    families = {f.name: f for f in REGISTRY.collect() if f.name.startswith("fleetscope_collector")}
    assert set(families) >= {
        "fleetscope_collector_sync_duration_seconds",
        "fleetscope_collector_sync_errors",
        "fleetscope_collector_leaf_requests",
    }
    for family in families.values():
        assert all(set(s.labels) <= {"what", "le"} for s in family.samples), family.name


def test_a_taken_metrics_port_is_logged_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.ERROR, logger="collector.metrics"):
            metrics.serve(Settings(worker_metrics_port=port))
    assert f"worker metrics cannot listen on port {port}" in caplog.text
