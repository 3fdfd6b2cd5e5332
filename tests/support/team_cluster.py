"""One leaf cluster's worth of Kustomizations written by the real writer, for the history, feed,
flapping and watch tests: rows built from objects as the collector builds them, RBAC where the
admins list everything and team-a only its namespace, and the cluster seeded (rows, grants, sync
status) and changed as the watcher changes it."""

from __future__ import annotations

import json
import time
from typing import Any

from common.index import keys, rows
from common.index.write import store, store_events
from common.rbac.authorizer import RbacObjects, UserInfo
from common.rbac.grants import compile_grants, store_grants
from tests.support.query_fleet import REG, mark_synced

C = "c1"
ADMIN = UserInfo("root", ("admins",))
TEAM = UserInfo("tina", ("team-a",))  # lists everything in team-a, nothing else
NOBODY = UserInfo("nobody", ())


def member(ns: str, name: str, ready: bool = True, rev: str = "main@sha1:1") -> str:
    k = REG.get("Kustomization")
    assert k is not None
    cond = {"type": "Ready", "status": "True" if ready else "False", "reason": "R", "message": "m"}
    obj = {
        "metadata": {"namespace": ns, "name": name},
        "status": {"conditions": [cond], "lastAppliedRevision": rev},
    }
    return rows.member(C, k, k.api_version(), obj)


def rbac() -> RbacObjects:
    viewer = {
        "metadata": {"name": "viewer"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}],
    }
    crb = {
        "metadata": {"name": "admins"},
        "roleRef": {"kind": "ClusterRole", "name": "viewer"},
        "subjects": [{"kind": "Group", "name": "admins"}],
    }
    rb = {
        "metadata": {"name": "team-a", "namespace": "team-a"},
        "roleRef": {"kind": "ClusterRole", "name": "viewer"},
        "subjects": [{"kind": "Group", "name": "team-a"}],
    }
    return RbacObjects([], [viewer], [rb], [crb])


def seed(r: Any) -> None:
    store.replace_rows(r, C, [member(ns, "app") for ns in ("team-a", "team-b")])
    r.hset(keys.CLUSTERS, C, json.dumps({"source": "dir"}))
    store_grants(r, C, compile_grants(rbac(), REG), time.time())
    mark_synced(r, C, objects=2)


def change(r: Any, ns: str, name: str, ready: bool = True, **kw: Any) -> None:
    store_events.apply_changes(r, C, [store_events.Change.of(member(ns, name, ready))], **kw)
