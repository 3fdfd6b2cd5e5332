"""The query benchmark's `--churn-rows` writes: a real transition through the watcher's writer,
so the rows, status indexes and time index all move as a leaf's change would move them."""

from __future__ import annotations

from bench.query import transition
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
