"""JSON bodies of list pages, built from per-row JSON text cached by stored member.

A row's JSON is a pure function of its cluster and stored member (RBAC decided which members a
page holds before this point), so pages that repeat rows (dashboards polling the same first
pages) join cached text instead of decoding and encoding 50 rows each time. The one part that
depends on the caller, `blockedBy` (shown only when they may list that node), is cached beside
the text and spliced in per request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from flask import Response

from common.index import rows
from common.index.edges import decode_blocker
from common.rbac.grants import Access

ROWS_CACHED = 16_384
"""Row texts kept per process (~0.6 KB each with the key: ~10 MB at most)."""


class _Blocker(NamedTuple):
    namespace: str
    kind: str
    json: str
    """`"blockedBy":{...}`, ready to splice."""


class _Cached(NamedTuple):
    text: str
    """The row's JSON without `blockedBy`."""
    blocker: _Blocker | None


_rows: dict[tuple[str, bytes], _Cached] = {}


def _render(cluster: str, member: bytes) -> _Cached:
    blocked = decode_blocker(cluster, rows.blocked_of(member.decode()))
    if blocked is None:
        return _Cached(rows.row_json(cluster, member), None)
    text = json.dumps(blocked, separators=(",", ":"))
    blocker = _Blocker(blocked["namespace"], blocked["kind"], f'"blockedBy":{text}')
    return _Cached(rows.row_json(cluster, member), blocker)


def row_texts(
    members: list[tuple[str, bytes]], access: Mapping[str, Access] | None = None
) -> list[str]:
    """Each (cluster, member)'s row as JSON text, from the cache where present, with its
    `blockedBy` where `access` (per cluster: the caller's) lets them list the blocking node."""
    hits = [_rows.get(m) for m in members]
    missing = [m for m, c in zip(members, hits, strict=True) if c is None]
    fresh = {m: _render(*m) for m in missing}
    if fresh:
        if len(_rows) + len(fresh) > ROWS_CACHED:
            _rows.clear()  # crude but bounded; a changed row is a new member, never a stale hit
        _rows.update(fresh)
    out = []
    for m, hit in zip(members, hits, strict=True):
        cluster = m[0]
        text, blocker = fresh[m] if hit is None else hit
        if blocker is not None and access is not None:
            a = access.get(cluster)
            if a is not None and blocker.kind in a.kinds_in(blocker.namespace):
                text = f"{text[:-1]},{blocker.json}}}"
        out.append(text)
    return out


def page_response(
    members: list[tuple[str, bytes]],
    rest: dict[str, Any],
    access: Mapping[str, Access] | None = None,
) -> Response:
    """`{"items": [rows...], **rest}` as a JSON response (as Flask would render the dict);
    `access` as `row_texts` takes it (None: no `blockedBy` shown)."""
    items = ",".join(row_texts(members, access))
    tail = "".join(
        f",{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in rest.items()
    )
    return Response(f'{{"items":[{items}]{tail}}}\n', mimetype="application/json")
