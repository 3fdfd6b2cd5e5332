"""The watcher's metrics: leases held, events, relists and 410s, the event-to-Redis lag (no
per-cluster label anywhere), and `fleetscope watch` serving them on FLEETSCOPE_WATCH_METRICS_PORT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from prometheus_client import REGISTRY

from common.index import rows
from common.redis_server import free_port
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support.index_fleet import row_of
from tests.support.waiting import wait_for
from tests.watch.harness import Running


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


# A socket the replica's stop leaves to the garbage collector now and then (an unclosed-transport
# warning at teardown, ~1 run in 3 under load; open, see the closing note of 2026-11-27): not
# what this test checks.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_counters_follow_events_relists_and_410s(
    sim: KubeSim, rb: redis.Redis, wsettings: Settings, start_replica: Callable[..., Running]
) -> None:
    before = {
        n: sample(n)
        for n in (
            "fleetscope_watch_events_total",
            "fleetscope_watch_relists_total",
            "fleetscope_watch_expired_total",
            "fleetscope_watch_event_lag_seconds_count",
        )
    }
    run = start_replica("a", wsettings.replace(watch_timeout_s=1.0))
    for c in sim.clusters:
        wait_for(lambda c=c: run.healthy(c), what=f"{c} watched")
    wait_for(lambda: sample("fleetscope_watch_leases") == len(sim.clusters), what="leases gauge")
    wait_for(lambda: sample("fleetscope_watch_built") == len(sim.clusters), what="built gauge")
    assert sample("fleetscope_watch_relists_total") == before["fleetscope_watch_relists_total"]

    c = sim.clusters[0]
    sim.set_ready(c, "Kustomization", "app-0001", "apps", False, reason="BuildFailed", message="x")
    wait_for(
        lambda: (
            rows.status_of(row_of(rb, c, "app-0001", "Kustomization", "apps") or "") == "unhealthy"
        )
    )
    wait_for(
        lambda: (
            sample("fleetscope_watch_event_lag_seconds_count")
            > before["fleetscope_watch_event_lag_seconds_count"]
        ),
        what="the change's lag observed",
    )
    assert sample("fleetscope_watch_events_total") > before["fleetscope_watch_events_total"]
    lag_sum = sample("fleetscope_watch_event_lag_seconds_sum")
    assert 0 < lag_sum < 60  # seconds from arrival to commit, not a timestamp

    # History compacted while the watch was stalled: the re-watch gets 410, then a relist.
    sim.set_fault(c, stall_watch=True)
    sim.set_ready(c, "Kustomization", "app-0002", "apps", False, reason="Stalled", message="y")
    sim.compact(c)
    sim.set_fault(c)
    wait_for(
        lambda: sample("fleetscope_watch_expired_total") > before["fleetscope_watch_expired_total"],
        what="a 410 counted",
    )
    wait_for(
        lambda: sample("fleetscope_watch_relists_total") > before["fleetscope_watch_relists_total"],
        what="a relist counted",
    )
    labelled = [
        s.labels
        for m in REGISTRY.collect()
        if m.name.startswith("fleetscope_watch")
        for s in m.samples
        if set(s.labels) - {"le"}
    ]
    assert labelled == []  # no per-cluster (or any other) label
    run.stop()
    assert sample("fleetscope_watch_leases") == sample("fleetscope_watch_built") == 0


def test_fleetscope_watch_serves_metrics(tmp_path: Path, redis_url: str) -> None:
    (tmp_path / "clusters").mkdir()
    port = free_port()
    env = dict(
        os.environ,
        FLEETSCOPE_REDIS_URL=redis_url,
        FLEETSCOPE_CLUSTERS_DIR=str(tmp_path / "clusters"),
        FLEETSCOPE_WATCH_METRICS_PORT=str(port),
    )
    cmd = [sys.executable, "-m", "fleetscope", "watch"]
    with open(tmp_path / "watch.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        got: list[str] = []

        def scraped() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    got.append(r.read().decode())
                return True
            except OSError:
                return False

        wait_for(scraped, 30, "/metrics")
        text = got[-1]
        for name in (
            "fleetscope_watch_leases 0.0",
            "fleetscope_watch_events_total",
            "fleetscope_watch_relists_total",
            "fleetscope_watch_expired_total",
            "fleetscope_watch_event_lag_seconds_bucket",
            "fleetscope_build_info",
        ):
            assert name in text, name
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_build_info_is_registered_before_the_first_scrape_can_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a scrape as soon as the port listened found every series but fleetscope_build_info
    from collector.watch import metrics

    seen: list[bool] = []

    def listening(port: int, addr: str) -> None:
        seen.append(REGISTRY.get_sample_value("fleetscope_build_info", _build_labels()) == 1.0)

    monkeypatch.setattr(metrics, "_served", False)
    monkeypatch.setattr(metrics, "start_http_server", listening)
    registered = set(REGISTRY._collector_to_names)
    try:
        assert metrics.serve(Settings(watch_metrics_port=free_port())) is True
        assert seen == [True]
    finally:
        for c in set(REGISTRY._collector_to_names) - registered:
            REGISTRY.unregister(c)

    def taken(port: int, addr: str) -> None:
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(metrics, "_served", False)
    monkeypatch.setattr(metrics, "start_http_server", taken)
    assert metrics.serve(Settings(watch_metrics_port=free_port())) is False
    assert REGISTRY.get_sample_value("fleetscope_build_info", _build_labels()) is None


def _build_labels() -> dict[str, str]:
    import platform

    from common import buildinfo

    return {
        "version": buildinfo.version(),
        "python": platform.python_version(),
        "row_builder": buildinfo.row_builder(),
    }
