"""bench.sync_memory on a tiny fleet: kubesim started, every cluster listed and built each
round, the swing and the arenas reported."""

from __future__ import annotations

import json
from pathlib import Path

from bench import sync_memory


def test_each_round_lists_and_builds_every_cluster(tmp_path: Path) -> None:
    out = tmp_path / "sync_memory.json"
    argv = ["--clusters", "2", "--namespaces", "5", "--rounds", "2", "--out", str(out)]
    assert sync_memory.main(argv) == 0
    result = json.loads(out.read_text())
    assert [r["round"] for r in result["rounds"]] == [1, 2]
    first, second = result["rounds"]
    assert first["objects"] == second["objects"] > 20  # both clusters, whole, each round
    assert result["swing_blocks"] > 0 and result["peak_blocks"] > result["blocks_before"]
    assert all(r["arenas"] > 0 for r in result["rounds"]) and result["cpu_s"] > 0
