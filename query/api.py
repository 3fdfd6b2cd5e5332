"""The list routes: `GET /api/v1/objects` (RBAC-filtered keyset pages) and `/api/v1/facets` (rows, or with
`by` the groups of `/api/v1/groups`).

Views are thin: validate parameters, resolve the caller's scope, ask common.index.read.reader, shape JSON.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from common.errors import InvalidInput
from common.index.read.reader import Filters, PageRequest
from query import body, export, listing, params, watch
from query.listing import list_page
from query.state import caller, state

bp = Blueprint("api", __name__, url_prefix="/api/v1")


@bp.get("/objects")
def list_objects() -> Response:
    st, user = state(), caller()
    params.check_known(request.args, params.LIST_PARAMS)
    filters = params.filters(request.args, st.registry, st.settings.flapping_threshold)
    limit = params.limit(request.args)
    token = request.args.get("continue", "")
    sort = params.sort(request.args)
    if export.wanted(request):
        records = export.object_records(st, user, filters, sort, token)
        export.check_total(listing.facets(st, user, filters)[0].total, _max_rows(), "rows")
        return export.response(export.OBJECT_COLUMNS, records, _max_rows(), "objects.csv")
    if sort:
        return _time_page(filters, limit, token, sort)
    cursor = st.signer.decode(token, filters) if token else None
    with watch.list_position(st) as rv:
        page, scope = list_page(st, user, PageRequest(filters, limit, cursor))
    after = st.signer.encode(page.cursor, filters) if page.cursor else None
    rest = {"continue": after, "resourceVersion": rv, "freshness": scope.freshness(st.settings)}
    return body.page_response(page.members, rest, scope.visible)


def _time_page(filters: Filters, limit: int, token: str, sort: str) -> Response:
    """A page in lastTransitionTime order (common.index.read.timesort)."""
    st, user = state(), caller()
    cursor = st.signer.decode_time(token, filters, sort) if token else None
    descending = sort.startswith("-")
    by_time = listing.flapping_time_page if filters.flapping else listing.time_page
    with watch.list_position(st) as rv:
        page, scope = by_time(st, user, filters, limit, descending, cursor)
    after = st.signer.encode_time(page.cursor, filters, sort) if page.cursor else None
    rest = {"continue": after, "resourceVersion": rv, "freshness": scope.freshness(st.settings)}
    return body.page_response(page.members, rest, scope.visible)


def _max_rows() -> int:
    return state().settings.export_max_rows


@bp.get("/facets")
def facets() -> Response:
    st, user = state(), caller()
    params.check_known(request.args, params.FACET_PARAMS)
    filters = params.filters(request.args, st.registry, st.settings.flapping_threshold)
    by = params.facets_by(request.args)
    label_keys = params.label_keys(request.args)
    if label_keys and (by or filters.flapping):
        why = "`by` (group counts)" if by else "`flapping`"
        raise InvalidInput("labelKeys", f"not with {why} yet; drop one of them")
    counts, scope = listing.facets(st, user, filters, by, label_keys)
    return body.facets_response(counts, scope.freshness(st.settings), label_keys, by)
