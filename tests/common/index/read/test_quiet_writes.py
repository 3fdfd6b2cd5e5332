"""Count guards for reads under writes (issue #38): a write that changes only rows' messages
(most watch events) leaves the cluster's status generation alone, so the next groups page,
group facets and facets answer from what they remember (one `MGET`, nothing of any cluster
read), while list pages still show the new message; a status transition makes each of them read
the written cluster only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.index import keys, rows
from common.index.read.group_facets import GroupFacets
from common.index.read.groups import GroupReader
from common.index.read.reader import Filters, PageRequest, Reader
from common.index.write import store, store_events
from common.redis_client import text
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, NAMESPACED, TEAM
from tests.support import topology
from tests.support.index_fleet import KINDS

WRITTEN = CLUSTERS[3]


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url)


def stored(r: redis.Redis, cluster: str) -> list[str]:
    return [text(m) for m in r.zrange(keys.rows(cluster), 0, -1)]


def reworded(r: redis.Redis, cluster: str, message: str, n: int = 5) -> list[str]:
    """`n` rows of `cluster` get a new message through the watcher's writer; their identities."""
    changes = []
    for m in stored(r, cluster)[:n]:
        row = rows.decode(cluster, m)
        row["message"] = message
        changes.append(store_events.Change.of(rows.encode(row, rows.edges_of(m))))
    assert store_events.apply_changes(r, cluster, changes).updated == len(changes) > 0
    return [c.identity for c in changes]


def flipped(r: redis.Redis, cluster: str, i: int = 0) -> None:
    """One row of `cluster` (its `i`th) changes status through the watcher's writer."""
    m = stored(r, cluster)[i]
    row = rows.decode(cluster, m)
    row["status"] = "healthy" if row["status"] == "unhealthy" else "unhealthy"
    store_events.apply_changes(
        r, cluster, [store_events.Change.of(rows.encode(row, rows.edges_of(m)))]
    )


def gens(r: redis.Redis, cluster: str) -> tuple[int, int]:
    got = r.mget(keys.generation(cluster), keys.status_generation(cluster))
    return int(got[0] or 0), int(got[1] or 0)


def commands(r: redis.Redis) -> int:
    stats = topology.commandstats(r)
    stats.pop("config|resetstat", None)
    return sum(stats.values())


def test_the_status_generation_moves_only_with_what_groups_and_counts_read(
    fleet: redis.Redis,
) -> None:
    g0, s0 = gens(fleet, WRITTEN)
    reworded(fleet, WRITTEN, "Reconciliation finished in 1.2s")
    assert gens(fleet, WRITTEN) == (g0 + 1, s0)
    flipped(fleet, WRITTEN)
    assert gens(fleet, WRITTEN) == (g0 + 2, s0 + 1)
    m = stored(fleet, WRITTEN)[1]
    row = rows.decode(WRITTEN, m)
    row["labels"] = {**(row.get("labels") or {}), "tier": "gold"}  # a selector may now match
    store_events.apply_changes(
        fleet, WRITTEN, [store_events.Change.of(rows.encode(row, rows.edges_of(m)))]
    )
    assert gens(fleet, WRITTEN) == (g0 + 3, s0 + 2)
    store.delete_cluster(fleet, WRITTEN)
    assert gens(fleet, WRITTEN) == (g0 + 4, s0 + 3)  # both stay, moved


@pytest.mark.parametrize("by", ["object", "namespace"])
@pytest.mark.parametrize("who", ["admin", "team"])
def test_a_reworded_row_costs_the_next_groups_page_one_mget(
    fleet: redis.Redis, by: str, who: str
) -> None:
    access = ADMIN if who == "admin" else TEAM
    groups = GroupReader(Reader(fleet, KINDS))
    before = groups.page(access, Filters(), by, 50)
    reads, lookups = groups.index_reads, groups.lookups
    reworded(fleet, WRITTEN, "Applied revision main@sha1:0123")
    topology.reset_stats(fleet)
    after = groups.page(access, Filters(), by, 50)
    assert commands(fleet) == 1 and after.round_trips == 1  # the status generations
    assert (groups.index_reads, groups.lookups) == (reads, lookups)
    assert after.groups is before.groups


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_group_facets_read_nothing_after_a_reworded_row_and_one_cluster_after_a_flip(
    fleet: redis.Redis, by: str
) -> None:
    gf = GroupFacets(Reader(fleet, KINDS))
    first = gf.facets(ADMIN, Filters(), by)
    assert gf.reads == len(CLUSTERS)
    reworded(fleet, WRITTEN, "Reconciliation finished in 0.8s")
    topology.reset_stats(fleet)
    again = gf.facets(ADMIN, Filters(), by)
    assert commands(fleet) == 1 and gf.reads == len(CLUSTERS)
    assert (again.total, again.statuses) == (first.total, first.statuses)
    flipped(fleet, WRITTEN)
    moved = gf.facets(ADMIN, Filters(), by)
    assert gf.reads == len(CLUSTERS) + 1  # the written cluster's rows only
    fresh = GroupFacets(Reader(fleet, KINDS)).facets(ADMIN, Filters(), by)
    assert (moved.total, moved.statuses, moved.kinds) == (fresh.total, fresh.statuses, fresh.kinds)


