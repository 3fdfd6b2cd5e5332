"""The change feed (common.index.feed) on a real Redis: every write path records each row change
once, in the row's transaction, with ids `<generation>-<n>` that only grow: a full sync (rows
added, changed, removed; a no-change re-sync records nothing), the watcher's changes (a message
change is a MODIFIED too), a cluster leaving the registry (its rows' DELETED; the feed and the
generation stay); the cap and its 410 (`expired`); and how a change is an event to a filtered
stream (query.watch_events: into the filter ADDED, out of it DELETED as it was)."""

from __future__ import annotations

from typing import Any

import pytest

from common.index import feed, history, keys, rows
from common.index.feed import Position
from common.index.read.reader import Filters
from common.index.write import store, store_events
from query import watch_events
from tests.support import topology
from tests.support.team_cluster import C, member


@pytest.fixture
def r(redis_url: str) -> Any:
    client = topology.client(redis_url)
    yield client
    client.close()


START = Position(0)


def entries(r: Any, after: Position = START) -> list[feed.Change]:
    return feed.read_after(r, C, after)


def summary(changes: list[feed.Change]) -> list[tuple[str, str]]:
    return [(c.type, rows.decode(C, c.member)["namespace"]) for c in changes]


def test_a_full_sync_records_each_change_once_and_a_repeat_nothing(r: Any) -> None:
    store.replace_rows(r, C, [member("a", "app"), member("b", "app")])
    first = entries(r)
    assert summary(first) == [("ADDED", "a"), ("ADDED", "b")]
    assert [c.entry for c in first] == [(1, 0), (1, 1)]  # the write's generation, its order
    store.replace_rows(r, C, [member("a", "app"), member("b", "app")])  # nothing changed
    assert entries(r, first[-1].position) == []
    store.replace_rows(r, C, [member("a", "app", ready=False), member("c", "app")])
    got = entries(r, first[-1].position)
    assert summary(got) == [("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "c")]
    assert {c.entry[0] for c in got} == {int(r.get(keys.generation(C)))}
    modified = got[0]
    assert rows.status_of(modified.member) == "unhealthy"
    assert modified.before is not None and rows.status_of(modified.before) == "healthy"


def test_the_watchers_changes_and_a_message_change_are_recorded(r: Any) -> None:
    store.replace_rows(r, C, [member("a", "app")])
    start = feed.last(r, C)
    other = member("a", "app").replace("\x00m\x00", "\x00other message\x00", 1)
    assert other != member("a", "app")
    store_events.apply_changes(r, C, [store_events.Change.of(other)])
    gone = rows.sort_key("a", "Kustomization", "app")
    store_events.apply_changes(r, C, [store_events.Change(gone, None)])
    assert summary(entries(r, start)) == [("MODIFIED", "a"), ("DELETED", "a")]


def test_a_cluster_leaving_the_registry_leaves_through_the_feed(r: Any) -> None:
    store.replace_rows(r, C, [member("a", "app"), member("b", "app")])
    start = feed.last(r, C)
    gen = int(r.get(keys.generation(C)))
    store.delete_cluster(r, C)
    assert summary(entries(r, start)) == [("DELETED", "a"), ("DELETED", "b")]
    assert int(r.get(keys.generation(C))) == gen + 1 and r.zcard(keys.rows(C)) == 0
    store.replace_rows(r, C, [member("a", "app")])  # it comes back: ids keep growing
    back = entries(r, start)[-1]
    assert (back.type, back.entry) == ("ADDED", (gen + 2, 0))


def test_the_cap_and_a_position_past_it(r: Any) -> None:
    short = history.Retention(feed_max=3)
    store.replace_rows(r, C, [member("a", "app")], retention=short)
    old = feed.last(r, C)
    assert not feed.expired(r, C, old)
    for i in range(4):
        store_events.apply_changes(
            r, C, [store_events.Change.of(member("a", f"n{i}"))], retention=short
        )
    assert r.xlen(keys.feed(C)) == 3
    assert feed.expired(r, C, old)  # its next entry is gone
    assert not feed.expired(r, C, entries(r)[0].position)  # the oldest kept: nothing lost after


def test_events_follow_the_filter_as_kubernetes_filtered_watches_do() -> None:
    healthy, failing = member("a", "app").encode(), member("a", "app", ready=False).encode()
    unhealthy_only = Filters(statuses=("unhealthy",))
    access = {C: _AllowAll()}
    into = feed.Change(C, (2, 0), feed.MODIFIED, failing, healthy)
    out = feed.Change(C, (3, 0), feed.MODIFIED, healthy, failing)
    assert watch_events.event_for(unhealthy_only, access, into) == ("ADDED", failing)
    assert watch_events.event_for(unhealthy_only, access, out) == ("DELETED", failing)
    assert watch_events.event_for(Filters(), access, out) == ("MODIFIED", healthy)
    assert watch_events.event_for(unhealthy_only, {}, into) is None  # no access: nothing
    gone = feed.Change(C, (4, 0), feed.DELETED, healthy, None)
    assert watch_events.event_for(unhealthy_only, access, gone) is None


class _AllowAll:
    def may_list(self, namespace: str, kind: str) -> bool:
        return True


@pytest.mark.parametrize(
    ("before", "count", "cap"),
    [(0, 2501, 300), (40, 2501, 300), (40, 2501, 1200), (40, 250, 300), (400, 250, 300)],
)
def test_queued_entries_leave_the_stream_as_one_capped_xadd_each_would(
    r: Any, before: int, count: int, cap: int
) -> None:
    """feed.queue_write sends a write's entries in a few commands, and only those the cap
    keeps: the stream (ids, fields, the cap, entries-added) ends as if each entry had been its
    own `XADD ... MAXLEN`, whatever the stream held before (`before` entries of an earlier
    generation), with the kept entries in one EVAL or several (cap > XADD_CHUNK)."""
    entries = [{"n": f"m{i}"} if i % 3 else {"n": f"m{i}", "o": f"old{i}"} for i in range(count)]
    entries[-1] = {"o": "gone"}
    mine, other = keys.feed(C), "plain-xadds"
    r.delete(mine, other)
    for key in (mine, other):
        for i in range(before):
            r.xadd(key, {"n": f"b{i}"}, id=f"6-{i}", maxlen=cap, approximate=False)
    topology.reset_stats(r)
    with r.pipeline(transaction=True) as tx:
        feed.queue_write(tx, C, entries, 7, cap)
        tx.execute()
    sent = topology.commandstats(r)["xadd"]
    for i, fields in enumerate(entries):
        r.xadd(other, fields, id=f"7-{i}", maxlen=cap, approximate=False)

    def state(key: str) -> tuple[Any, ...]:
        info = r.xinfo_stream(key)
        kept = ("length", "entries-added", "first-entry", "last-entry", "max-deleted-entry-id")
        return tuple(info.get(k) for k in kept), r.xrange(key)

    assert state(mine) == state(other)
    assert state(other)[0][0] == min(cap, before + count)
    assert sent == min(cap, count)  # the entries the cap would trim at once are not sent
