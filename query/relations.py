"""`GET /api/v1/objects/{cluster}/{namespace}/{kind}/{name}/relations?depth=1..5`: what an
object depends on and what depends on it, from the index (common.index.read.relations).

The caller's replicated RBAC decides, as for lists: an object they may not list is the same 404
as an unknown one (a cluster where they list nothing, or whose RBAC data is stale, as an
unregistered one), and related rows they may not list are only counted in `hidden`.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from common.errors import NotFound
from common.index import keys
from common.index.read import relations as relations_read
from common.index.read.relations import Related, Relations
from common.index.rows import decode, sort_key
from common.rbac.grants import Access
from query import listing, params
from query.scope import Scope
from query.state import caller, state

bp = Blueprint("relations", __name__, url_prefix="/api/v1")


@bp.get("/objects/<cluster>/<namespace>/<kind>/<name>/relations")
def relations(cluster: str, namespace: str, kind: str, name: str) -> dict[str, Any]:
    user = caller()
    params.check_known(request.args, params.RELATIONS_PARAMS)
    st = state()
    namespace, k = params.object_path(cluster, namespace, kind, name, st.registry)
    depth = params.depth(request.args)
    # grants from the resolver's cache, confirmed by the version read with the object (as a
    # list page's are); read again under checked grants when it moved or nothing was found
    (found, access), _ = listing.confirmed(
        st, user, lambda scope: _read(scope, cluster, namespace, k.key, name, depth)
    )
    if access is None:
        raise NotFound(f"no cluster named {cluster!r} is registered")
    if found is None:  # absent, or not the caller's to list: the same answer
        where = f"{namespace}/{name}" if namespace else name
        raise NotFound(f"no {k.key} {where} in the index of cluster {cluster}")
    return {
        "object": shown_row(cluster, found.member, access),
        "upstream": [edge(cluster, e) for e in found.upstream],
        "downstream": [edge(cluster, e) for e in found.downstream],
        "hidden": found.hidden,
    }


def _read(
    scope: Scope, cluster: str, namespace: str, kind: str, name: str, depth: int
) -> tuple[tuple[Relations | None, Access | None], keys.GrantsVersion | None]:
    """The object's relations under `scope` (None: absent or not the caller's to list) and the
    caller's access to `cluster` (None: not a cluster they may see), with the grants version
    read with the object (None when nothing was found: unconfirmed, for listing.confirmed)."""
    access = scope.visible.get(cluster)
    if access is None or not access.may_list(namespace, kind):
        return (None, access), None
    key = sort_key(namespace, kind, name)
    expect = None if scope.checked else scope.version
    found = relations_read.read(state().r, cluster, key, depth, access.may_list, expect)
    return (found, access), (found.version if found is not None else None)


def shown_row(cluster: str, member: str, access: Access) -> dict[str, Any]:
    """The row, its `blockedBy` only when the caller may list that node."""
    row: dict[str, Any] = dict(decode(cluster, member))
    blocker = row.get("blockedBy")
    if blocker is not None and not access.may_list(blocker["namespace"], blocker["kind"]):
        del row["blockedBy"]
    return row


def edge(cluster: str, e: Related) -> dict[str, Any]:
    out: dict[str, Any] = {
        "relation": e.relation,
        "cluster": cluster,
        "namespace": e.namespace,
        "kind": e.kind,
        "name": e.name,
    }
    if e.section:
        out["sectionName"] = e.section
    out.update(exists=e.exists, status=e.status, depth=e.depth)
    return out