def test_facets_keep_their_tables_after_a_reworded_row(fleet: redis.Redis) -> None:
    reader = Reader(fleet, KINDS)
    first = reader.facets(TEAM, Filters())
    computed = reader.tallies.computed
    reworded(fleet, WRITTEN, "Reconciliation finished in 2.5s")
    topology.reset_stats(fleet)
    again = reader.facets(TEAM, Filters())
    assert commands(fleet) == 1 and reader.tallies.computed == computed
    assert (again.total, again.statuses) == (first.total, first.statuses)
    flipped(fleet, WRITTEN)
    reader.facets(TEAM, Filters())
    assert reader.tallies.computed == computed + 1  # the written cluster's table only


@pytest.mark.parametrize("who", ["admin", "team"])
def test_facets_namespaces_are_moved_by_the_written_cluster_only(
    fleet: redis.Redis, who: str
) -> None:
    access = ADMIN if who == "admin" else TEAM
    reader = Reader(fleet, KINDS)
    first = reader.facets(access, Filters())
    summed = reader.extras.summed
    assert summed == len(access)
    assert reader.facets(access, Filters()).namespaces == first.namespaces
    assert reader.extras.summed == summed  # a still fleet: nothing summed again
    flipped(fleet, WRITTEN)
    m = stored(fleet, WRITTEN)[-1]  # and a row leaves: its namespace's count moves
    store_events.apply_changes(fleet, WRITTEN, [store_events.Change(rows.identity(m), None)])
    moved = reader.facets(access, Filters())
    assert reader.extras.summed == summed + 1
    assert reader.extras.resummed <= 2  # the namespaces of the two rows written
    assert moved.namespaces == Reader(fleet, KINDS).facets(access, Filters()).namespaces


def test_list_pages_show_the_new_message(fleet: redis.Redis) -> None:
    """Rows carry the message: a remembered (sparse) list page is read again after it moves."""
    reader = Reader(fleet, KINDS)
    req = PageRequest(Filters(clusters=(WRITTEN,), kinds=(NAMESPACED[0],)), 50)
    first = reader.page(ADMIN, req)
    assert first.members and reader.page(ADMIN, req).round_trips == 1  # remembered
    shown = {rows.identity(m) for _c, m in first.members}
    changed = [i for i in reworded(fleet, WRITTEN, "brand new words", n=100) if i in shown]
    assert changed
    again = reader.page(ADMIN, req)
    messages = {rows.decode(WRITTEN, m)["message"] for _c, m in again.members}
    assert "brand new words" in messages


@pytest.mark.parametrize("who", ["admin", "team"])
def test_after_a_flip_the_merge_reads_the_written_clusters_stream_only(
    fleet: redis.Redis, who: str
) -> None:
    """Groups without unhealthy clusters come from a merge of every cluster's stream: each
    cluster's first chunk is remembered per status generation, so a page after a write reads
    the written cluster's stream (and its statuses), not every cluster's."""
    access = ADMIN if who == "admin" else TEAM
    f = Filters(statuses=("healthy", "progressing"))
    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(access, f, "object", 10)
    streams = groups.streams_read
    assert streams >= len(CLUSTERS) // 2
    assert groups.page(access, f, "object", 10).round_trips == 1
    flipped(fleet, WRITTEN)
    topology.reset_stats(fleet)
    page = groups.page(access, f, "object", 10)
    assert groups.streams_read == streams + 1  # the written cluster's
    assert page.round_trips <= 3  # the generations, its stream, its statuses
    fresh = GroupReader(Reader(fleet, KINDS)).page(access, f, "object", 10)
    assert [(g.key, [(m.cluster, m.status) for m in g.clusters]) for g in page.groups] == [
        (g.key, [(m.cluster, m.status) for m in g.clusters]) for g in fresh.groups
    ]


@pytest.mark.parametrize("by", ["object", "namespace"])
@pytest.mark.parametrize("who", ["admin", "team"])
def test_after_a_flip_a_page_rebuilds_the_written_clusters_share_only(
    fleet: redis.Redis, who: str, by: str
) -> None:
    """A page's groups list every cluster's Member: each cluster's share is remembered per
    status generation, so a page after a write builds the written cluster's share only."""
    access = ADMIN if who == "admin" else TEAM
    f = Filters(statuses=("healthy", "progressing"))
    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(access, f, by, 5)
    built = groups.shares_built
    assert built >= len(access) // 2
    flipped(fleet, WRITTEN, -1)  # a row far after the page's: the same groups
    page = groups.page(access, f, by, 5)
    assert groups.shares_built <= built + 1  # the written cluster's (when it holds one)
    fresh = GroupReader(Reader(fleet, KINDS)).page(access, f, by, 5)
    shown = [(g.key, g.order, [(m.cluster, m.status) for m in g.clusters]) for g in page.groups]
    assert shown == [
        (g.key, g.order, [(m.cluster, m.status) for m in g.clusters]) for g in fresh.groups
    ]
