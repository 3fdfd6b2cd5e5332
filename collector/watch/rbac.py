"""One watched cluster's RBAC objects, kept in memory, and the debounced recompile of its grants.

RBAC objects are few next to rows (a RoleBinding per namespace), so the watcher keeps them and
recompiles the whole cluster's grants (common.rbac.grants, the full RBAC sync's code path) at once
after a change in a quiet window, then at most once per debounce window while changes go on. Grants are first stored once all four resources were
listed: compiling a partial set would revoke access for a moment.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis

from collector.debounce import Debounced
from collector.watch.packed import Table, key_of
from common import redis_client
from common.errors import LockBusy, RedisUnavailable
from common.index.lease import Fence
from common.kinds.registry import KindRegistry
from common.rbac.authorizer import RbacObjects
from common.rbac.grants import compile_grants, store_grants

log = logging.getLogger(__name__)
RBAC_API = "rbac.authorization.k8s.io/v1"
RESOURCES = ("roles", "clusterroles", "rolebindings", "clusterrolebindings")


class RbacState:
    """The cluster's Roles, ClusterRoles and bindings, updated by list and watch events."""

    def __init__(
        self,
        r: redis.Redis,
        cluster: str,
        kinds: KindRegistry,
        debounce_s: float,
        may_write: Callable[[], bool],
        fence: Fence | None = None,
    ) -> None:
        self.r, self.cluster, self.kinds, self.fence = r, cluster, kinds, fence
        self.debounce_s = debounce_s
        self.may_write = may_write
        # slimmed, and packed (collector.watch.packed) until the next compile
        self.objects: dict[str, Table] = {p: Table() for p in RESOURCES}
        self.listed: set[str] = set()
        self.compiles = 0
        self.stored = 0  # compiles whose grants were stored (the RBAC heartbeat waits for one)
        self._lock = threading.Lock()
        self._recompile: Debounced | None = None  # set by `start`
        self._dirty = False  # changed before `start`

    def replace(self, plural: str, items: list[dict[str, Any]]) -> None:
        """A (re)list of one resource."""
        with self._lock:
            self.objects[plural] = Table(map(_slim, items))
            self.listed.add(plural)
        self.touch()

    def event(self, plural: str, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self.objects[plural].delete(key_of(obj))
            else:
                self.objects[plural].put(_slim(obj))
        self.touch()

    @property
    def complete(self) -> bool:
        return self.listed.issuperset(RESOURCES)

    def touch(self) -> None:
        """Recompute at the next chance (what was held back while not allowed to write)."""
        recompile = self._recompile
        if recompile is None:
            self._dirty = True
        else:
            recompile.mark()

    def start(self, stopped: Callable[[], bool]) -> None:
        """Recompile and store the grants after changes, at most once per debounce window (on
        the process's shared recompute pool, collector.debounce), until `stopped()`."""
        self._recompile = Debounced(
            self.debounce_s,
            lambda: self.complete and self.may_write(),
            self.compile_and_store,
            (*redis_client.ERRORS, RedisUnavailable),  # retried: a revocation must not be lost
            "store grants",
            self.cluster,
            stopped,
            leading=True,  # a lone change (a revocation) is compiled at once
        )
        if self._dirty:
            self._recompile.mark()

    def compile_and_store(self) -> bool:
        with self._lock:  # a cluster's RBAC objects are read in a few ms
            objs: dict[str, list[Mapping[str, Any]]] = {
                p: list(self.objects[p].objects()) for p in RESOURCES
            }
        snapshot = RbacObjects(
            roles=objs["roles"],
            cluster_roles=objs["clusterroles"],
            role_bindings=objs["rolebindings"],
            cluster_role_bindings=objs["clusterrolebindings"],
        )
        compiled = compile_grants(snapshot, self.kinds)
        self.compiles += 1
        synced_at = round(time.time(), 3)
        try:
            changed = store_grants(self.r, self.cluster, compiled, synced_at, fence=self.fence)
        except LockBusy:  # the lease moved: the replica's round drops this watch
            log.info(
                "grants not stored: the lease is no longer ours", extra={"cluster": self.cluster}
            )
            return False
        self.stored += 1
        if changed:
            log.info("grants recompiled and changed", extra={"cluster": self.cluster})
        return changed


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the RBAC engine reads; managedFields and annotations can be most of an object."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "namespace", "labels") if k in meta}
    return {**{k: v for k, v in obj.items() if k != "metadata"}, "metadata": kept}
