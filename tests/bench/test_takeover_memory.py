"""bench.takeover_memory at fleet S, one round: the in-process replica takes the killed one's
clusters over and hands them back, and each phase's memory is read (RSS by mapping kind,
pymalloc's arenas) with the objects the take-over left alive."""

from __future__ import annotations

import json
from pathlib import Path

from bench import takeover_memory


def test_one_take_over_and_hand_back_is_measured(tmp_path: Path) -> None:
    out = tmp_path / "takeover.json"
    argv = ["--preset", "S", "--rounds", "1", "--settle-s", "1", "--timeout-s", "240"]
    assert takeover_memory.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["clusters"] == 10
    [round_] = result["rounds"]
    before, holding, after = round_["before"], round_["holding_all"], round_["after"]
    # holding every cluster is more Python objects than holding half, and they go again
    assert holding["gc_objects"] > before["gc_objects"] > 0
    assert after["gc_objects"] < holding["gc_objects"]
    for phase in (before, holding, after):
        assert phase["arenas"] > 0 and phase["smaps_mib"]["anon"] > 0
        assert phase["rss_mib"] >= phase["smaps_mib"]["anon"]
    assert round_["take_over_s"] >= 0 and round_["hand_back_s"] >= 0
    assert all(isinstance(n, str) and k > 0 for n, k in round_["kept_objects_by_type"])


class _Holder:
    def __init__(self, kept: object) -> None:
        self.kept = kept


def test_holders_name_the_chain_that_keeps_an_object_alive() -> None:
    """`--why TYPE`: each object's first referrer, its first referrer and so on, by type (the
    lists the benchmark made left out)."""

    class Kept:
        pass

    objs = [Kept() for _ in range(3)]
    roots = [_Holder(o) for o in objs]  # each Kept <- its _Holder (or its attributes' dict)
    listed = [*objs, *roots]
    [(chain, n)] = takeover_memory.holders(objs, listed, depth=3).items()
    assert n == 3
    assert chain.startswith("Kept <- ") and "_Holder" in chain, chain
    del roots
