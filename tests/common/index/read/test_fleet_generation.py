"""Count guards for the fleet's generation on Redis Cluster (issue #41, fleet XL): a reader of
many clusters' generations reads one key while no cluster was written, however many clusters it
reads (on a cluster, an MGET of hundreds of clusters' generations is a command per cluster on the
servers); every writer moves it after its write, so the next read sees the write; a write whose
writer died before moving it is seen within keys.FLEET_GENERATION_MAX_AGE_S."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.index import keys
from common.index.read import tally
from common.index.read.reader import Filters, Reader
from common.index.write import store
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, costs, reworded
from tests.support import topology
from tests.support.index_fleet import KINDS

TOPOLOGIES = ("cluster",)
WRITTEN = CLUSTERS[3]


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url)


def test_a_still_fleet_costs_one_get_and_a_write_is_seen(fleet: redis.Redis) -> None:
    assert len(CLUSTERS) >= tally.FLEET_GENERATION_MIN
    first, _ = tally.generations(fleet, CLUSTERS)
    topology.reset_stats(fleet)
    again, version = tally.generations(fleet, CLUSTERS, version=True)
    assert again == first and costs(fleet) == {"get": 2}  # the fleet's generation, the grants'
    assert version is not None

    reworded(fleet, WRITTEN, "Applied revision main@sha1:4711")
    moved, _ = tally.generations(fleet, CLUSTERS)
    want = [int(g) + (c == WRITTEN) for c, g in zip(CLUSTERS, first, strict=True)]
    assert [int(g) for g in moved] == want
    topology.reset_stats(fleet)
    assert tally.generations(fleet, CLUSTERS)[0] == moved and costs(fleet) == {"get": 1}


def test_status_generations_are_held_apart(fleet: redis.Redis) -> None:
    plain, _ = tally.generations(fleet, CLUSTERS)
    status, _ = tally.status_generations(fleet, CLUSTERS)
    reworded(fleet, WRITTEN, "Reconciliation finished in 1.1s")  # moves gen, not sgen
    assert tally.status_generations(fleet, CLUSTERS)[0] == status
    assert tally.generations(fleet, CLUSTERS)[0] != plain


def test_a_deleted_cluster_moves_the_fleet(fleet: redis.Redis) -> None:
    before, _ = tally.generations(fleet, CLUSTERS)
    store.delete_cluster(fleet, WRITTEN)
    after, _ = tally.generations(fleet, CLUSTERS)
    assert int(after[3]) == int(before[3]) + 1


def test_a_write_whose_writer_died_before_moving_the_fleet_is_seen_after_the_bound(
    fleet: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, _ = tally.generations(fleet, CLUSTERS)
    fleet.incr(keys.generation(WRITTEN))  # a write, without the fleet's INCR after it
    assert tally.generations(fleet, CLUSTERS)[0] == before  # within the bound: as read
    monkeypatch.setattr(keys, "FLEET_GENERATION_MAX_AGE_S", 0.0)  # the bound has passed
    assert int(tally.generations(fleet, CLUSTERS)[0][3]) == int(before[3]) + 1


def test_facets_of_a_still_fleet_read_no_cluster_generation(fleet: redis.Redis) -> None:
    """The facets' memo check, on a still fleet: the fleet's generation, not one per cluster."""
    reader = Reader(fleet, KINDS)
    first = reader.facets(ADMIN, Filters())
    topology.reset_stats(fleet)
    again = reader.facets(ADMIN, Filters())
    assert (again.total, again.statuses) == (first.total, first.statuses)
    assert costs(fleet).get("get", 0) <= 2 and "evalsha" not in costs(fleet)
