"""One cluster's object sync and RBAC sync, as plain functions (tasks and the CLI call them).

Object sync: discovery picks the served kinds, each kind is listed across all namespaces with
pagination, every object becomes an encoded row, and the snapshot replaces the cluster's rows
in one transaction. Any failure leaves the last good rows in place (state `error`, stale).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import redis

from collector import metrics
from common.errors import FleetscopeError
from common.index import rows, store
from common.kinds.registry import KindRegistry
from common.leaf.client import LeafClient
from common.lease import Fence
from common.rbac.authorizer import RbacObjects
from common.rbac.grants import compile_grants, store_grants

log = logging.getLogger(__name__)
RBAC_API = "rbac.authorization.k8s.io/v1"


@dataclass
class SyncResult:
    """What one sync did; `error` is empty on success."""

    cluster: str
    what: str  # "objects" | "rbac"
    error: str = ""
    objects: int = 0
    added: int = 0
    removed: int = 0
    requests: int = 0
    duration_s: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error


def sync_objects(
    r: redis.Redis,
    client: LeafClient,
    registry: KindRegistry,
    fence: Fence | None = None,
) -> SyncResult:
    """List every served kind of one cluster and store the snapshot; raises on failure after
    recording it (state `error`, last good rows kept)."""
    cluster = client.name
    result = SyncResult(cluster, "objects")
    started, first_request = time.monotonic(), client.requests
    store.mark_attempt(r, cluster)
    try:
        # Rows written by the watcher while we list are newer than our snapshot: see replace_rows.
        since = store.generation(r, cluster)
        members = _collect(client, registry)
        result.requests = client.requests - first_request
        result.duration_s = time.monotonic() - started
        sync_fields = {
            "state": "ok",
            "last_success": round(time.time(), 3),
            "last_error": "",
            "duration_s": round(result.duration_s, 3),
            "requests": result.requests,
        }
        stats = store.replace_rows(r, cluster, members, sync_fields, fence, since)
    except BaseException as e:  # also soft time limits and interrupts: record, then re-raise
        result.requests = client.requests - first_request
        result.duration_s = time.monotonic() - started
        result.error = error_text(e)
        record_failure(r, result)
        raise
    result.objects, result.added, result.removed = stats.total, stats.added, stats.removed
    if stats.superseded:
        log.info(
            "rows changed by watch events during the list: kept them", extra={"cluster": cluster}
        )
    result.kinds = stats.kinds
    metrics.record_sync(result)
    log.info(
        "synced %d objects (%d added, %d removed) with %d requests in %.2fs",
        result.objects,
        result.added,
        result.removed,
        result.requests,
        result.duration_s,
        extra={"cluster": cluster},
    )
    return result


def _collect(client: LeafClient, registry: KindRegistry) -> list[str]:
    """Encoded rows of every object of every served registered kind."""
    served = client.discover(registry)
    members: list[str] = []
    cluster = client.name
    for kind in registry:
        api_version = served.get(kind.key)
        if api_version is None:
            continue
        for obj in client.list_all(kind, api_version):
            members.append(rows.encode(rows.build_row(cluster, kind, api_version, obj)))
    return members


def sync_rbac(r: redis.Redis, client: LeafClient, registry: KindRegistry) -> SyncResult:
    """List the cluster's Roles, ClusterRoles and bindings, compile and store its grants."""
    result = SyncResult(client.name, "rbac")
    started, first_request = time.monotonic(), client.requests
    try:
        objects = RbacObjects(
            roles=list(client.list_resource(RBAC_API, "roles")),
            cluster_roles=list(client.list_resource(RBAC_API, "clusterroles")),
            role_bindings=list(client.list_resource(RBAC_API, "rolebindings")),
            cluster_role_bindings=list(client.list_resource(RBAC_API, "clusterrolebindings")),
        )
        compiled = compile_grants(objects, registry)
        store_grants(r, client.name, compiled, synced_at=round(time.time(), 3))
        result.objects = sum(
            len(x)
            for x in (
                objects.roles,
                objects.cluster_roles,
                objects.role_bindings,
                objects.cluster_role_bindings,
            )
        )
    except BaseException as e:
        result.error = error_text(e)
        result.requests = client.requests - first_request
        result.duration_s = time.monotonic() - started
        record_failure(r, result)
        raise
    result.requests = client.requests - first_request
    result.duration_s = time.monotonic() - started
    metrics.record_sync(result)
    return result


def record_failure(r: redis.Redis, result: SyncResult) -> None:
    metrics.record_sync(result)
    log.warning("%s sync failed: %s", result.what, result.error, extra={"cluster": result.cluster})
    try:
        if result.what == "objects":
            store.mark_error(r, result.cluster, result.error, result.duration_s, result.requests)
        else:
            store.mark_rbac_error(r, result.cluster, result.error)
    except redis.RedisError:
        log.warning("could not record the failure in Redis", extra={"cluster": result.cluster})


def error_text(e: BaseException) -> str:
    """A short, credential-free description: our own messages, else only the exception type."""
    if isinstance(e, FleetscopeError):
        return str(e)
    return f"{type(e).__name__} (unexpected; see the worker log)"
