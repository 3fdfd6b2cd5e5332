"""One cluster's object sync and RBAC sync (the two kinds of `Work`), run by `run`: the one
place that times a sync and records its success or failure. collector.jobs adds the lock.

Object sync: discovery picks the served kinds, each kind is listed across all namespaces with
pagination, every object becomes an encoded row, and the snapshot replaces the cluster's rows
in one transaction. Any failure leaves the last good rows in place (state `error`, stale).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import redis

from collector import mesh, metrics
from common import redis_client
from common.errors import ClusterError, FleetscopeError
from common.index import history, rows
from common.index.lease import Fence
from common.index.write import store
from common.kinds.registry import KindRegistry
from common.leaf.client import LeafClient
from common.rbac.authorizer import RbacObjects
from common.rbac.grants import compile_grants, store_grants

log = logging.getLogger(__name__)
RBAC_API = "rbac.authorization.k8s.io/v1"


class Work(StrEnum):
    """The kinds of sync work (also the names of their locks, common.index.keys.LOCK_WORK)."""

    OBJECTS = "objects"
    RBAC = "rbac"


@dataclass
class SyncResult:
    """What one sync did; `error` is empty on success, `skipped` says why it did not run."""

    cluster: str
    what: Work
    error: str = ""
    skipped: str = ""
    objects: int = 0
    added: int = 0
    removed: int = 0
    requests: int = 0
    duration_s: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    validated: int = 0
    """Istio objects validated by fleetscope's own checks (collector.mesh)."""
    validation_cpu_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error


class _Timer:
    """Duration and leaf requests of one sync so far."""

    def __init__(self, client: LeafClient | None) -> None:
        self.client = client
        self.started = time.monotonic()
        self.first_request = client.requests if client else 0

    def fill(self, result: SyncResult) -> SyncResult:
        result.duration_s = time.monotonic() - self.started
        result.requests = (self.client.requests - self.first_request) if self.client else 0
        return result


def run(
    r: redis.Redis,
    work: Work,
    client: LeafClient,
    registry: KindRegistry,
    fence: Fence | None = None,
    retention: history.Retention = history.DEFAULT,
) -> SyncResult:
    """Run one sync of `client`'s cluster: the one place that times a sync and records its
    success or failure (sync status, metrics, log). Raises after recording a failure; the last
    good rows or grants stay in place (reported stale)."""
    timer = _Timer(client)
    if work is Work.OBJECTS:
        store.mark_attempt(r, client.name)
    try:
        if work is Work.OBJECTS:
            result = _objects(r, client, registry, fence, timer, retention)
        else:
            result = _rbac(r, client, registry)
    except BaseException as e:  # also soft time limits and interrupts: record, then re-raise
        record_failure(r, timer.fill(SyncResult(client.name, work, error=error_text(e))))
        raise
    timer.fill(result)
    metrics.record_sync(result)
    log.info(
        "%s synced: %d objects (%d added, %d removed; %d Istio objects validated in %.3fs CPU) "
        "with %d requests in %.2fs",
        work,
        result.objects,
        result.added,
        result.removed,
        result.validated,
        result.validation_cpu_s,
        result.requests,
        result.duration_s,
        extra={"cluster": client.name},
    )
    return result


def _objects(
    r: redis.Redis,
    client: LeafClient,
    registry: KindRegistry,
    fence: Fence | None,
    timer: _Timer,
    retention: history.Retention,
) -> SyncResult:
    """List every served kind of one cluster and store the snapshot."""
    cluster = client.name
    # Rows written by the watcher while we list are newer than our snapshot: see replace_rows.
    since = store.generation(r, cluster)
    listed = SyncResult(cluster, Work.OBJECTS)
    members = collect(client, registry, listed)
    timer.fill(listed)
    sync_fields = {
        "state": "ok",
        "last_success": round(time.time(), 3),
        "last_error": "",
        "duration_s": round(listed.duration_s, 3),
        "requests": listed.requests,
    }
    stats = store.replace_rows(r, cluster, members, sync_fields, fence, since, retention)
    if stats.superseded:
        log.info(
            "rows changed by watch events during the list: kept them", extra={"cluster": cluster}
        )
    return SyncResult(
        cluster,
        Work.OBJECTS,
        objects=stats.total,
        added=stats.added,
        removed=stats.removed,
        kinds=stats.kinds,
        validated=listed.validated,
        validation_cpu_s=listed.validation_cpu_s,
    )


