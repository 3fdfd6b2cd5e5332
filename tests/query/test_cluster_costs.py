"""On Redis Cluster a list request still costs a bounded number of round trips: the page's reads
go out as one pipelined write per shard holding a cluster the page touches (all shards at once),
plus the grants version, however many clusters the caller can see. Counted at the socket: every
command write to a node is one round trip to it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
import redis
import redis.connection

from common import redis_client
from common.index import keys
from common.index.read.reader import Filters, PageRequest, Reader
from common.settings import Settings
from tests.support import topology
from tests.support.http import make_app
from tests.support.index_fleet import KINDS, FakeAccess
from tests.support.query_fleet import FORTY, USERS, headers

TOPOLOGIES = ("cluster",)
CLUSTERS = FORTY
ALL = frozenset(KINDS)


class Sends:
    """Command writes to the nodes, by round: one round per `pipelined` call on the cluster (its
    writes go out to every shard before any reply is read), and one per command sent otherwise."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rounds: list[Counter[int]] = []
        self._in_round = False
        real_packed = redis.connection.AbstractConnection.send_packed_command
        real_round = redis_client._send_to_shards

        def packed(conn, command, check_health=True):  # type: ignore[no-untyped-def]
            if not self._in_round:
                self.rounds.append(Counter())
            self.rounds[-1][conn.port] += 1
            return real_packed(conn, command, check_health)

        def one_round(*args, **kw):  # type: ignore[no-untyped-def]
            self.rounds.append(Counter())
            self._in_round = True
            try:
                return real_round(*args, **kw)
            finally:
                self._in_round = False

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", packed)
        monkeypatch.setattr(redis_client, "_send_to_shards", one_round)

    @property
    def pipelined_rounds(self) -> int:
        return sum(1 for r in self.rounds if len(r) > 1 or sum(r.values()) > 1)


PAGES = [
    ("admin", Filters()),
    ("admin", Filters(statuses=("unhealthy",))),
    ("admin", Filters(kinds=("HelmRelease",), name="app-1")),
    ("team", Filters()),
    ("team", Filters(statuses=("unhealthy", "progressing"))),
]


@pytest.mark.parametrize("who, filters", PAGES)
def test_a_page_costs_the_standalone_round_trips_each_one_write_per_shard(
    ours: redis.Redis, monkeypatch: pytest.MonkeyPatch, who: str, filters: Filters
) -> None:
    """The reader's rounds are those it takes on one server (`page.round_trips`, pinned for
    standalone by test_page_costs and test_sparse_pages), and in each every shard it touches
    gets one write: the page's EVALSHAs, ranges and the generations' MGET split by slot."""
    access = {
        "admin": {c: FakeAccess(ALL) for c in CLUSTERS},
        "team": {c: FakeAccess(namespaces={"team-01": ALL}) for c in CLUSTERS[::3]},
    }[who]
    reader = Reader(ours, KINDS, pages_max=0)
    walk(reader, access, filters)  # connections opened, scripts loaded: as in a running server
    cursor, shards_touched = None, set()
    while True:
        sends = Sends(monkeypatch)
        page = reader.page(access, PageRequest(filters, 40, cursor))
        monkeypatch.undo()
        assert len(sends.rounds) == page.round_trips, sends.rounds
        for rnd in sends.rounds:
            assert max(rnd.values()) == 1, rnd  # one write per shard touched
            shards_touched |= set(rnd)
        cursor = page.cursor
        if cursor is None:
            break
    assert len(shards_touched) == 3  # the walk reached clusters on every shard


def walk(reader: Reader, access: dict, filters: Filters) -> None:
    cursor = None
    while True:
        cursor = reader.page(access, PageRequest(filters, 40, cursor)).cursor
        if cursor is None:
            return


@pytest.mark.parametrize(
    "query",
    ["", "&status=unhealthy", "&kind=HelmRelease", "&namespace=team-01", "&name=app-1"],
)
def test_a_list_request_costs_its_page_rounds_plus_one(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """Through the API, between two refreshes of the fleet view: the page's rounds (one write
    per shard each) plus one command, the grants version."""
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    app = make_app(settings)
    app.extensions["fleetscope"].fleet.cache_s = 3600
    client = app.test_client()
    url = "/api/v1/objects?limit=20" + query
    for who in ("admin", "alice"):
        first = client.get(url, headers=headers(USERS[who]))  # warms caches and scripts
        assert first.status_code == 200, first.json
        sends = Sends(monkeypatch)
        resp = client.get(url, headers=headers(USERS[who]))
        monkeypatch.undo()
        assert resp.status_code == 200, resp.json
        assert resp.json["items"] == first.json["items"]
        singles = [r for r in sends.rounds if sum(r.values()) == 1 and len(r) == 1]
        assert all(max(r.values()) == 1 for r in sends.rounds), (who, sends.rounds)
        assert len(sends.rounds) - len(singles) <= 2, (who, sends.rounds)  # the page's rounds
        assert len(singles) <= 2, (who, sends.rounds)


def test_a_page_spanning_clusters_on_every_shard_is_split_by_slot(
    wide: redis.Redis, ours: redis.Redis
) -> None:
    """The reader's generations MGET covers clusters of every shard: it is split by slot and
    put back in order, in one round trip per shard."""
    r = ours
    gens = redis_client.mget(r, [keys.generation(c) for c in CLUSTERS])
    assert gens == [wide.get(keys.generation(c)) for c in CLUSTERS]
    assert all(g is not None for g in gens)
    replies = redis_client.pipelined(
        r, [("GET", keys.VERSION), ("MGET", *(keys.generation(c) for c in CLUSTERS))]
    )
    assert replies == [wide.get(keys.VERSION), gens]


@pytest.fixture
def ours(wide: redis.Redis, redis_url: str) -> Iterator[redis.Redis]:
    """The client fleetscope's processes build (common.redis_client.connect) for the fleet."""
    r = redis_client.connect(redis_url)
    yield r
    r.close()


def test_an_mget_across_slots_is_one_command_per_node(wide: redis.Redis, ours: redis.Redis) -> None:
    """On Redis >= 7 a node's share of a many-slot MGET is one cross-slot script call (the
    generations of 200 clusters: 3 commands, not 200); on older servers, one MGET per slot.
    Both give the same values in the order asked."""
    names = [keys.generation(c) for c in CLUSTERS]
    want = [wide.get(n) for n in names]
    cross_slot = redis_client._cross_slot_sha(ours) is not None  # type: ignore[arg-type]
    topology.reset_stats(wide)
    assert redis_client.mget(ours, names) == want
    stats = topology.commandstats(wide)
    if cross_slot:
        assert stats["evalsha"] <= 3 and stats["mget"] == 0, stats
    ours.__dict__["_fs_cross_slot"] = None  # as against Redis < 7
    topology.reset_stats(wide)
    assert redis_client.mget(ours, names) == want
    stats = topology.commandstats(wide)
    assert stats["mget"] == len(CLUSTERS) and stats["evalsha"] == 0, stats
