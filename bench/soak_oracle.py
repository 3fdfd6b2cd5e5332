"""The soak's end checks, once faults and churn have stopped: the index holds exactly every
leaf's rows (statuses and edges included: the full-sync oracle of tests/watch/harness.py), with
indexes and counts agreeing, and every user's walk equals the rows the leaf's own RBAC lets them
list (decided by the authorizer, as tests/support/query_fleet.oracle does)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from bench.soak_load import headers, walk
from bench.xl_load import StoreLeaf
from collector.sync import collect
from common.index import graph, keys, rows
from common.kinds.registry import builtin_registry
from common.rbac.authorizer import Authorizer, Obj, RbacObjects, UserInfo
from common.rbac.encoding import HASH_FIELD
from common.rbac.grants import compile_grants
from common.redis_client import text
from kubesim.server import KubeSim
from tests.watch.harness import consistent, stored

REG = builtin_registry()
Key = tuple[str, str, str, str]


class Leaves:
    """The oracle's view of the leaves once churn has stopped: per cluster, the rows a full
    object sync would store (common.index.write.store.replace_rows's, blockedBy included),
    built by the collector's own `collect` from kubesim's store in this process (no HTTP: at L
    that is 1.5 M objects, which a collect over kubesim's sockets in one process took longer
    than the soak's settle timeout to read) and kept: the leaves no longer change."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self._members: dict[str, set[str]] = {}

    def members(self, cluster: str) -> set[str]:
        if cluster not in self._members:
            leaf = StoreLeaf(self.sim.store(cluster), self.sim.call)
            self._members[cluster] = graph.with_blockers(collect(leaf, REG))
        return self._members[cluster]


def leaf_diff(leaves: Leaves, r: redis.Redis, clusters: list[str]) -> dict[str, Any]:
    """Per cluster, rows the index lacks or holds wrongly (any field), rows it holds that the
    leaf does not, and whether its indexes agree; `lost`: objects not in the index at all;
    `unsettled`: the clusters with any of these."""
    out: dict[str, Any] = {"lost": 0, "wrong": 0, "extra": 0, "inconsistent": [], "leaves": {}}
    out["unsettled"] = []
    for c in clusters:
        want, have = leaves.members(c), stored(r, c)
        ids = {_ident(m) for m in have}
        missing = want - have
        lost = sum(1 for m in missing if _ident(m) not in ids)
        out["lost"] += lost
        out["wrong"] += len(missing) - lost
        out["extra"] += len(have - want)
        if not consistent(r, c):
            out["inconsistent"].append(c)
        if missing or have - want or out["inconsistent"][-1:] == [c]:
            out["unsettled"].append(c)
        out["leaves"][c] = len(want)
    return out


def settled(diff: dict[str, Any]) -> bool:
    return not diff["unsettled"]


def wait_settled(leaves: Leaves, r: redis.Redis, timeout_s: float) -> tuple[dict[str, Any], float]:
    """The first diff that shows the index equal to the leaves (or the last one), and when.
    After the first pass over every cluster, only the clusters that differed are read again."""
    t0 = time.monotonic()
    clusters = leaves.sim.clusters
    settled_leaves: dict[str, int] = {}
    while True:
        diff = leaf_diff(leaves, r, clusters)
        settled_leaves.update(
            (c, n) for c, n in diff["leaves"].items() if c not in diff["unsettled"]
        )
        if settled(diff) or time.monotonic() - t0 > timeout_s:
            diff["leaves"] = {**settled_leaves, **diff["leaves"]}
            return diff, round(time.monotonic() - t0, 1)
        clusters = diff["unsettled"]
        time.sleep(2)


def _ident(member: str) -> tuple[str, ...]:
    return tuple(rows.split_member(member)[:3])


def expected_rows(leaves: Leaves, users: dict[str, UserInfo]) -> dict[str, set[Key]]:
    """user -> the (cluster, namespace, kind, name) of every leaf row they may list (the
    authorizer asked once per user, cluster, kind and namespace)."""
    out: dict[str, set[Key]] = {u: set() for u in users}
    for c in leaves.sim.clusters:
        auth = Authorizer(rbac(leaves.sim, c))
        by_scope: dict[tuple[str, str], list[Key]] = {}
        for ns, kind, obj in (_ident(m) for m in leaves.members(c)):
            by_scope.setdefault((ns, kind), []).append((c, ns, kind, obj))
        for name, user in users.items():
            u = user.with_authenticated()
            for (ns, kind), found in by_scope.items():
                k = REG.get(kind)
                assert k is not None
                if auth.allowed(u, "list", k.group, k.plural, ns):
                    out[name].update(found)
    return out


def rbac(sim: KubeSim, cluster: str) -> RbacObjects:
    kinds = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    lists: list[list[Obj]] = [list(sim.list(cluster, k)) for k in kinds]
    return RbacObjects(*lists)


def walks_against_oracle(
    leaves: Leaves, bases: list[str], users: dict[str, UserInfo]
) -> dict[str, dict[str, Any]]:
    """Per user, a walk (on the query processes in turn, one walk per process at a time)
    against the oracle: rows missing, rows that should not be there, rows shown twice. At L an
    admin's walk is ~3,000 pages."""
    want = expected_rows(leaves, users)

    def one(i: int, name: str, user: UserInfo) -> dict[str, Any]:
        hidden: set[str] = set()
        found, code = walk(None, bases[i % len(bases)], headers(user.name, user.groups), hidden)
        got = [(str(a), str(b), str(c), str(d)) for a, b, c, d in found]
        seen = set(got)
        missing = want[name] - seen
        return {
            "query": i % len(bases),
            "rows": len(want[name]),
            "missing": len(missing),
            "missing_by_cluster": Counter(k[0] for k in missing).most_common(5),
            "hidden_stale_rbac": sorted(hidden),
            "unexpected": len(seen - want[name]),
            "twice": len(got) - len(seen),
            "status": code,
        }

    with ThreadPoolExecutor(max(1, len(bases))) as pool:
        done = [pool.submit(one, i, n, u) for i, (n, u) in enumerate(users.items())]
        return {name: f.result() for name, f in zip(users, done, strict=True)}


def rbac_diagnosis(r: redis.Redis, sim: KubeSim, clusters: Iterable[str]) -> dict[str, Any]:
    """Per cluster a walk missed rows of: the subjects whose grants in the index differ from the
    grants compiled from the leaf's RBAC now (the full RBAC sync's code), with the cluster's RBAC
    sync fields and the lease's holder: what to read when `walks_differ_from_oracle` fails."""
    out: dict[str, Any] = {}
    for c in clusters:
        want = compile_grants(rbac(sim, c), REG).fields
        have = {text(k): text(v) for k, v in r.hgetall(keys.rbac(c)).items()}
        have.pop(HASH_FIELD, None)
        sync = {text(k): text(v) for k, v in r.hgetall(keys.sync(c)).items()}
        differ = sorted(s for s in want.keys() | have.keys() if want.get(s) != have.get(s))
        out[c] = {
            "subjects_differing": [
                {"subject": s, "index": have.get(s), "leaf": want.get(s)} for s in differ[:10]
            ],
            "rbac_sync": {k: v for k, v in sync.items() if k.startswith("rbac")},
            "lease": text(r.get(keys.lease(c)) or b""),
        }
    return out


def oracle_failures(result: dict[str, dict[str, int]]) -> int:
    return sum(
        1
        for v in result.values()
        if v["missing"] or v["unexpected"] or v["twice"] != 0 or v["status"] != 200
    )
