"""bench.sync_profile on a tiny fleet: kubesim and a redis-server started, the measured clusters
synced under the profiler, each stage and the Redis commands per object reported."""

from __future__ import annotations

import json
from pathlib import Path

from bench import sync_profile


def test_the_measured_clusters_are_synced_and_split_by_stage(tmp_path: Path) -> None:
    out = tmp_path / "sync_profile.json"
    assert sync_profile.main(["--clusters", "3", "--namespaces", "5", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["clusters_measured"] == 2 and result["objects"] > 20
    shares = result["stage_share_pct"]
    assert set(shares) == set(sync_profile.STAGES)
    # every stage ran, and what nests is within what holds it
    assert all(v > 0 for v in shares.values()), shares
    assert shares["labels"] < shares["rows (all of the row building)"]
    assert shares["redis-py packing commands"] < shares["writer (graph, diff, tables, Redis)"]
    cmds = result["redis_commands_per_object"]
    assert cmds["multi"] > 0 and cmds["exec"] > 0  # the writer's transaction, per cluster
