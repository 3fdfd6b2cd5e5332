"""common.promdir: metric objects created one at a time (one that failed is tried again, the
others are not created twice), and a multiprocess directory removed under a running process
made again, so a sync is never failed by its metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from common import promdir

REPO = Path(__file__).resolve().parents[2]


def test_a_failed_metric_is_made_again_and_the_others_are_not() -> None:
    reg = CollectorRegistry()
    calls = {"a": 0, "b": 0}

    def a() -> Counter:
        calls["a"] += 1
        return Counter("probe_a", "a", registry=reg)

    def b() -> Counter:
        calls["b"] += 1
        if calls["b"] == 1:
            raise FileNotFoundError("its file could not be opened")
        return Counter("probe_b", "b", registry=reg)

    lazy = promdir.Lazy(lambda: {"a": a, "b": b})
    with pytest.raises(FileNotFoundError):
        lazy.get()
    made = lazy.get()  # before: DuplicateTimeseries for `a`, at this and every later use
    assert set(made) == {"a", "b"} and calls == {"a": 1, "b": 2}
    assert lazy.get() is made and calls == {"a": 1, "b": 2}


def test_private_dirs_are_per_role_and_pid(tmp_path: Path) -> None:
    a = promdir.private_dir(str(tmp_path), "query", 7)
    b = promdir.private_dir(str(tmp_path), "collector", 7)
    assert a != b and Path(a).parent == tmp_path
    (Path(promdir.reset(a)) / "stale.db").write_bytes(b"x")
    assert not any(Path(promdir.reset(a)).iterdir())


SYNC = """
import shutil, sys
from collector import metrics
from collector.sync import SyncResult
from collector.sync import Work
shutil.rmtree(sys.argv[1])  # the directory goes under the running process
metrics.record_sync(SyncResult("c1", Work.OBJECTS, requests=3))
metrics.record_sync(SyncResult("c1", Work.RBAC, error="boom"))
print("recorded")
"""


def test_a_removed_directory_is_made_again_and_the_syncs_recorded(tmp_path: Path) -> None:
    d = tmp_path / "fleetscope-collector-1"
    d.mkdir()
    env = {**os.environ, promdir.ENV: str(d), "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", SYNC, str(d)], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "recorded" in out.stdout and "not recorded" not in out.stderr
    assert {p.name.split("_")[0] for p in d.glob("*.db")} >= {"counter", "histogram"}


def test_a_sync_is_not_failed_by_its_metrics(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    env = {**os.environ, promdir.ENV: str(blocked / "metrics"), "PYTHONPATH": str(REPO)}
    script = SYNC.replace("shutil.rmtree(sys.argv[1])", "pass")
    out = subprocess.run(
        [sys.executable, "-c", script, "x"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "recorded" in out.stdout and "sync metrics not recorded" in out.stderr
