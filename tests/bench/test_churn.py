"""The query benchmark's writes (bench.churn): a real transition through the watcher's writer,
so the rows, status indexes and time index all move as a leaf's change would move them; and a
status-unchanged update (a new message), which moves the generation but not the status one."""

from __future__ import annotations

import random

from bench.churn import transition, unchanged_updates
from common.index import keys, rows, timeline
from common.index.write import store
from common.redis_client import text
from tests.support import topology
from tests.support.rowfactory import member


def test_a_churn_write_flips_a_row_and_moves_it_to_now(redis_url: str) -> None:
    r = topology.client(redis_url)
    old = member("c1", "apps", "Kustomization", "web")
    store.replace_rows(r, "c1", [old])
    gen = store.generation(r, "c1")
    transition(r, "c1")
    [new] = [text(m) for m in r.zrange(keys.rows("c1"), 0, -1)]
    assert rows.status_of(new) == "unhealthy" and rows.identity(new) == rows.identity(old)
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 1
    assert store.generation(r, "c1") == gen + 1
    suffix, entry = timeline.where(new)
    assert suffix != timeline.where(old)[0]  # from the untimed windows to now's
    assert r.zscore(keys.timeline_window("c1", suffix), entry) is not None
    transition(r, "c1")  # and back
    [again] = [text(m) for m in r.zrange(keys.rows("c1"), 0, -1)]
    assert rows.status_of(again) == "healthy"
    assert r.zcard(keys.by_status("c1", "unhealthy")) == 0


def test_a_churn_update_rewords_rows_and_leaves_the_status_generation(redis_url: str) -> None:
    r = topology.client(redis_url)
    old = [member("c1", "apps", "Kustomization", f"web-{i}") for i in range(3)]
    store.replace_rows(r, "c1", old)
    gens = [keys.generation("c1"), keys.status_generation("c1")]
    g0, s0 = (int(g or 0) for g in r.mget(gens))
    assert unchanged_updates(r, ["c1"], 2, random.Random(1)) == 2
    stored = [text(m) for m in r.zrange(keys.rows("c1"), 0, -1)]
    assert sum(rows.decode("c1", m)["message"].startswith("Reconciliation") for m in stored) == 2
    assert [rows.status_part(m) for m in stored] == [rows.status_part(m) for m in old]
    assert [int(g or 0) for g in r.mget(gens)] == [g0 + 1, s0]  # one write, statuses unmoved
