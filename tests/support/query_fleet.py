"""The query tests' seeded index (the fixtures `seeded` and `wide` in tests/conftest.py): four
clusters of random rows (tests.support.index_fleet) with grants compiled from hand-written RBAC
per cluster and sync status as the collector leaves them, the users who ask (USERS, `headers`),
the oracle of what each may list (the authorizer itself, not compiled grants); and forty
clusters of the same rows for the count guards."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis

from common.index import keys, syncstatus
from common.index.rows import Row
from common.kinds.registry import builtin_registry
from common.rbac.authorizer import Authorizer, RbacObjects, UserInfo
from common.rbac.grants import compile_grants, store_grants
from tests.support.index_fleet import NAMESPACED, make_row, random_fleet, write_rows

REG = builtin_registry()
CLUSTERS = ["c00", "c01", "c02", "c03"]


def _meta(name: str, ns: str | None = None) -> dict:
    return {"name": name, **({"namespace": ns} if ns else {})}


def rbac_objects(cluster: str) -> RbacObjects:
    """Admins everywhere; group team-a in two namespaces; alice in one namespace on c02; a
    service account with Kustomizations only in ns0 on c01; bob-less elsewhere."""
    viewer = {
        "metadata": _meta("viewer"),
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}],
    }
    kust = {
        "metadata": _meta("kust-list"),
        "rules": [
            {
                "apiGroups": ["kustomize.toolkit.fluxcd.io"],
                "resources": ["kustomizations"],
                "verbs": ["list"],
            }
        ],
    }
    crbs = [
        {
            "metadata": _meta("admins"),
            "roleRef": {"kind": "ClusterRole", "name": "viewer"},
            "subjects": [{"kind": "Group", "name": "admins"}],
        }
    ]
    rbs = []

    def rb(ns: str, role: str, subject: dict) -> None:
        rbs.append(
            {
                "metadata": _meta(f"rb-{len(rbs)}", ns),
                "roleRef": {"kind": "ClusterRole", "name": role},
                "subjects": [subject],
            }
        )

    if cluster in ("c00", "c01", "c03"):
        rb("team-01", "viewer", {"kind": "Group", "name": "team-a"})
        rb("team-04", "viewer", {"kind": "Group", "name": "team-a"})
    if cluster == "c02":
        rb("team-07", "viewer", {"kind": "User", "name": "alice"})
    if cluster == "c01":
        rb("ns0", "kust-list", {"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"})
    return RbacObjects([], [viewer, kust], rbs, crbs)


USERS = {
    "admin": UserInfo("root", ("admins",)),
    "team": UserInfo("tina", ("team-a",)),
    "alice": UserInfo("alice", ()),
    "sa": UserInfo("system:serviceaccount:ci:deployer", ("system:serviceaccounts",)),
    "nobody": UserInfo("nobody", ()),
}


def headers(user: UserInfo) -> dict[str, str]:
    h = {"X-Remote-User": user.name}
    if user.groups:
        h["X-Remote-Group"] = ",".join(user.groups)
    return h


def oracle(rows: list[Row], user: UserInfo) -> list[Row]:
    """Rows `user` may list, decided by the RBAC authorizer directly (not compiled grants)."""
    auths = {c: Authorizer(rbac_objects(c)) for c in CLUSTERS}
    u = user.with_authenticated()
    out = []
    for row in rows:
        k = REG.get(row["kind"])
        assert k is not None
        if auths[row["cluster"]].allowed(u, "list", k.group, k.plural, row["namespace"]):
            out.append(row)
    return out


def mark_synced(r: redis.Redis, cluster: str, **overrides: object) -> None:
    now = time.time()
    fields = {"state": "ok", "last_success": now, "last_attempt": now, "objects": 0}
    fields.update(overrides)
    r.hset(keys.sync(cluster), mapping=syncstatus.encode(**fields))


@dataclass
class Seeded:
    r: redis.Redis
    rows: list[Row]


def seed(r: redis.Redis) -> list[Row]:
    """Write the seeded fleet (random rows of seed 21 on CLUSTERS, their grants, sync status)."""
    rows = random_fleet(seed=21)
    write_rows(r, rows)
    for c in CLUSTERS:
        r.hset(keys.CLUSTERS, c, json.dumps({"source": "dir"}))
        store_grants(r, c, compile_grants(rbac_objects(c), REG), time.time())
        mark_synced(r, c, objects=sum(1 for row in rows if row["cluster"] == c))
    return rows


FORTY = [f"c{i:02d}" for i in range(40)]


def seed_wide(r: redis.Redis) -> None:
    """40 clusters of 30 rows each, grants and sync status as the collector leaves them."""
    rows = [
        make_row(c, f"team-{n:02d}", NAMESPACED[i % len(NAMESPACED)], f"app-{i}")
        for c in FORTY
        for n in range(3)
        for i in range(10)
    ]
    write_rows(r, rows)
    for c in FORTY:
        r.hset(keys.CLUSTERS, c, json.dumps({"source": "dir"}))
        store_grants(r, c, compile_grants(rbac_objects("c00"), REG), time.time())
        mark_synced(r, c, objects=30)
