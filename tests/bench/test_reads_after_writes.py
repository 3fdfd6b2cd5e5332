"""bench.reads_after_writes on a small stored fleet: its rows are what it says they are, and the
first facets after a new access map (a cluster out of the caller's scope, or back) read no
cluster's every-namespace counts again (the whole-fleet read it was: issue #38)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bench import reads_after_writes
from common.index import keys
from common.index.read import memo
from tests.common.index.read import fleets
from tests.common.index.read.fleets import CLUSTERS


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    for r in fleets.stored(redis_url):
        r.hset(keys.CLUSTERS, mapping={c: "{}" for c in CLUSTERS})  # what the bench lists
        yield r


@pytest.fixture
def tiny_memo_budget() -> Iterator[None]:
    """Memos that keep about one entry each: at fleet L the budget holds a few of 200 clusters'
    every-namespace counts, so what a new access map cannot take over is read again."""
    before = memo.budget_bytes()
    memo.set_budget(1 / 1024)
    yield
    memo.set_budget(before / 2**20)


@pytest.mark.usefixtures("tiny_memo_budget")
def test_facets_after_a_new_access_map_read_what_a_transition_reads(fleet: redis.Redis) -> None:
    got = {
        what: (cpu, cmds)
        for name, what, cpu, cmds, _mib in reads_after_writes.measure(fleet, 4, ["facets"])
        if name == "facets"
    }
    first = got.pop("first in the process")[1]
    assert set(got) == {
        "still",
        "after a message-only update",
        "after a transition",
        "after a transition and a new access map",
    }
    assert got["still"][1] <= 2  # the generations (and nothing else) on a still fleet
    after = got["after a transition"][1]
    regranted = got["after a transition and a new access map"][1]
    # a new map costs the tables of its clusters (the tiny budget keeps none), not every
    # cluster's every-namespace counts read again (what the first answer reads)
    assert after < first and 4 * regranted < first


def test_the_access_map_alternates_one_cluster_out_and_back() -> None:
    import random

    caller: dict = {"access": {c: object() for c in CLUSTERS}}
    whole = dict(caller["access"])
    rnd = random.Random(1)
    reads_after_writes.regranted(caller, CLUSTERS, rnd)
    assert len(caller["access"]) == len(CLUSTERS) - 1
    assert all(caller["access"][c] is whole[c] for c in caller["access"])
    reads_after_writes.regranted(caller, CLUSTERS, rnd)
    assert caller["access"] == whole and caller["access"] is not whole
