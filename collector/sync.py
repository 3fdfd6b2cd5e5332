"""One cluster's object sync and RBAC sync (the two kinds of `Work`), run by `run`: the one
place that times a sync and records its success or failure. collector.jobs adds the lock.

Object sync: discovery picks the served kinds, each kind is listed across all namespaces with
pagination, every object becomes an encoded row, and the snapshot replaces the cluster's rows
in one transaction. Any failure leaves the last good rows in place (state `error`, stale).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import redis

from collector import mesh, metrics
from common import buildinfo, redis_client
from common.errors import ClusterError, FleetscopeError
from common.index import history, rows
from common.index.lease import Fence
from common.index.write import store
from common.kinds.registry import Kind, KindRegistry
from common.leaf.client import LeafClient, page_items
from common.rbac.authorizer import RbacObjects
from common.rbac.grants import compile_grants, grants_generation, store_grants

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
    unchanged: bool = False
    """The objects were those the stored rows were built from: no rows were built."""

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
    rebuild_after_s: float = 3600.0,
) -> SyncResult:
    """Run one sync of `client`'s cluster: the one place that times a sync and records its
    success or failure (sync status, metrics, log). Raises after recording a failure; the last
    good rows or grants stay in place (reported stale)."""
    timer = _Timer(client)
    if work is Work.OBJECTS:
        store.mark_attempt(r, client.name)
    try:
        if work is Work.OBJECTS:
            result = _objects(r, client, registry, fence, timer, retention, rebuild_after_s)
        else:
            result = _rbac(r, client, registry)
    except BaseException as e:  # also soft time limits and interrupts: record, then re-raise
        # What the sync held (a cluster's listed objects and rows: tens of MiB at fleet L) is
        # kept by the frames in the exception's traceback, whoever holds that next (Celery's
        # tracer, a pool's loop after a SystemExit, a reference cycle waiting for the children's
        # rare full collections), so a worker child's RSS stepped ~40 MiB at a Redis failover
        # and stayed there. The finished frames let go of their locals now; the traceback keeps
        # its lines for the log.
        traceback.clear_frames(e.__traceback__)
        record_failure(r, timer.fill(SyncResult(client.name, work, error=error_text(e))))
        raise
    timer.fill(result)
    metrics.record_sync(result)
    if result.unchanged:
        log.info(
            "%s synced: %d objects as stored (unchanged: no rows built) with %d requests in %.2fs",
            work,
            result.objects,
            result.requests,
            result.duration_s,
            extra={"cluster": client.name},
        )
        return result
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
    rebuild_after_s: float,
) -> SyncResult:
    """List every served kind of one cluster and store the snapshot: built into rows, unless
    the objects are the ones the stored rows were built from (`store.confirm_unchanged`)."""
    cluster = client.name
    # Rows written by the watcher while we list are newer than our snapshot: see replace_rows.
    since = store.generation(r, cluster)
    result = SyncResult(cluster, Work.OBJECTS)
    # A sync that is sure to build (no snapshot stored, or its rebuild is due) builds each
    # page's rows as it comes rather than keeping the page to parse again after the digest.
    certain = rebuild_after_s <= 0 or store.rebuild_due(r, cluster, rebuild_after_s)
    snapshot = list_cluster(client, registry, build_as_listed=certain)
    timer.fill(result)
    listed_at = round(time.time(), 3)
    sync_fields: dict[str, Any] = {
        "state": "ok",
        "last_success": listed_at,
        "last_error": "",
        "listed_at": listed_at,
        "duration_s": round(result.duration_s, 3),
        "requests": result.requests,
    }
    if snapshot.digest and rebuild_after_s > 0:
        kept = store.confirm_unchanged(
            r, cluster, snapshot.digest, snapshot.count, sync_fields, fence, rebuild_after_s
        )
        if kept is not None:
            result.objects, result.kinds, result.unchanged = kept.total, kept.kinds, True
            return result
    members = build(cluster, snapshot, result)
    if snapshot.digest:
        sync_fields.update(snapshot=snapshot.digest, snapshot_at=sync_fields["last_success"])
    stats = store.replace_rows(r, cluster, members, sync_fields, fence, since, retention)
    if stats.superseded:
        log.info(
            "rows changed by watch events during the list: kept them", extra={"cluster": cluster}
        )
    result.objects, result.added, result.removed = stats.total, stats.added, stats.removed
    result.kinds = stats.kinds
    return result


@dataclass
class Pages:
    """One kind's list as its pages' JSON bodies (`LeafClient.list_pages`), parsed again one
    page at a time when rows are built: a sync holds a few buffers per kind until then, not
    every object of the cluster as dicts and strings, whose millions of small objects at once
    set how many of pymalloc's arenas a worker keeps for its life. Or, for a sync sure to
    build (`list_cluster`'s `build_as_listed`), the rows built from each page as it came
    (`members`), each page parsed once."""

    bodies: list[bytes]
    count: int
    members: list[str] | None = None

    def objects(self) -> Iterator[dict[str, Any]]:
        for body in self.bodies:
            yield from page_items(body)


@dataclass
class Listed:
    """Every listed object of one cluster (`list_cluster`), not yet built into rows, and the
    digest of what rows built from them depend on."""

    plain: list[tuple[Kind, str, Pages]] = field(default_factory=list)
    """(kind, served apiVersion, its pages) of kinds whose rows need nothing else."""
    held: list[mesh.Held] = field(default_factory=list)
    services: list[dict[str, Any]] | None = None
    namespaces: list[str] | None = None
    digest: str = ""
    """"" when an object came without a uid or resourceVersion: always built."""

    @property
    def count(self) -> int:
        return sum(pages.count for _, _, pages in self.plain) + len(self.held)


ROW_CODE = (
    "common/index/rows.py",
    "common/index/edges.py",
    "common/index/label_field.py",
    "common/index/codes.py",
    "common/kinds",
    "collector/mesh.py",
)
"""The code rows are built by: a change to it changes every snapshot's digest."""


@functools.cache
def _row_code_digest() -> bytes:
    h = hashlib.blake2b(buildinfo.version().encode(), digest_size=16)
    root = Path(__file__).resolve().parent.parent
    for name in ROW_CODE:
        path = root / name
        for f in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.digest()


def versions(objects: list[dict[str, Any]]) -> list[str]:
    """Each object's "uid/resourceVersion" for the snapshot digest ("" when it lacks one)."""
    out = []
    for o in objects:
        meta = o.get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        out.append(f"{uid}/{version}" if uid and version else "")
    return out


class _Digest:
    """What rows depend on, hashed: the row code, the kinds, each served kind's apiVersion and
    every object's uid and resourceVersion (which the API server changes with every write)."""

    def __init__(self, registry: KindRegistry) -> None:
        self.h = hashlib.blake2b(_row_code_digest(), digest_size=16)
        self.h.update(repr(registry.kinds).encode())
        self.complete = True

    def add(self, what: str, objects: list[dict[str, Any]]) -> None:
        self.add_versions(what, versions(objects))

    def add_versions(self, what: str, seen: list[str]) -> None:
        """`what`'s objects as `versions` gave them (a page's at a time, in list order)."""
        if "" in seen:
            self.complete = False
        parts = [what, str(len(seen)), *seen]
        self.h.update("\n".join(parts).encode() + b"\n\n")

    def hexdigest(self) -> str:
        return self.h.hexdigest() if self.complete else ""


def list_cluster(
    client: LeafClient, registry: KindRegistry, build_as_listed: bool = False
) -> Listed:
    """Every object of every served registered kind, with the cluster's context when a held
    kind needs it (collector.mesh), and their digest. `build_as_listed`: the plain kinds'
    rows are built from each page as it comes (`Pages.members`), for a sync that will build
    whatever the digest says."""
    served = client.discover(registry)
    listed = Listed()
    digest = _Digest(registry)
    for kind in registry:
        api_version = served.get(kind.key)
        if api_version is None:
            continue
        what = f"{kind.key} {api_version}"
        if mesh.held(kind):
            objects = list(client.list_all(kind, api_version))
            digest.add(what, objects)
            listed.held.extend(mesh.Held(kind, api_version, o) for o in objects)
        elif build_as_listed:
            built, _ = client.list_read(
                api_version,
                kind.plural,
                functools.partial(_page_rows, client.name, kind, api_version),
            )
            flat = [v for seen, _ in built for v in seen]
            digest.add_versions(what, flat)
            members = [m for _, page in built for m in page]
            listed.plain.append((kind, api_version, Pages([], len(flat), members)))
        else:
            bodies, seen_pages = client.list_pages(api_version, kind.plural, versions)
            flat = [v for page in seen_pages for v in page]
            digest.add_versions(what, flat)
            listed.plain.append((kind, api_version, Pages(bodies, len(flat))))
    if listed.held:
        raw = _mesh_context(client)
        if raw is None:
            digest.add("no context", [])
        else:
            services, namespaces = raw
            digest.add("services", services)
            digest.add("namespaces", namespaces)
            listed.services = [mesh.service_slim(s) for s in services]
            listed.namespaces = [mesh.namespace_name(n) for n in namespaces]
    listed.digest = digest.hexdigest()
    return listed


def _page_rows(
    cluster: str, kind: Kind, api_version: str, items: list[dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """One page's versions (for the digest) and encoded rows."""
    return versions(items), rows.members(cluster, kind, api_version, items)


def build(cluster: str, listed: Listed, result: SyncResult | None = None) -> list[str]:
    """Encoded rows of every listed object, with their edges; the held kinds (checked Istio
    kinds, kinds with Service edges) are built together at the end (collector.mesh).
    `result` gets the validation's work."""
    members: list[str] = []
    for kind, api_version, pages in listed.plain:
        if pages.members is not None:
            members.extend(pages.members)
        else:
            members.extend(rows.members(cluster, kind, api_version, pages.objects()))
    if listed.held:
        started = time.process_time()
        members.extend(mesh.members(cluster, listed.held, listed.services, listed.namespaces))
        if result is not None:
            result.validation_cpu_s = time.process_time() - started
            result.validated = sum(1 for h in listed.held if mesh.validated(h.kind))
    return members


def collect(
    client: LeafClient, registry: KindRegistry, result: SyncResult | None = None
) -> list[str]:
    """Encoded rows of every object of every served registered kind, with their edges
    (`list_cluster`, then `build`). `result` gets the validation's work."""
    return build(client.name, list_cluster(client, registry), result)


def _mesh_context(client: LeafClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The cluster's Services and Namespaces as listed; None when they cannot be listed (the
    Istio rows then say they were not checked)."""
    try:
        services = list(client.list_resource(mesh.CORE_API, mesh.SERVICES))
        namespaces = list(client.list_resource(mesh.CORE_API, mesh.NAMESPACES))
    except ClusterError as e:  # 403, 404 ...: validation is skipped, the sync goes on
        log.warning(
            "cannot list Services or Namespaces, so Istio config is not validated: %s "
            "(grant the collector list on them: k8s/leaf)",
            e,
            extra={"cluster": client.name},
        )
        return None
    return services, namespaces


def _rbac(r: redis.Redis, client: LeafClient, registry: KindRegistry) -> SyncResult:
    """List the cluster's Roles, ClusterRoles and bindings, compile and store its grants,
    unless a watcher stored grants meanwhile (from a state at least as new as these lists)."""
    since = grants_generation(r, client.name)
    objects = RbacObjects(
        roles=list(client.list_resource(RBAC_API, "roles")),
        cluster_roles=list(client.list_resource(RBAC_API, "clusterroles")),
        role_bindings=list(client.list_resource(RBAC_API, "rolebindings")),
        cluster_role_bindings=list(client.list_resource(RBAC_API, "clusterrolebindings")),
    )
    compiled = compile_grants(objects, registry)
    synced_at = round(time.time(), 3)
    store_grants(r, client.name, compiled, synced_at, since_generation=since, listed=True)
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