def collect(
    client: LeafClient, registry: KindRegistry, result: SyncResult | None = None
) -> list[str]:
    """Encoded rows of every object of every served registered kind, with their edges; the
    kinds that need the cluster's context (checked Istio kinds, kinds with Service edges) are
    built together at the end (collector.mesh). `result` gets the validation's work."""
    served = client.discover(registry)
    members: list[str] = []
    held: list[mesh.Held] = []
    cluster = client.name
    for kind in registry:
        api_version = served.get(kind.key)
        if api_version is None:
            continue
        if mesh.held(kind):
            held.extend(mesh.Held(kind, api_version, o) for o in client.list_all(kind, api_version))
            continue
        for obj in client.list_all(kind, api_version):
            members.append(rows.member(cluster, kind, api_version, obj))
    if held:
        services, namespaces = _mesh_context(client)
        started = time.process_time()
        members.extend(mesh.members(cluster, held, services, namespaces))
        if result is not None:
            result.validation_cpu_s = time.process_time() - started
            result.validated = sum(1 for h in held if mesh.validated(h.kind))
    return members


def _mesh_context(client: LeafClient) -> tuple[list[dict[str, Any]] | None, list[str] | None]:
    """The cluster's Services and Namespaces as the checks need them; (None, None) when they
    cannot be listed (the Istio rows then say they were not checked)."""
    try:
        services = [
            mesh.service_slim(s) for s in client.list_resource(mesh.CORE_API, mesh.SERVICES)
        ]
        namespaces = [
            mesh.namespace_name(n) for n in client.list_resource(mesh.CORE_API, mesh.NAMESPACES)
        ]
    except ClusterError as e:  # 403, 404 ...: validation is skipped, the sync goes on
        log.warning(
            "cannot list Services or Namespaces, so Istio config is not validated: %s "
            "(grant the collector list on them: k8s/leaf)",
            e,
            extra={"cluster": client.name},
        )
        return None, None
    return services, namespaces


def _rbac(r: redis.Redis, client: LeafClient, registry: KindRegistry) -> SyncResult:
    """List the cluster's Roles, ClusterRoles and bindings, compile and store its grants."""
    objects = RbacObjects(
        roles=list(client.list_resource(RBAC_API, "roles")),
        cluster_roles=list(client.list_resource(RBAC_API, "clusterroles")),
        role_bindings=list(client.list_resource(RBAC_API, "rolebindings")),
        cluster_role_bindings=list(client.list_resource(RBAC_API, "clusterrolebindings")),
    )
    store_grants(r, client.name, compile_grants(objects, registry), synced_at=round(time.time(), 3))
    listed = (
        objects.roles,
        objects.cluster_roles,
        objects.role_bindings,
        objects.cluster_role_bindings,
    )
    return SyncResult(client.name, Work.RBAC, objects=sum(len(x) for x in listed))


def record_failure(r: redis.Redis, result: SyncResult) -> None:
    """A failed sync: metrics, a warning, and the error in the cluster's sync status."""
    metrics.record_sync(result)
    log.warning("%s sync failed: %s", result.what, result.error, extra={"cluster": result.cluster})
    try:
        if result.what is Work.OBJECTS:
            store.mark_error(r, result.cluster, result.error, result.duration_s, result.requests)
        else:
            store.mark_rbac_error(r, result.cluster, result.error)
    except redis_client.ERRORS:
        log.warning("could not record the failure in Redis", extra={"cluster": result.cluster})


def error_text(e: BaseException) -> str:
    """A short, credential-free description: our own messages, else only the exception type."""
    if isinstance(e, FleetscopeError):
        return str(e)
    return f"{type(e).__name__} (unexpected; see the worker log)"
