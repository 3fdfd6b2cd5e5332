"""bench.watcher_memory at fleet S: two replicas with different environments share the fleet,
the churn runs, and each one's build CPU and RSS floors are reported."""

from __future__ import annotations

import json
from pathlib import Path

from bench import watcher_memory


def test_two_arms_share_the_fleet_and_are_sampled_under_churn(tmp_path: Path) -> None:
    out = tmp_path / "wm.json"
    argv = ["--preset", "S", "--duration-s", "3", "--window-s", "1", "--every-s", "0.2"]
    argv += ["--arm", '{"MALLOC_ARENA_MAX": "16"}', "--arm", "{}", "--out", str(out)]
    assert watcher_memory.main(argv) == 0
    result = json.loads(out.read_text())
    first, second = result["replicas"]
    assert first["env"] == {"MALLOC_ARENA_MAX": "16"} and second["env"] == {}
    assert (
        first["clusters"] + second["clusters"] == 10
        and min(first["clusters"], second["clusters"]) > 0
    )
    assert result["churn"].get("transitions", 0) + result["churn"].get("unchanged updates", 0) > 0
    for rep in (first, second):
        assert rep["build_cpu_s"] > 0 and rep["rss_after_build_mib"] > 0
        assert len(rep["floors_mib"]) >= 2 and all(f > 0 for f in rep["floors_mib"])


def test_a_floor_is_the_lowest_sample_of_each_whole_window() -> None:
    samples = [[0, 2048], [30, 1024], [61, 4096], [90, 3072], [125, 9999]]
    assert watcher_memory.floors(samples, 1, 60) == [1.0, 3.0]
    assert watcher_memory.floors([], 1, 60) == []
