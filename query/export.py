"""CSV exports: `Accept: text/csv` on `GET /api/v1/objects` and `GET /api/v1/groups` streams
every page of the same query as RFC 4180 CSV (CRLF line ends, fields quoted when they hold a
comma, a quote or a line break, quotes doubled), one header line naming the columns.

The walk is the list's own keyset walk, page after page under the caller's grants, so the CSV
holds exactly the rows (or groups) the JSON walk yields, each once, even while the collector
writes. Before the first byte the total is counted from the facets; past
`FLEETSCOPE_EXPORT_MAX_ROWS` the answer is a 422 JSON error instead of a cut file. Rows that
appear during the export itself stop at that limit too. A cell that a spreadsheet would read as
a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) is prefixed with `'`:
leaf-controlled text must not become a formula on the reader's machine (OWASP CSV injection).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

from flask import Request, Response, stream_with_context

from common.errors import RequestError
from common.index.read.groups import RANK, Group
from common.index.read.reader import Filters, PageRequest
from common.labels import format_labels
from common.rbac.authorizer import UserInfo
from query import body, listing
from query.state import QueryState

CSV_TYPE = "text/csv"
PAGE_ROWS = 500
OBJECT_COLUMNS = (
    "cluster",
    "namespace",
    "kind",
    "apiVersion",
    "name",
    "status",
    "suspended",
    "reason",
    "message",
    "warnings",
    "lastTransitionTime",
    "revision",
    "blockedBy",
    "uiUrl",
    "labels",
)
"""Columns of an object export; a row's field that the API adds later becomes a new column at
the end, so readers should go by the header's names. `labels` is selector-like, `k=v,k2=v2`
sorted by key (labels cut from the row are not there: see the JSON's `labelsTruncated`)."""
GROUP_COLUMNS = (
    "namespace",
    "kind",
    "name",
    "total",
    *sorted(RANK, key=RANK.__getitem__),
    "suspended",
    "objects",
    "clusters",
    "revisions",
)
"""Columns of a group export: the group's key, how many clusters hold it and how many report
each status (worst first) or are suspended, its objects (namespace groups), and its first
`clusterLimit` clusters as `cluster=status` separated by spaces; `revisions` (object groups:
empty for namespace groups) as `revision=clusters` separated by spaces, most clusters first,
then `+N=M` when N more revisions run on M more clusters."""
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


class ExportTooLarge(RequestError):
    status = 422
    code = "export_too_large"


def wanted(request: Request) -> bool:
    """Whether the caller asked for CSV: `text/csv` preferred over JSON in `Accept`."""
    accept = request.accept_mimetypes
    return accept.quality(CSV_TYPE) > accept.quality("application/json") and bool(
        accept.best_match([CSV_TYPE])
    )


def cell(value: Any) -> str:
    """One CSV field's text: JSON's null as empty, booleans as `true`/`false`, a `blockedBy`
    node as `cluster/namespace/kind/name`, formula-like text neutralized."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        value = "/".join(str(value.get(k, "")) for k in ("cluster", "namespace", "kind", "name"))
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def object_records(
    st: QueryState, user: UserInfo, filters: Filters, sort: str, token: str
) -> Iterator[list[str]]:
    """Every row of the query (from `continue` when given), as CSV records. The token is
    checked here, before the answer starts; the pages are read as the stream is written."""
    texts = _time_texts if sort else _list_texts
    cursor: Any = None
    if token:
        cursor = (
            st.signer.decode_time(token, filters, sort)
            if sort
            else st.signer.decode(token, filters)
        )
    return _records(texts(st, user, filters, sort, cursor))


def _records(texts: Iterator[str]) -> Iterator[list[str]]:
    for text in texts:
        row = json.loads(text)
        row["labels"] = format_labels(row.get("labels") or {})
        yield [cell(row.get(c)) for c in OBJECT_COLUMNS]


def _list_texts(
    st: QueryState, user: UserInfo, filters: Filters, sort: str, cursor: Any
) -> Iterator[str]:
    while True:
        page, scope = listing.list_page(st, user, PageRequest(filters, PAGE_ROWS, cursor))
        yield from body.row_texts(page.members, scope.visible)
        if page.cursor is None:
            return
        cursor = page.cursor


def _time_texts(
    st: QueryState, user: UserInfo, filters: Filters, sort: str, cursor: Any
) -> Iterator[str]:
    descending = sort.startswith("-")
    while True:
        by_time = listing.flapping_time_page if filters.flapping else listing.time_page
        page, scope = by_time(st, user, filters, PAGE_ROWS, descending, cursor)
        yield from body.row_texts(page.members, scope.visible)
        if page.cursor is None:
            return
        cursor = page.cursor


GroupJson = Callable[[Group, int], dict[str, Any]]


def group_records(
    st: QueryState,
    user: UserInfo,
    filters: Filters,
    group: tuple[str, int, GroupJson],
    token: str,
) -> Iterator[list[str]]:
    """Every group of the query (from `continue` when given), as CSV records; `group` is
    (`by`, `clusterLimit`, the JSON the list route shows). The token is checked before the
    answer starts."""
    by = group[0]
    cursor = st.signer.decode_group(token, filters, by) if token else None
    return _group_records(st, user, filters, group, cursor)


def _group_records(
    st: QueryState, user: UserInfo, filters: Filters, group: tuple[str, int, GroupJson], cursor: Any
) -> Iterator[list[str]]:
    by, shown, group_json = group
    ranked = sorted(RANK, key=RANK.__getitem__)
    while True:
        page, _ = listing.group_page(st, user, filters, by, PAGE_ROWS, cursor)
        for g in page.groups:
            j = group_json(g, shown)
            clusters = " ".join(f"{m['cluster']}={m['status']}" for m in j["clusters"])
            yield [
                cell(j["namespace"]),
                cell(j.get("kind")),
                cell(j.get("name")),
                cell(j["total"]),
                *(cell(j["statuses"].get(s, 0)) for s in ranked),
                cell(j["suspended"]),
                cell(j.get("objects")),
                cell(clusters),
                cell(_revisions_text(j)),
            ]
        if page.cursor is None:
            return
        cursor = page.cursor


def _revisions_text(j: dict[str, Any]) -> str:
    """The `revisions` cell of a group (its JSON `revisions` and `otherRevisions`)."""
    if "revisions" not in j:
        return ""
    parts = [f"{r['revision']}={r['clusters']}" for r in j["revisions"]]
    other = j["otherRevisions"]
    if other["revisions"]:
        parts.append(f"+{other['revisions']}={other['clusters']}")
    return " ".join(parts)


def check_total(total: int, max_rows: int, what: str) -> None:
    if total > max_rows:
        raise ExportTooLarge(
            f"this export would hold {total} {what}, more than FLEETSCOPE_EXPORT_MAX_ROWS "
            f"({max_rows}): narrow the filters (cluster, namespace, kind, status, name) or ask "
            "the operator to raise the limit"
        )


def response(
    columns: tuple[str, ...],
    records: Iterator[list[str]],
    max_rows: int,
    filename: str,
) -> Response:
    """A streamed CSV answer: the header, then at most `max_rows` records."""

    def generate() -> Iterator[str]:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(columns)
        for n, record in enumerate(records):
            if n >= max_rows:
                break
            writer.writerow(record)
            if out.tell() >= 64 * 1024:
                yield out.getvalue()
                out.seek(0)
                out.truncate()
        yield out.getvalue()

    resp = Response(stream_with_context(generate()), mimetype=CSV_TYPE)
    resp.headers["Content-Type"] = f"{CSV_TYPE}; charset=utf-8; header=present"
    resp.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return resp
