"""bench.write_cost on fleet S: both kinds of write measured, rows changed, and an in-place
update's commands per write free of the counts' reads and the totals' write."""

from __future__ import annotations

import json
from pathlib import Path

from bench import write_cost


def test_updates_and_transitions_are_measured_with_their_commands(tmp_path: Path) -> None:
    out = tmp_path / "write_cost.json"
    assert write_cost.main(["--preset", "S", "--seconds", "0.5", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    updates, transitions = result["updates"], result["transitions"]
    assert updates["rows"] > 0 and transitions["rows"] > 0
    assert updates["writes"] > 0 and transitions["writes"] == transitions["rows"]
    per_update = updates["redis_commands_per_write"]
    assert per_update["multi"] == per_update["exec"] == 1  # one transaction a write
    assert "hgetall" not in per_update and "hkeys" not in per_update  # in place: no counts read
    per_transition = transitions["redis_commands_per_write"]
    assert per_transition["hgetall"] >= 1  # a count moves: the counts read once the delta is known
