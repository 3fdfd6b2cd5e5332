"""The list routes: `GET /api/v1/objects` (RBAC-filtered keyset pages) and `/api/v1/facets`.

Views are thin: validate parameters, resolve the caller's scope, ask common.index.reader, shape JSON.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from common.index import keys
from common.index.reader import Filters
from query import body, metrics, params
from query.scope import Scope
from query.state import caller, state

bp = Blueprint("api", __name__, url_prefix="/api/v1")


def _scoped_access(scope: Scope, filters: Filters) -> dict[str, Any]:
    if not filters.clusters:
        return scope.visible  # shared, read-only
    wanted = set(filters.clusters)
    return {c: a for c, a in scope.visible.items() if c in wanted}


@bp.get("/objects")
def list_objects() -> Response:
    st, user = state(), caller()
    params.check_known(request.args, params.LIST_PARAMS)
    filters = params.filters(request.args, st.registry)
    limit = params.limit(request.args)
    token = request.args.get("continue", "")
    cursor = st.signer.decode(token, filters) if token else None
    # Grants from the resolver's cache, confirmed by a GET of their version sent in the page's
    # first round trip; when the version moved, the page is read again with checked grants.
    scope = st.scope(user, optimistic=True)
    check = "" if scope.checked else keys.VERSION
    page = st.reader.page(_scoped_access(scope, filters), filters, limit, cursor, check, False)
    if check and page.checked != scope.version:
        metrics.ROWS_SCANNED.inc(page.scanned)
        scope = st.scope(user)
        page = st.reader.page(_scoped_access(scope, filters), filters, limit, cursor, "", False)
    metrics.ROWS_SCANNED.inc(page.scanned)
    after = st.signer.encode(page.cursor, filters) if page.cursor else None
    rest = {"continue": after, "freshness": scope.freshness(st.settings)}
    return body.page_response(page.members, rest)


@bp.get("/facets")
def facets() -> dict[str, Any]:
    st, user = state(), caller()
    params.check_known(request.args, params.FACET_PARAMS)
    filters = params.filters(request.args, st.registry)
    scope = st.scope(user)
    counts = st.reader.facets(_scoped_access(scope, filters), filters)
    metrics.ROWS_SCANNED.inc(counts.scanned)
    return {
        "total": counts.total,
        "clusters": dict(sorted(counts.clusters.items())),
        "kinds": dict(sorted(counts.kinds.items())),
        "statuses": dict(sorted(counts.statuses.items())),
        "freshness": scope.freshness(st.settings),
    }
