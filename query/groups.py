"""The group routes: `GET /api/v1/groups` (the same object, or namespace, across the caller's
clusters, most unhealthy first) and one group with all its clusters,
`GET /api/v1/groups/{namespace}/{kind}/{name}` and `GET /api/v1/groups/{namespace}`.

Views are thin: validate parameters, resolve the caller's scope, ask common.index.read.groups,
shape JSON.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from flask import Blueprint, Response, request

from common.errors import NotFound
from common.index.read.groups import RANK, Group, Member, group_key
from common.index.read.memo import Memo
from common.index.read.plan import Filters
from query import body, export, listing, params
from query.state import caller, state

bp = Blueprint("groups", __name__, url_prefix="/api/v1")


@bp.get("/groups")
def list_groups() -> Response:
    st, user = state(), caller()
    params.check_known(request.args, params.GROUP_PARAMS)
    filters = params.filters(request.args, st.registry, st.settings.flapping_threshold)
    by = params.by(request.args)
    filters = dataclasses.replace(filters, drift=params.drift(request.args, by))
    limit = params.limit(request.args)
    shown = params.cluster_limit(request.args)
    token = request.args.get("continue", "")
    if export.wanted(request):
        records = export.group_records(st, user, filters, (by, shown, group_json), token)
        total = listing.facets(st, user, filters, by)[0].total
        max_rows = st.settings.export_max_rows
        export.check_total(total, max_rows, "groups")
        return export.response(export.GROUP_COLUMNS, records, max_rows, f"groups-{by}.csv")
    cursor = st.signer.decode_group(token, filters, by) if token else None
    page, scope = listing.group_page(st, user, filters, by, limit, cursor)
    after = st.signer.encode_group(page.cursor, filters, by) if page.cursor else None
    rest = {"continue": after, "freshness": scope.freshness(st.settings)}
    tail = "".join(
        f",{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in rest.items()
    )
    return Response(
        f'{{"items":{_items_text(page.groups, shown)}{tail}}}\n', mimetype="application/json"
    )


TEXTS_CACHED = 1024
_texts: Memo[tuple[int, int], str] = Memo(TEXTS_CACHED, "groups.texts")
"""Encoded group pages by the list of groups they encode (its owner: held, so its id stays
its own); a named memo, in the budget (`FLEETSCOPE_QUERY_MEMO_MIB`)."""


def _items_text(groups: list[Group], shown: int) -> str:
    """A page's groups as JSON text, encoded once per page the reader remembers (its repeats
    share the list of groups while no cluster is written): a fleet-wide group holds hundreds
    of clusters to count."""
    hit = _texts.get((id(groups), shown), owner=groups)
    if hit is not None:
        return hit
    text = "[" + ",".join(_group_text(g, shown) for g in groups) + "]"
    _texts.put((id(groups), shown), text, owner=groups)  # held: its id stays its own
    return text


GROUP_TEXTS_CACHED = 65536
_group_texts: Memo[tuple[int, bytes, int, int], str] = Memo(
    GROUP_TEXTS_CACHED, "groups.group_texts"
)
"""Encoded groups by their list of Members (its owner), key, place and clusters shown: a page
after a write re-encodes only the groups whose Members changed (the reader keeps the others'
lists: common.index.read.groups._rank), not every group's hundreds of clusters."""


def _group_text(g: Group, shown: int) -> str:
    key = (id(g.clusters), g.key, g.order, shown)
    hit = _group_texts.get(key, owner=g.clusters)
    if hit is None:
        hit = json.dumps(group_json(g, shown), separators=(",", ":"))
        _group_texts.put(key, hit, owner=g.clusters)  # held: its id stays its own
    return hit


@bp.get("/groups/<namespace>/<kind>/<name>")
def object_group(namespace: str, kind: str, name: str) -> Response:
    st, user = state(), caller()
    allowed = [p for p in params.GROUP_DETAIL_PARAMS if p != "kind"]
    params.check_known(request.args, [*allowed, "revision"])
    ns, k = params.object_key(namespace, kind, name, st.registry)
    filters = params.filters(request.args, st.registry, st.settings.flapping_threshold)
    revision = params.revision(request.args)
    key = group_key(ns, k.key, name)
    got, found, scope = listing.group(st, user, filters, key, "object")
    if not got.clusters:
        raise NotFound(
            f"no cluster you may list holds {k.key} {namespace}/{name} (under the filters)"
        )
    what = f"group:{key.decode()}" + (f"?revision={revision}" if revision is not None else "")
    members, after = _paged(got, filters, what, revision)
    rows = [row for row in found if row[0] in {m.cluster for m in members}]
    rest = {**_counts(got), "continue": after, "freshness": scope.freshness(st.settings)}
    return body.page_response(rows, rest, scope.visible)


@bp.get("/groups/<namespace>")
def namespace_group(namespace: str) -> dict[str, Any]:
    st, user = state(), caller()
    params.check_known(request.args, params.GROUP_DETAIL_PARAMS)
    ns = params.check_namespace(namespace)
    filters = params.filters(request.args, st.registry, st.settings.flapping_threshold)
    got, _rows, scope = listing.group(st, user, filters, group_key(ns), "namespace")
    if not got.clusters:
        raise NotFound(
            f"no cluster you may list holds objects in namespace {namespace} (under the filters)"
        )
    members, after = _paged(got, filters, f"group:{ns}")
    return {
        **_counts(got),
        "items": [member_json(m) for m in members],
        "continue": after,
        "freshness": scope.freshness(st.settings),
    }


def _paged(
    got: Group, filters: Filters, what: str, revision: str | None = None
) -> tuple[list[Member], str | None]:
    """A page of the group's clusters (worst status first, then by name) after `continue`;
    with `revision`, only the clusters running it."""
    st = state()
    limit = params.limit(request.args)
    token = request.args.get("continue", "")
    members = got.clusters
    if revision is not None:
        members = [m for m in members if m.revision == revision]
    if token:
        pos = st.signer.decode_position(token, filters, what)
        members = [m for m in members if (RANK[m.status], m.cluster) > pos]
    if len(members) <= limit:
        return members, None
    last = members[limit - 1]
    return members[:limit], st.signer.encode_position(
        RANK[last.status], last.cluster, filters, what
    )


def _counts(g: Group) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": g.namespace}
    if g.kind is not None:
        out["kind"], out["name"] = g.kind, g.name
    out["total"] = len(g.clusters)
    out["statuses"] = g.statuses()
    out["suspended"] = g.suspended()
    if g.kind is None:
        out["objects"] = sum(m.objects for m in g.clusters)
    else:
        out.update(g.revisions().json())
    return out


def member_json(m: Member) -> dict[str, Any]:
    out: dict[str, Any] = {"cluster": m.cluster, "status": m.status, "suspended": m.suspended}
    if m.statuses:
        out["objects"] = m.objects
        out["statuses"] = dict(sorted(m.statuses.items(), key=lambda p: RANK[p[0]]))
    return out


def group_json(g: Group, shown: int) -> dict[str, Any]:
    """A group of a list: its counts and its first `shown` clusters (worst first); an object
    group's clusters with their revision."""
    clusters = [member_json(m) for m in g.clusters[:shown]]
    if g.kind is not None:
        for m, j in zip(g.clusters, clusters, strict=False):
            j["revision"] = m.revision
    return {**_counts(g), "clusters": clusters}
