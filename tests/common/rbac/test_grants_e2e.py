"""End to end: kubesim clusters -> the collector's RBAC sync (real kubernetes client, real HTTP)
-> grants in a real Redis -> AccessResolver, checked against the fleet's own who-sees-what list,
and a deleted RoleBinding / ClusterRole stops granting at the next RBAC sync."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from collector.sync import Work, run
from common.kinds.registry import builtin_registry
from common.leaf.client import LeafClient
from common.leaf.registry import load_dir
from common.rbac.authorizer import UserInfo
from common.rbac.grants import AccessResolver
from kubesim.gen.fleet import GeneratedFleet, generate_fleet
from kubesim.gen.users import ALL, fleet_users
from kubesim.server import KubeSim
from tests.support import sims

REG = builtin_registry()


@pytest.fixture
def fleet() -> GeneratedFleet:
    return generate_fleet(clusters=2, namespaces=6, seed=3, teams=3)


@pytest.fixture
def sim(fleet: GeneratedFleet, tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(fleet, tmp_path)


def sync_all(r: redis.Redis, sim: KubeSim, tmp_path: Path) -> None:
    for config in load_dir(str(tmp_path / "clusters")).values():
        client = LeafClient(config)
        try:
            run(r, Work.RBAC, client, REG)
        finally:
            client.close()


def visible(resolver: AccessResolver, user: UserInfo, clusters: list[str]) -> dict[str, object]:
    """Per cluster: "*" when every kind is listable everywhere, else the namespaces."""
    out: dict[str, object] = {}
    for cluster, access in resolver.resolve(user, clusters).items():
        if access.cluster_wide == frozenset(REG.keys()):
            out[cluster] = ALL
        elif not access.is_empty:
            assert not access.cluster_wide, "the generated fleet grants no partial cluster-wide"
            out[cluster] = access.sorted_namespaces
    return out


def test_resolved_access_matches_the_fleets_users(
    r: redis.Redis, sim: KubeSim, fleet: GeneratedFleet, tmp_path: Path
) -> None:
    sync_all(r, sim, tmp_path)
    resolver = AccessResolver(r, REG)
    users = fleet_users(fleet)
    assert len(users) >= 6
    for u in users:
        expected = {c: ns for c, ns in u.access.items() if ns}
        assert visible(resolver, UserInfo(u.name, u.groups), sim.clusters) == expected, u.name


def test_deleted_binding_and_role_stop_granting_after_next_sync(
    r: redis.Redis, sim: KubeSim, fleet: GeneratedFleet, tmp_path: Path
) -> None:
    sync_all(r, sim, tmp_path)
    resolver = AccessResolver(r, REG)
    cluster = sim.clusters[0]
    team_user = next(
        u for u in fleet_users(fleet) if u.name.startswith("dev-") and u.access[cluster]
    )
    user = UserInfo(team_user.name, team_user.groups)
    gone_ns = team_user.access[cluster][0]
    before = visible(resolver, user, [cluster])[cluster]
    assert gone_ns in before

    [binding] = [
        b
        for b in sim.list(cluster, "rolebindings", gone_ns)
        if any(s["name"] in team_user.groups for s in b.get("subjects", []))
    ]
    sim.delete(cluster, "rolebindings", gone_ns, binding["metadata"]["name"])
    assert visible(resolver, user, [cluster])[cluster] == before  # nothing changes before a sync
    sync_all(r, sim, tmp_path)
    after = visible(resolver, user, [cluster]).get(cluster, [])
    assert after == [ns for ns in before if ns != gone_ns]

    sre = UserInfo("platform-sre")
    assert visible(resolver, sre, [cluster]) == {cluster: ALL}
    [crb] = [
        b
        for b in sim.list(cluster, "clusterrolebindings")
        if any(s["name"] == "platform-sre" for s in b.get("subjects", []))
    ]
    sim.delete(cluster, "clusterroles", "", crb["roleRef"]["name"])
    sync_all(r, sim, tmp_path)
    assert visible(resolver, sre, [cluster]) == {}
