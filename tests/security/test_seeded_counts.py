"""Attack tests on the counts one caller's new access map takes over from another's (facets'
per-namespace sums and group counts, `memo.Recent`): a team member asking right after a cluster
admin, or with an access map that shares a cluster's access with the admin, counts only the rows
they may `list` - a share is taken over only where it was made with the same (or an equal)
access, and every other cluster's is taken away and counted with the caller's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from common.index.read.group_facets import GroupFacets
from common.index.read.reader import Filters, Reader
from tests.common.index.read import fleets
from tests.common.index.read.fleets import ADMIN, CLUSTERS, TEAM
from tests.support.index_fleet import KINDS


@pytest.fixture
def fleet(redis_url: str) -> Iterator[redis.Redis]:
    yield from fleets.stored(redis_url)


def counts(f: Any) -> tuple[Any, ...]:
    return (f.total, f.clusters, f.kinds, f.statuses, f.suspended, f.namespaces)


@pytest.mark.parametrize("by", ["", "object", "namespace"])
def test_a_team_member_after_an_admin_counts_only_their_own_rows(
    fleet: redis.Redis, by: str
) -> None:
    reader = Reader(fleet, KINDS)
    groups = GroupFacets(reader)

    def ask(access: Any) -> Any:
        return groups.facets(access, Filters(), by) if by else reader.facets(access, Filters())

    def fresh(access: Any) -> Any:
        r = Reader(fleet, KINDS)
        return GroupFacets(r).facets(access, Filters(), by) if by else r.facets(access, Filters())

    admin = ask(ADMIN)
    team = ask(TEAM)  # a new sum for the same filters: the admin's are the donors
    assert counts(team) == counts(fresh(TEAM)) != counts(admin)
    if not by:  # no namespace the team may not list in any cluster
        allowed = {ns for a in TEAM.values() for ns in a.namespaces}
        assert set(team.namespaces) <= allowed
    # one cluster where the team member's access object is the admin's, the rest their own:
    # that cluster is the admin's count, every other the team's, nothing more
    mixed = {**TEAM, CLUSTERS[0]: ADMIN[CLUSTERS[0]]}
    assert counts(ask(mixed)) == counts(fresh(mixed))
    # and the admin's own counts are untouched by what was taken from them
    assert counts(ask(ADMIN)) == counts(admin)
