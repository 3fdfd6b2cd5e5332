"""bench.soak_oracle, the soak's end checks: the in-process oracle builds the same rows as a full
sync over HTTP, finds what the index lost, holds wrongly or holds too much, and which users may
list which rows as the leaf's RBAC says."""

from __future__ import annotations

from pathlib import Path

import redis

from bench import soak_oracle
from common.index import keys, rows
from common.rbac.authorizer import UserInfo
from kubesim.gen.fleet import FleetSpec, GeneratedFleet
from kubesim.gen.users import ALL, fleet_users
from tests.support import sims
from tests.watch.harness import full_sync_members

FLEET = GeneratedFleet(FleetSpec(clusters=2, namespaces=6, teams=3))


def test_the_oracle_finds_lost_wrong_and_extra_rows(redis_url: str, tmp_path: Path) -> None:
    r = redis.Redis.from_url(redis_url)
    with sims.start(FLEET, tmp_path) as sim:
        sims.collect(sims.settings_for(tmp_path, redis_url))
        leaves = soak_oracle.Leaves(sim)
        c = sim.clusters[0]
        assert leaves.members(c) == full_sync_members(sim, c)  # as a full sync over HTTP
        diff, _ = soak_oracle.wait_settled(leaves, r, timeout_s=0)
        assert soak_oracle.settled(diff)
        assert sum(diff["leaves"].values()) == sum(int(r.zcard(keys.rows(x))) for x in sim.clusters)

        members = sorted(m.decode() for m in r.zrange(keys.rows(c), 0, -1))
        lost = next(m for m in members if rows.split_member(m)[1] == "Kustomization")
        r.zrem(keys.rows(c), lost)
        fields = lost.split(rows.SEP)
        extra = rows.SEP.join([*fields[:2], "not-on-the-leaf", *fields[3:]])
        r.zadd(keys.rows(c), {extra: 0})
        diff = soak_oracle.leaf_diff(leaves, r, sim.clusters)
        assert (diff["lost"], diff["wrong"], diff["extra"]) == (1, 0, 1)
        assert diff["unsettled"] == [c] and diff["inconsistent"] == [c]
        assert not soak_oracle.settled(diff)
        other = sim.clusters[1]
        held = next(m.decode() for m in r.zrange(keys.rows(other), 0, 0))
        fields = held.split(rows.SEP)
        fields[3] = next(c for c in rows.CODE_STATUS if c != fields[3])  # another status
        r.zrem(keys.rows(other), held)
        r.zadd(keys.rows(other), {rows.SEP.join(fields): 0})
        diff = soak_oracle.leaf_diff(leaves, r, sim.clusters)
        assert (diff["lost"], diff["wrong"], diff["extra"]) == (1, 1, 2)
        assert diff["unsettled"] == [c, other]
        r.zrem(keys.rows(other), rows.SEP.join(fields))
        r.zadd(keys.rows(other), {held: 0})
    r.close()


def test_expected_rows_follow_the_leaf_rbac(tmp_path: Path) -> None:
    fleet = {u.name: u for u in fleet_users(FLEET)}
    users = {name: UserInfo(u.name, u.groups) for name, u in fleet.items()}
    with sims.start(FLEET, tmp_path) as sim:
        leaves = soak_oracle.Leaves(sim)
        want = soak_oracle.expected_rows(leaves, users)
        everything = {
            (c, *rows.split_member(m)[:3]) for c in sim.clusters for m in leaves.members(c)
        }
    assert want["admin-0"] == everything and len(everything) > 50
    assert want["nobody"] == set()
    for name, user in fleet.items():
        scopes = {(c, ns) for c, ns, _, _ in want[name]}
        allowed = {(c, ns) for c, nss in user.access.items() for ns in nss if nss != ALL}
        if all(nss != ALL for nss in user.access.values()):
            assert scopes <= allowed, name
    team = next(n for n, u in fleet.items() if n.startswith("dev-") and any(u.access.values()))
    assert 0 < len(want[team]) < len(everything)


def test_the_rbac_diagnosis_names_the_subjects_whose_stored_grants_differ(
    redis_url: str, tmp_path: Path
) -> None:
    r = redis.Redis.from_url(redis_url)
    with sims.start(FLEET, tmp_path) as sim:
        sims.collect(sims.settings_for(tmp_path, redis_url))
        c = sim.clusters[0]
        assert soak_oracle.rbac_diagnosis(r, sim, [c])[c]["subjects_differing"] == []
        r.hdel(keys.rbac(c), "g:fleet-admins")  # the admins' grants lost from the index
        got = soak_oracle.rbac_diagnosis(r, sim, [c])[c]
        assert [d["subject"] for d in got["subjects_differing"]] == ["g:fleet-admins"]
        assert got["subjects_differing"][0]["index"] is None
        assert got["subjects_differing"][0]["leaf"]
        assert "rbac_synced_at" in got["rbac_sync"]
    r.close()
