"""The soak's end checks, once faults and churn have stopped: the index holds exactly every
leaf's rows (statuses and edges included: the full-sync oracle of tests/watch/harness.py), with
indexes and counts agreeing, and every user's walk equals the rows the leaf's own RBAC lets them
list (decided by the authorizer, as tests/support/query_fleet.oracle does)."""

from __future__ import annotations

import time
from typing import Any

import redis

from bench.soak_load import headers, walk
from common.index import rows
from common.kinds.registry import builtin_registry
from common.rbac.authorizer import Authorizer, Obj, RbacObjects, UserInfo
from kubesim.server import KubeSim
from tests.watch.harness import consistent, full_sync_members, stored

REG = builtin_registry()
Key = tuple[str, str, str, str]


def leaf_diff(sim: KubeSim, r: redis.Redis) -> dict[str, Any]:
    """Per cluster, rows the index lacks or holds wrongly (any field), rows it holds that the
    leaf does not, and whether its indexes agree; `lost`: objects not in the index at all."""
    out: dict[str, Any] = {"lost": 0, "wrong": 0, "extra": 0, "inconsistent": [], "leaves": {}}
    for c in sim.clusters:
        want, have = full_sync_members(sim, c), stored(r, c)
        ids = {_ident(m) for m in have}
        missing = want - have
        lost = sum(1 for m in missing if _ident(m) not in ids)
        out["lost"] += lost
        out["wrong"] += len(missing) - lost
        out["extra"] += len(have - want)
        if not consistent(r, c):
            out["inconsistent"].append(c)
        out["leaves"][c] = len(want)
    return out


def settled(diff: dict[str, Any]) -> bool:
    return not (diff["lost"] or diff["wrong"] or diff["extra"] or diff["inconsistent"])


def wait_settled(sim: KubeSim, r: redis.Redis, timeout_s: float) -> tuple[dict[str, Any], float]:
    """The first diff that shows the index equal to the leaves (or the last one), and when."""
    t0 = time.monotonic()
    while True:
        diff = leaf_diff(sim, r)
        if settled(diff) or time.monotonic() - t0 > timeout_s:
            return diff, round(time.monotonic() - t0, 1)
        time.sleep(2)


def _ident(member: str) -> tuple[str, ...]:
    return tuple(rows.split_member(member)[:3])


def expected_rows(sim: KubeSim, users: dict[str, UserInfo]) -> dict[str, set[Key]]:
    """user -> the (cluster, namespace, kind, name) of every leaf row they may list."""
    out: dict[str, set[Key]] = {u: set() for u in users}
    for c in sim.clusters:
        auth = Authorizer(rbac(sim, c))
        keys = [_ident(m) for m in full_sync_members(sim, c)]
        for name, user in users.items():
            u = user.with_authenticated()
            for ns, kind, obj in keys:
                k = REG.get(kind)
                assert k is not None
                if auth.allowed(u, "list", k.group, k.plural, ns):
                    out[name].add((c, ns, kind, obj))
    return out


def rbac(sim: KubeSim, cluster: str) -> RbacObjects:
    kinds = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    lists: list[list[Obj]] = [list(sim.list(cluster, k)) for k in kinds]
    return RbacObjects(*lists)


def walks_against_oracle(
    sim: KubeSim, bases: list[str], users: dict[str, UserInfo]
) -> dict[str, dict[str, Any]]:
    """Per user, a walk (on the query processes in turn) against the oracle: rows missing,
    rows that should not be there, rows shown twice. One process per user: at L an admin's
    walk is ~3,000 pages."""
    want = expected_rows(sim, users)
    out: dict[str, dict[str, Any]] = {}
    for i, (name, user) in enumerate(users.items()):
        base = bases[i % len(bases)]
        found, code = walk(None, base, headers(user.name, user.groups))
        got = [(str(a), str(b), str(c), str(d)) for a, b, c, d in found]
        seen = set(got)
        out[name] = {
            "query": i % len(bases),
            "rows": len(want[name]),
            "missing": len(want[name] - seen),
            "unexpected": len(seen - want[name]),
            "twice": len(got) - len(seen),
            "status": code,
        }
    return out


def oracle_failures(result: dict[str, dict[str, int]]) -> int:
    return sum(
        1
        for v in result.values()
        if v["missing"] or v["unexpected"] or v["twice"] != 0 or v["status"] != 200
    )
