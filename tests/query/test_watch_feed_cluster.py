"""The watch hub's feed reader. Count guards on Redis Cluster (issue #41, fleet XL): a still
fleet costs one read of the fleet's generation a round (and the grants version), not an XREAD
per cluster; when a cluster is written its change is read, with one XREAD per cluster and no
`COMMAND GETKEYS` (redis-py's cluster pipeline asked the server for XREAD's key, twice a
command); a write whose writer died before raising the fleet's generation is read once the
last read is `keys.FLEET_GENERATION_MAX_AGE_S` old. On either topology: a reader that fell
behind a feed's retention (entries trimmed before it read them) reports the cluster expired,
so the hub ends its streams with 410 instead of leaving them a gap."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import redis

from common import redis_client
from common.index import feed, history, keys, rows
from common.index.feed import MODIFIED, Position
from common.index.read import tally
from common.index.read.reader import Filters
from common.index.write import store_events, writer
from common.rbac.authorizer import UserInfo
from query import watch_feed
from query.watch_feed import FeedReader
from query.watch_hub import Caller, Hub, Subscription
from query.watch_sinks import QueueSink
from tests.common.index.read import fleets
from tests.common.index.read.fleets import CLUSTERS, costs, reworded
from tests.support import topology
from tests.support.rowfactory import row

TOPOLOGIES = ("standalone", "cluster")
WRITTEN = CLUSTERS[3]


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url)


@pytest.fixture
def reader(
    fleet: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FeedReader]:
    monkeypatch.setattr(watch_feed, "REGISTRY_EVERY_S", 1e9)  # the clusters given, no others
    monkeypatch.setattr(watch_feed, "BLOCK_MS", 1)
    gens, _ = tally.generations(fleet, CLUSTERS)
    start = {c: Position(int(g or 0)) for c, g in zip(CLUSTERS, gens, strict=True)}
    st = SimpleNamespace(
        settings=SimpleNamespace(redis_url=redis_url),
        fleet=SimpleNamespace(snapshot=lambda settings: None),
    )
    wake_r, wake_w = socket.socketpair()
    feed_reader = FeedReader(st, start, wake_w)  # type: ignore[arg-type]
    yield feed_reader
    feed_reader.r.close()
    wake_r.close()
    wake_w.close()


def on_cluster(r: redis.Redis) -> None:
    if not redis_client.is_cluster(r):
        pytest.skip("the fleet's generation gates the feeds' reads on Redis Cluster only")


def changes(reader: FeedReader) -> list[tuple[str, str]]:
    reader._round()
    got = []
    while (batch := reader.next()) is not None:
        got += [(c.cluster, c.type) for c in batch.changes]
        reader.taken()
    return got


def test_a_still_fleet_costs_one_get_a_round_and_a_write_is_read(
    fleet: redis.Redis, reader: FeedReader
) -> None:
    on_cluster(fleet)
    assert len(CLUSTERS) >= 8
    topology.reset_stats(fleet)
    assert changes(reader) == []  # the first round reads every feed (and connects)
    assert costs(fleet)["xread"] == len(CLUSTERS) and "command|getkeys" not in costs(fleet)

    topology.reset_stats(fleet)
    assert changes(reader) == []
    assert costs(fleet) == {"get": 2}  # the fleet's generation, the grants version

    reworded(fleet, WRITTEN, "Applied revision main@sha1:4711")
    topology.reset_stats(fleet)
    assert changes(reader) == [(WRITTEN, MODIFIED)]
    got = costs(fleet)
    assert got == {"get": 2, "xread": len(CLUSTERS)} and "command|getkeys" not in got

    topology.reset_stats(fleet)
    assert changes(reader) == [] and costs(fleet) == {"get": 2}  # read once, not again


def test_a_write_whose_writer_died_before_raising_the_fleet_is_read_after_the_bound(
    fleet: redis.Redis, reader: FeedReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_cluster(fleet)
    assert changes(reader) == []
    monkeypatch.setattr(writer, "fleet_moved", lambda r: None)  # dies before the INCR
    reworded(fleet, WRITTEN, "Applied revision main@sha1:4712")
    assert changes(reader) == []  # within the bound: the fleet did not move
    monkeypatch.setattr(keys, "FLEET_GENERATION_MAX_AGE_S", 0.0)  # the bound has passed
    assert changes(reader) == [(WRITTEN, MODIFIED)]


def test_a_cluster_the_hub_adds_is_read_at_once(fleet: redis.Redis, reader: FeedReader) -> None:
    assert changes(reader) == []
    late = "late-cluster"
    reader.add(late, Position(0))
    fleet.xadd(keys.feed(late), {"n": b"x"}, id="1-0")  # a feed the fleet's INCR never saw
    assert changes(reader) == [(late, "ADDED")]


def added(r: redis.Redis, names: list[str], feed_max: int) -> None:
    for name in names:
        member = rows.encode(row(WRITTEN, "team-77", "Kustomization", name, "healthy"))
        store_events.apply_changes(
            r,
            WRITTEN,
            [store_events.Change.of(member)],
            retention=history.Retention(feed_max=feed_max),
        )


def test_a_reader_behind_the_feeds_retention_reports_the_cluster_expired(
    fleet: redis.Redis, reader: FeedReader
) -> None:
    assert changes(reader) == []
    added(fleet, ["kept-0", "kept-1"], feed_max=3)  # within retention: read whole
    reader._round()
    batch = reader.next()
    assert batch is not None and batch.expired == set() and len(batch.changes) == 2
    reader.taken()

    added(fleet, [f"lost-{i}" for i in range(5)], feed_max=3)  # two trimmed before the read
    reader._round()
    batch = reader.next()
    assert batch is not None and batch.expired == {WRITTEN}
    assert len(batch.changes) == 3  # what the feed still held


def test_the_hub_ends_with_410_the_streams_that_could_see_an_expired_cluster() -> None:
    hub = Hub(SimpleNamespace(r=None))  # type: ignore[arg-type]
    sees, blind, elsewhere = QueueSink(), QueueSink(), QueueSink()
    for sink, clusters, filters in (
        (sees, {WRITTEN: None, "c00": None}, Filters()),
        (blind, {"c00": None}, Filters()),  # no grant on the expired cluster
        (elsewhere, {WRITTEN: None, "c00": None}, Filters(clusters=("c00",))),
    ):
        caller = Caller(UserInfo("u"), access=clusters)  # type: ignore[arg-type]
        sub = Subscription(UserInfo("u"), filters, None, sink=sink, caller=caller)
        caller.subs[sub] = None
        hub.subs[sub] = None
    hub._expire(WRITTEN)
    sent = sees.q.get_nowait()
    assert sent is not None and b'"code":410' in sent and b'"reason":"Expired"' in sent
    assert sees.closed and not blind.closed and not elsewhere.closed
    assert len(hub.subs) == 2
    hub.sel.close()
    hub._wake_r.close()
    hub._wake_w.close()


def test_a_stream_past_the_hub_on_an_expired_cluster_is_kept_when_the_feed_holds_its_place(
    fleet: redis.Redis,
) -> None:
    """The hub fell behind WRITTEN's retention; a stream opened from a list read after those
    writes (its position there past the hub's) is owed only what follows its own position: it
    stays while the feed still holds that. One whose own position was trimmed too, and one
    level with the hub, end with 410 (the flake of 2026-12-04: a fresh list's stream, admitted
    before the hub read the trimmed writes, ended with 410 as well)."""
    added(fleet, [f"lost-{i}" for i in range(5)], feed_max=3)  # lost-0 and lost-1 trimmed
    gens = [c.position.gen for c in feed.read_after(fleet, WRITTEN, Position(0))]
    assert len(gens) == 3  # lost-2, lost-3, lost-4
    hub = Hub(SimpleNamespace(r=fleet))  # type: ignore[arg-type]
    subs = {}
    for name, ahead in (
        ("fresh", {WRITTEN: Position(gens[1])}),  # after lost-3: lost-4 is still kept
        ("stale", {WRITTEN: Position(gens[0] - 2)}),  # after lost-0: lost-1 is gone
        ("level", {}),
    ):
        caller = Caller(UserInfo(name), access={WRITTEN: None})  # type: ignore[arg-type]
        sub = Subscription(UserInfo(name), Filters(), None, sink=QueueSink(), caller=caller)
        sub.ahead = dict(ahead)
        caller.subs[sub] = None
        hub.subs[sub] = None
        subs[name] = sub
    hub._expire(WRITTEN)
    assert not subs["fresh"].closed and subs["fresh"] in hub.subs
    for name in ("stale", "level"):
        sent = subs[name].sink.q.get_nowait()  # type: ignore[union-attr]
        assert sent is not None and b'"code":410' in sent, name
        assert subs[name].closed and subs[name] not in hub.subs
    hub.sel.close()
    hub._wake_r.close()
    hub._wake_w.close()
