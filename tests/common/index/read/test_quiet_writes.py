"""Count guards for reads under writes (issue #38): a write that changes only rows' messages
(most watch events) leaves the cluster's status generation alone, so the next groups page,
group facets and facets answer from what they remember (one `MGET`, nothing of any cluster
read), while list pages still show the new message; a status transition makes each of them read
the written cluster only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common import labels
from common.index import keys, rows
from common.index.read import facets, memo
from common.index.read.group_facets import GroupFacets
from common.index.read.groups import GroupReader
from common.index.read.reader import Filters, PageRequest, Reader
from common.index.write import store, store_events
from common.redis_client import text
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, NAMESPACED, TEAM
from tests.support import topology
from tests.support.index_fleet import KINDS, FakeAccess

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
    gf.reader.follow([])  # nothing asked: no round trip
    topology.reset_stats(fleet)
    moved = gf.facets(ADMIN, Filters(), by)
    # the status generations, then the written cluster's feed since its rows were held (the
    # script loaded once; its GET and two XRANGEs inside): none of its rows read again
    assert (gf.reads, gf.followed) == (len(CLUSTERS), 1)
    assert commands(fleet) <= 6, topology.commandstats(fleet)
    fresh = GroupFacets(Reader(fleet, KINDS)).facets(ADMIN, Filters(), by)
    assert (moved.total, moved.statuses, moved.kinds) == (fresh.total, fresh.statuses, fresh.kinds)


def counts_of(f: Any) -> tuple[Any, ...]:
    return (f.total, f.clusters, f.kinds, f.statuses, f.suspended)


def renamed(r: redis.Redis, cluster: str, i: int, suffix: str) -> str:
    """A new row in `cluster` (a copy of its `i`th under a new name), through the writer."""
    row = rows.decode(cluster, stored(r, cluster)[i])
    row["name"] = row["name"] + suffix
    member = rows.encode(row, "")
    store_events.apply_changes(r, cluster, [store_events.Change.of(member)])
    return rows.identity(member)


def removed(r: redis.Redis, cluster: str, i: int) -> None:
    ident = rows.identity(stored(r, cluster)[i])
    store_events.apply_changes(r, cluster, [store_events.Change(ident, None)])


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_group_facets_follow_the_feed_through_flips_new_rows_and_deletions(
    fleet: redis.Redis, by: str
) -> None:
    """Held rows move by the change feed: status flips (one flipped back in the same span),
    a row added (in a new group) and removed, a row of another cluster's group deleted: every
    caller's counts equal a fresh count, and no cluster's rows are read again."""
    gf = GroupFacets(Reader(fleet, KINDS))
    for access in (ADMIN, TEAM):
        gf.facets(access, Filters(), by)
    read = gf.reads
    flipped(fleet, WRITTEN, 0)
    flipped(fleet, WRITTEN, 2)
    flipped(fleet, WRITTEN, 2)  # back: the last entry of an identity is its state
    added = renamed(fleet, WRITTEN, 1, "-copy")
    removed(fleet, WRITTEN, 4)
    removed(fleet, CLUSTERS[5], 0)
    reworded(fleet, CLUSTERS[5], "Fetched revision main@sha1:0456")
    for access in (ADMIN, TEAM):
        for filters in (Filters(), Filters(statuses=("unhealthy",))):
            moved = gf.facets(access, filters, by)
            fresh = GroupFacets(Reader(fleet, KINDS)).facets(access, filters, by)
            assert counts_of(moved) == counts_of(fresh), (access is ADMIN, filters)
    assert (gf.reads, gf.followed) == (read, 2)
    assert any(text(m).startswith(added) for m in fleet.zrange(keys.rows(WRITTEN), 0, -1))


@pytest.mark.parametrize("lost", ["trimmed", "unrecorded"])
def test_group_facets_read_a_cluster_again_when_its_feed_cannot_say_what_moved(
    fleet: redis.Redis, lost: str
) -> None:
    """A feed whose entries since the held rows were trimmed, or a generation moved past the
    feed's last entry (a write the feed does not show): the cluster's rows are read whole."""
    gf = GroupFacets(Reader(fleet, KINDS))
    gf.facets(ADMIN, Filters(), "object")
    read = gf.reads
    flipped(fleet, WRITTEN, 0)
    if lost == "trimmed":
        flipped(fleet, WRITTEN, 1)
        fleet.xtrim(
            keys.feed(WRITTEN), maxlen=1, approximate=False
        )  # the first flip's entry is gone
    else:
        fleet.incr(keys.generation(WRITTEN))
        fleet.incr(keys.status_generation(WRITTEN))
    moved = gf.facets(ADMIN, Filters(), "object")
    assert (gf.reads, gf.followed) == (read + 1, 0)
    fresh = GroupFacets(Reader(fleet, KINDS)).facets(ADMIN, Filters(), "object")
    assert counts_of(moved) == counts_of(fresh)
    flipped(fleet, WRITTEN, 3)  # the rows read whole are followed again from there
    again = gf.facets(ADMIN, Filters(), "object")
    assert (gf.reads, gf.followed) == (read + 1, 1)
    assert counts_of(again) == counts_of(
        GroupFacets(Reader(fleet, KINDS)).facets(ADMIN, Filters(), "object")
    )


def test_group_facets_rows_read_while_a_write_lands_are_made_right_by_the_feed(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows read a chunk at a time while a write lands between two chunks: the generation
    read before the first chunk is where the feed is followed from, so the next answer after
    any write holds every change (applying an entry the rows already hold changes nothing)."""
    from common.index.read import group_facets as module

    monkeypatch.setattr(module, "CHUNK", 7)
    reader = Reader(fleet, KINDS)
    gf = GroupFacets(reader)
    idents = reader.idents
    wrote: list[int] = []

    def between(starts: Any, count: int, lead: Any = None) -> Any:
        if lead is None and not wrote:  # a later chunk: a write lands first
            flipped(fleet, WRITTEN, len(stored(fleet, WRITTEN)) - 1)  # a row not yet read
            flipped(fleet, WRITTEN, 0)  # a row already read
            wrote.append(1)
        return idents(starts, count, lead)

    monkeypatch.setattr(reader, "idents", between)
    gf.facets(ADMIN, Filters(), "object")
    assert wrote
    flipped(fleet, CLUSTERS[0], 1)
    flipped(fleet, WRITTEN, 5)
    moved = gf.facets(ADMIN, Filters(), "object")
    assert gf.followed >= 1
    fresh = GroupFacets(Reader(fleet, KINDS)).facets(ADMIN, Filters(), "object")
    assert counts_of(moved) == counts_of(fresh)


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
def test_facets_after_a_flip_look_up_the_written_clusters_table_only(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    """The clusters not written take their tables from the last answer (no memo lookup each),
    and the answer moves by the entries of the written cluster's table that differ."""
    access = ADMIN if who == "admin" else TEAM
    reader = Reader(fleet, KINDS)
    reader.facets(access, Filters())
    asked: list[str] = []
    real = type(reader.tallies).cached

    def spy(self: Any, cluster: str, *a: Any) -> Any:
        asked.append(cluster)
        return real(self, cluster, *a)

    monkeypatch.setattr(type(reader.tallies), "cached", spy)
    for i in (0, 1, 0):
        flipped(fleet, WRITTEN, i)
        asked.clear()
        moved = reader.facets(access, Filters())
        assert asked == [WRITTEN]
        fresh = Reader(fleet, KINDS).facets(access, Filters())
        assert (moved.total, moved.clusters, moved.kinds, moved.statuses, moved.suspended) == (
            fresh.total,
            fresh.clusters,
            fresh.kinds,
            fresh.statuses,
            fresh.suspended,
        )


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
    reads = reader.extras.reads
    flipped(fleet, WRITTEN)
    m = stored(fleet, WRITTEN)[-1]  # and a row leaves: its namespace's count moves
    store_events.apply_changes(fleet, WRITTEN, [store_events.Change(rows.identity(m), None)])
    moved = reader.facets(access, Filters())
    assert reader.extras.summed == summed + 1
    assert reader.extras.resummed <= 2  # the namespaces of the two rows written
    assert moved.namespaces == Reader(fleet, KINDS).facets(access, Filters()).namespaces
    # An admin's every-namespace counts move by the feed (the two namespaces read again); a
    # team member's come with its count table
    assert (reader.extras.reads, reader.extras.followed) == (reads, int(who == "admin"))


def test_an_admins_namespace_counts_are_read_whole_when_the_feed_was_trimmed(
    fleet: redis.Redis,
) -> None:
    reader = Reader(fleet, KINDS)
    reader.facets(ADMIN, Filters())
    reads = reader.extras.reads
    flipped(fleet, WRITTEN, 0)
    flipped(fleet, WRITTEN, 1)
    fleet.xtrim(keys.feed(WRITTEN), maxlen=1, approximate=False)
    moved = reader.facets(ADMIN, Filters())
    assert (reader.extras.reads, reader.extras.followed) == (reads + 1, 0)
    assert moved.namespaces == Reader(fleet, KINDS).facets(ADMIN, Filters()).namespaces
    flipped(fleet, WRITTEN, 2)
    again = reader.facets(ADMIN, Filters())
    assert (reader.extras.reads, reader.extras.followed) == (reads + 1, 1)
    assert again.namespaces == Reader(fleet, KINDS).facets(ADMIN, Filters()).namespaces


@pytest.fixture
def tiny_memo_budget() -> Iterator[None]:
    """A memo budget so small that every byte-bounded memo keeps only its last entry."""
    before = memo.budget_bytes()
    memo.set_budget(1 / 1024)
    yield
    memo.set_budget(before / 2**20)


@pytest.mark.usefixtures("tiny_memo_budget")
def test_an_admins_namespace_counts_follow_the_feed_when_the_budget_dropped_them(
    fleet: redis.Redis,
) -> None:
    """At fleet L the memo budget holds a few of 200 clusters' every-namespace counts; the
    admin's sum is still moved by the written cluster's feed, not by reading it whole."""
    reader = Reader(fleet, KINDS)
    reader.facets(ADMIN, Filters())
    reads = reader.extras.reads
    assert reads == len(CLUSTERS)  # read whole once, in chunks
    for i in range(3):
        flipped(fleet, WRITTEN, i)
        m = stored(fleet, WRITTEN)[-1]  # a row leaves: its namespace's count moves
        store_events.apply_changes(fleet, WRITTEN, [store_events.Change(rows.identity(m), None)])
        moved = reader.facets(ADMIN, Filters())
        assert (reader.extras.reads, reader.extras.followed) == (reads, i + 1)
        assert moved.namespaces == Reader(fleet, KINDS).facets(ADMIN, Filters()).namespaces


def test_every_namespace_counts_read_in_chunks_sum_the_same(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = Reader(fleet, KINDS).facets(ADMIN, Filters()).namespaces
    monkeypatch.setattr(facets, "WHOLE_CHUNK", 2)
    reader = Reader(fleet, KINDS)
    chunks: list[int] = []
    read = reader.extras._every_namespace

    def counted(todo: Any) -> Any:
        chunks.append(len(todo))
        return read(todo)

    monkeypatch.setattr(reader.extras, "_every_namespace", counted)
    assert reader.facets(ADMIN, Filters()).namespaces == whole
    assert reader.extras.reads == sum(chunks) == len(CLUSTERS) and max(chunks) == 2


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


def shown_groups(page: Any) -> list[Any]:
    return [
        (g.key, g.order, [(m.cluster, m.status, m.suspended, m.revision) for m in g.clusters])
        for g in page.groups
    ]


def revised(r: redis.Redis, cluster: str, i: int, revision: str) -> bytes:
    """The `i`th row of `cluster` gets a new revision (its status kept); its identity."""
    m = stored(r, cluster)[i]
    row = rows.decode(cluster, m)
    row["revision"] = revision
    store_events.apply_changes(
        r, cluster, [store_events.Change.of(rows.encode(row, rows.edges_of(m)))]
    )
    return rows.identity(m).encode()


@pytest.mark.parametrize("who", ["admin", "team"])
def test_a_pages_codes_on_a_written_cluster_are_looked_up_only_where_its_feed_moved(
    fleet: redis.Redis, who: str
) -> None:
    """After a write, the codes (status and revision) a page holds of the written cluster are
    kept where its feed since touched nothing (CODES_SINCE answers "=" for them), in the round
    trip that looked them all up before: a flip and a new revision show as a fresh reader
    shows them, and the script looks up only the identities the feed touched."""
    access = ADMIN if who == "admin" else TEAM
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(access, Filters(), "object", 50)
    shown = {g.key for g in first.groups}
    ids = [rows.identity(m).encode() for m in stored(fleet, WRITTEN)]
    on_page = [i for i, k in enumerate(ids) if k in shown]
    assert len(on_page) >= 3
    flipped(fleet, WRITTEN, on_page[0])
    revised(fleet, WRITTEN, on_page[1], "main@sha1:feedface")
    followed = groups.followed
    topology.reset_stats(fleet)
    page = groups.page(access, Filters(), "object", 50)
    assert groups.followed == followed + 1
    stats = topology.commandstats(fleet)
    # the two identities touched looked up, and the written cluster's stream read for the
    # merge (two ZRANGEBYLEX): before, each of the page's groups on it was looked up
    assert stats.get("zrangebylex", 0) <= 2 + 2 < len(on_page), stats
    fresh = GroupReader(Reader(fleet, KINDS)).page(access, Filters(), "object", 50)
    assert shown_groups(page) == shown_groups(fresh)
    assert any(m.revision == "main@sha1:feedface" for g in page.groups for m in g.clusters) == (
        ids[on_page[1]] in {g.key for g in page.groups}
    )


def test_a_pages_codes_are_looked_up_whole_when_the_feed_was_trimmed(fleet: redis.Redis) -> None:
    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(ADMIN, Filters(), "object", 50)
    flipped(fleet, WRITTEN, 0)
    flipped(fleet, WRITTEN, 1)
    fleet.xtrim(keys.feed(WRITTEN), maxlen=1, approximate=False)
    page = groups.page(ADMIN, Filters(), "object", 50)
    fresh = GroupReader(Reader(fleet, KINDS)).page(ADMIN, Filters(), "object", 50)
    assert shown_groups(page) == shown_groups(fresh)


def test_a_ranking_moved_by_one_clusters_share_equals_one_made_whole() -> None:
    """`_rank` from the last ranking of the same groups: only the groups whose Member changed
    on the written clusters move, in cluster order within each status."""
    from common.index.read.groups import Member, _rank

    clusters = [f"c{i}" for i in range(12)]
    keys_ = [b"a", b"b", b"c"]

    def share(c: str, statuses: dict[bytes, str]) -> dict[bytes, Member]:
        return {k: Member(c, s, False) for k, s in statuses.items()}

    base = {
        c: share(
            c, {k: ("unhealthy" if (i + j) % 5 == 0 else "healthy") for j, k in enumerate(keys_)}
        )
        for i, c in enumerate(clusters)
    }
    first = _rank(clusters, base, keys_, None)
    moved = dict(base)
    moved["c3"] = share("c3", {b"a": "progressing", b"b": base["c3"][b"b"].status})  # c gone
    moved["c7"] = share("c7", {b"a": "unhealthy", b"b": "unknown", b"c": "healthy"})
    again = _rank(clusters, moved, keys_, first)
    whole = _rank(clusters, moved, keys_, None)
    assert again.out == whole.out
    assert first.out == _rank(clusters, base, keys_, None).out  # the first one left as it was
    assert _rank(clusters, moved, keys_, again) is again  # nothing changed: the same


def labelled_row(r: redis.Redis, cluster: str, i: int, labels: dict[str, str]) -> None:
    m = stored(r, cluster)[i]
    row = rows.decode(cluster, m)
    row["labels"] = labels
    store_events.apply_changes(
        r, cluster, [store_events.Change.of(rows.encode(row, rows.edges_of(m)))]
    )


def every_count(f: Any) -> tuple[Any, ...]:
    return (*counts_of(f), f.namespaces, f.labels)


@pytest.mark.parametrize("who", ["admin", "team"])
def test_facets_counted_from_rows_move_by_the_written_clusters_parts(
    fleet: redis.Redis, who: str
) -> None:
    """Facets with label keys (counted from the rows) after writes: the last answer moved by
    the written clusters' parts (their old part taken away, the new one added: each moved by
    its change feed, no row read), equal to a fresh count; past a quarter of the clusters
    written, summed again."""
    access = ADMIN if who == "admin" else TEAM
    label_keys = ("tier",)
    for c in CLUSTERS[:4]:
        labelled_row(fleet, c, 1, {"tier": "gold"})
    reader = Reader(fleet, KINDS)
    reader.facets(access, Filters(), label_keys=label_keys)
    reads = reader.extras.reads
    flipped(fleet, WRITTEN, 2)
    labelled_row(fleet, WRITTEN, 1, {"tier": "silver"})  # a value moves
    labelled_row(fleet, CLUSTERS[0], 1, {})  # a value's last row leaves it
    removed(fleet, CLUSTERS[0], 5)
    moved = reader.facets(access, Filters(), label_keys=label_keys)
    assert reader.extras.moved == 1
    assert (reader.extras.reads, reader.extras.fed, reader.extras.by_moves) == (reads, 2, 2)
    fresh = Reader(fleet, KINDS).facets(access, Filters(), label_keys=label_keys)
    assert every_count(moved) == every_count(fresh)
    for c in CLUSTERS[:4]:  # half of them written: summed again
        flipped(fleet, c, 3)
    again = reader.facets(access, Filters(), label_keys=label_keys)
    assert reader.extras.moved == 1
    assert every_count(again) == every_count(
        Reader(fleet, KINDS).facets(access, Filters(), label_keys=label_keys)
    )


LABEL_FILTERS = [
    Filters(),
    Filters(statuses=("unhealthy",)),
    Filters(suspended=False, kinds=(NAMESPACED[1], NAMESPACED[2])),
    Filters(namespaces=("team-01",)),
    Filters(labels=labels.parse("tier in (gold,silver)")),
    Filters(labels=labels.parse("!tier"), statuses=("healthy", "progressing")),
]


@pytest.mark.parametrize(
    "filters",
    LABEL_FILTERS,
    ids=["all", "unhealthy", "two kinds, not suspended", "one namespace", "selector", "!tier"],
)
def test_label_facets_parts_follow_the_feed_through_every_kind_of_write(
    fleet: redis.Redis, filters: Filters
) -> None:
    """A cluster's part of facets counted from rows, moved by its change feed (FOLLOW with the
    labels fields) through flips (one flipped back), labels set, moved and dropped, a row added
    and rows removed, and message-only updates between them: equal to a fresh count for every
    caller and filter, no row read, one feed read per written cluster."""
    label_keys = ("tier", "team")
    reader = Reader(fleet, KINDS)
    for access in (ADMIN, TEAM):
        reader.facets(access, filters, label_keys=label_keys)
    reads, fed = reader.extras.reads, reader.extras.fed
    labelled_row(fleet, WRITTEN, 1, {"tier": "gold"})
    flipped(fleet, WRITTEN, 0)
    flipped(fleet, WRITTEN, 2)
    flipped(fleet, WRITTEN, 2)  # back
    reworded(fleet, WRITTEN, "Applied revision main@sha1:0789")
    labelled_row(fleet, WRITTEN, 1, {"tier": "silver", "team": "blue"})
    labelled_row(fleet, WRITTEN, 3, {"tier": "gold"})
    labelled_row(fleet, WRITTEN, 3, {})
    added = renamed(fleet, WRITTEN, 5, "-copy")
    removed(fleet, WRITTEN, 4)
    removed(fleet, CLUSTERS[5], 0)
    for access in (ADMIN, TEAM):
        moved = reader.facets(access, filters, label_keys=label_keys)
        fresh = Reader(fleet, KINDS).facets(access, filters, label_keys=label_keys)
        assert every_count(moved) == every_count(fresh), access is ADMIN
    assert (reader.extras.reads, reader.extras.fed) == (reads, fed + 4)
    assert reader.extras.by_moves == 4  # each answer moved by the written clusters' moves
    assert any(text(m).startswith(added) for m in fleet.zrange(keys.rows(WRITTEN), 0, -1))


@pytest.mark.parametrize("lost", ["trimmed", "unrecorded", "written while read"])
def test_label_facets_read_a_cluster_again_when_its_feed_cannot_say(
    fleet: redis.Redis, lost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part whose feed entries since were trimmed, or whose generation moved past the feed's
    last entry, is read whole again; a part written while it was read holds at no known feed
    generation, so the next write reads it whole too. Every answer equals a fresh count."""
    label_keys = ("tier",)
    reader = Reader(fleet, KINDS)
    if lost == "written while read":  # a write lands between the part's scan and its check
        real = facets.Extras._feed_gens
        calls = []

        def racing(self: facets.Extras, clusters: Any) -> list[int]:
            calls.append(1)
            if len(calls) == 2:
                flipped(fleet, WRITTEN, 6)
            return real(self, clusters)

        monkeypatch.setattr(facets.Extras, "_feed_gens", racing)
    first = reader.facets(ADMIN, Filters(), label_keys=label_keys)
    assert first.total > 0
    reads = reader.extras.reads
    flipped(fleet, WRITTEN, 0)
    if lost == "trimmed":
        flipped(fleet, WRITTEN, 1)
        fleet.xtrim(keys.feed(WRITTEN), maxlen=1, approximate=False)
    elif lost == "unrecorded":
        fleet.incr(keys.generation(WRITTEN))
        fleet.incr(keys.status_generation(WRITTEN))
    moved = reader.facets(ADMIN, Filters(), label_keys=label_keys)
    assert (reader.extras.reads, reader.extras.fed) == (reads + 1, 0)
    fresh = Reader(fleet, KINDS).facets(ADMIN, Filters(), label_keys=label_keys)
    assert every_count(moved) == every_count(fresh)
    flipped(fleet, WRITTEN, 3)  # read whole, with no write meanwhile: followed from there
    again = reader.facets(ADMIN, Filters(), label_keys=label_keys)
    assert (reader.extras.reads, reader.extras.fed) == (reads + 1, 1)
    assert every_count(again) == every_count(
        Reader(fleet, KINDS).facets(ADMIN, Filters(), label_keys=label_keys)
    )


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_a_group_moving_onto_a_page_is_known_on_the_clusters_not_written(
    fleet: redis.Redis, by: str
) -> None:
    """The groups right after a page are looked up with it (spares): when writes move one of
    them onto the page, only the written clusters are asked again, not every cluster that
    holds the newcomer."""
    limit = 3
    groups = GroupReader(Reader(fleet, KINDS))
    first = groups.page(ADMIN, Filters(), by, limit)
    longer = GroupReader(Reader(fleet, KINDS)).page(ADMIN, Filters(), by, limit + 1)
    last, newcomer = first.groups[-1], longer.groups[-1]
    assert last.order > 0 and newcomer.order > 0  # both in the unhealthy order
    # the page's last group gets healthy where it was unhealthy: it drops, the next moves up
    written = set()
    for m in last.clusters:
        if m.status != "unhealthy":
            continue
        members = stored(fleet, m.cluster)
        for i, member in enumerate(members):
            ident = rows.identity(member).encode()
            key = ident if by == "object" else ident.split(b"\x00")[0] + b"\x00"
            if key == last.key and rows.decode(m.cluster, member)["status"] == "unhealthy":
                flipped(fleet, m.cluster, i)
                written.add(m.cluster)
    lookups = groups.lookups
    after = groups.page(ADMIN, Filters(), by, limit)
    assert newcomer.key in [g.key for g in after.groups]
    assert {m.cluster for m in newcomer.clusters} - written  # held where nothing was written
    assert groups.lookups - lookups <= len(written)
    fresh = GroupReader(Reader(fleet, KINDS)).page(ADMIN, Filters(), by, limit)
    assert shown_groups(after) == shown_groups(fresh)


def test_the_same_group_page_asked_at_once_after_a_write_is_read_once(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write every concurrent request for a page misses at once: the first reads it,
    the others wait for it (`Flights`) and answer from it."""
    import threading

    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(ADMIN, Filters(), "object", 10)
    flipped(fleet, WRITTEN, 0)
    real = groups._page
    calls: list[int] = []

    def slow(*a: Any) -> None:
        calls.append(1)
        deadline = time.monotonic() + 10  # the others arrive and wait while this one reads
        while groups._flights.waited < 3 and time.monotonic() < deadline:
            time.sleep(0.001)
        real(*a)

    monkeypatch.setattr(groups, "_page", slow)
    got: list[Any] = []
    threads = [
        threading.Thread(target=lambda: got.append(groups.page(ADMIN, Filters(), "object", 10)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(calls) == 1 and groups._flights.waited == 3
    fresh = GroupReader(Reader(fleet, KINDS)).page(ADMIN, Filters(), "object", 10)
    assert len(got) == 4 and all(shown_groups(p) == shown_groups(fresh) for p in got)


def queued_behind_a_write(
    ask: Any, flights: memo.Flights, computing: list[int], release: Any, write: Any
) -> list[Any]:
    """Three requests for one page, each arriving after a write: the first computes it while
    the other two wait for it, each with generations newer than the one it computes at. Then
    `release` lets the first finish; their three answers, in arrival order."""
    import threading

    got: dict[int, Any] = {}

    def arrive(i: int) -> threading.Thread:
        t = threading.Thread(target=lambda: got.__setitem__(i, ask()))
        t.start()
        return t

    def until(ok: Any) -> None:
        deadline = time.monotonic() + 10
        while not ok() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert ok()

    threads = [arrive(0)]
    until(lambda: len(computing) == 1)
    for i in (1, 2):
        write()
        threads.append(arrive(i))
        until(lambda i=i: flights.waited == i)
    release.set()
    for t in threads:
        t.join(20)
    return [got[i] for i in range(3)]


def test_a_page_made_after_waiting_answers_the_requests_queued_behind_it(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under steady writes each request waiting for a concurrent one's group page read newer
    status generations than that page was made at, so each made the page again in turn. The
    next one to make it reads the generations again first: its page is as new as every waiting
    request wants and answers them all (two pages made for three requests, not three)."""
    import threading

    groups = GroupReader(Reader(fleet, KINDS))
    groups.page(ADMIN, Filters(), "object", 10)
    flipped(fleet, WRITTEN, 0)
    real, computing, release = groups._page, [], threading.Event()

    def held(*a: Any) -> None:
        computing.append(1)
        if len(computing) == 1:
            assert release.wait(10)
        real(*a)

    monkeypatch.setattr(groups, "_page", held)
    flips = iter([1, 2])
    got = queued_behind_a_write(
        lambda: groups.page(ADMIN, Filters(), "object", 10),
        groups._flights,
        computing,
        release,
        lambda: flipped(fleet, CLUSTERS[1], next(flips)),
    )
    assert len(computing) == 2
    fresh = GroupReader(Reader(fleet, KINDS)).page(ADMIN, Filters(), "object", 10)
    assert shown_groups(got[1]) == shown_groups(got[2]) == shown_groups(fresh)


@pytest.mark.usefixtures("tiny_memo_budget")
@pytest.mark.parametrize("change", ["same map copied", "a cluster gone", "a cluster parsed again"])
def test_a_new_access_map_takes_its_namespace_shares_over_from_the_last_sum(
    fleet: redis.Redis, change: str
) -> None:
    """A caller's access map is a new object whenever one cluster's access changes or a
    cluster comes or goes (query.scope): the new sum takes the other clusters' shares over
    instead of reading every cluster's every-namespace counts again (at fleet L the admin's
    whole-fleet read was ~13,000 commands and ~0.7 s of CPU in the request)."""
    reader = Reader(fleet, KINDS)
    reader.facets(ADMIN, Filters())
    flipped(fleet, WRITTEN)  # and a write between: the taken-over share moves as usual
    if change == "same map copied":
        access, kept = dict(ADMIN), len(CLUSTERS)
    elif change == "a cluster gone":
        access, kept = {c: a for c, a in ADMIN.items() if c != CLUSTERS[0]}, len(CLUSTERS) - 1
    else:  # equal access, another object: another subject's grants there changed
        access, kept = {**ADMIN, CLUSTERS[1]: FakeAccess(frozenset(KINDS))}, len(CLUSTERS)
    reads, seeded = reader.extras.reads, reader.extras.seeded
    topology.reset_stats(fleet)
    got = reader.facets(access, Filters())
    assert reader.extras.seeded == seeded + kept
    assert (reader.extras.reads, reader.extras.followed) == (reads, 1)  # the written cluster
    taken = commands(fleet)  # generations, tables (the tiny budget keeps none), one feed
    topology.reset_stats(fleet)
    assert got.namespaces == Reader(fleet, KINDS).facets(access, Filters()).namespaces
    assert taken * 4 < commands(fleet)  # every cluster's every-namespace counts read


def test_a_new_sum_takes_no_share_summed_with_other_access(fleet: redis.Redis) -> None:
    """A team member's sum is never seeded from the admin's: the shares differ."""
    reader = Reader(fleet, KINDS)
    reader.facets(ADMIN, Filters())
    seeded = reader.extras.seeded
    got = reader.facets(TEAM, Filters())
    assert reader.extras.seeded == seeded
    assert got.namespaces == Reader(fleet, KINDS).facets(TEAM, Filters()).namespaces
    narrowed = {**TEAM, CLUSTERS[0]: ADMIN[CLUSTERS[0]]}  # one cluster's access is the admin's
    mixed = reader.facets(narrowed, Filters())
    assert reader.extras.seeded == seeded + len(CLUSTERS) - 1  # from the team's sum
    assert mixed.namespaces == Reader(fleet, KINDS).facets(narrowed, Filters()).namespaces


@pytest.mark.parametrize("by", ["object", "namespace"])
@pytest.mark.parametrize(
    "change", ["a cluster gone", "a cluster parsed again", "a team's access in one cluster"]
)
def test_group_facets_of_a_new_access_map_take_the_last_counts_over(
    fleet: redis.Redis, by: str, change: str
) -> None:
    """New counts (a cluster out of the caller's scope, its access parsed again, or another
    caller sharing all but one cluster's access) start from the last ones of the same filters:
    only the clusters that differ are counted whole, and the answer is what a fresh count says."""
    gf = GroupFacets(Reader(fleet, KINDS))
    gf.facets(ADMIN, Filters(), by)
    flipped(fleet, WRITTEN)  # and a write between: moved as usual after the seed
    if change == "a cluster gone":
        access, whole = {c: a for c, a in ADMIN.items() if c != CLUSTERS[0]}, 1
    elif change == "a cluster parsed again":
        access, whole = {**ADMIN, CLUSTERS[1]: FakeAccess(frozenset(KINDS))}, 0
    else:
        access, whole = {**ADMIN, CLUSTERS[2]: TEAM[CLUSTERS[2]]}, 2  # taken away, counted
    counted, seeded = gf.whole, gf.seeded
    got = gf.facets(access, Filters(), by)
    assert gf.seeded == seeded + len(CLUSTERS) - (change != "a cluster parsed again")
    assert gf.whole - counted == whole
    fresh = GroupFacets(Reader(fleet, KINDS)).facets(access, Filters(), by)
    assert counts_of(got) == counts_of(fresh)
    # the donor's own counts are untouched by the seed
    mine = gf.facets(ADMIN, Filters(), by)
    assert counts_of(mine) == counts_of(
        GroupFacets(Reader(fleet, KINDS)).facets(ADMIN, Filters(), by)
    )
