"""JSON bodies of list pages, built from per-row JSON text cached by stored member.

A row's JSON is a pure function of its cluster and stored member (RBAC decided which members a
page holds before this point), so pages that repeat rows (dashboards polling the same first
pages) join cached text instead of decoding and encoding 50 rows each time.
"""

from __future__ import annotations

import json
from typing import Any, cast

from flask import Response

from common.index.rows import row_json

ROWS_CACHED = 16_384
"""Row texts kept per process (~0.6 KB each with the key: ~10 MB at most)."""

_rows: dict[tuple[str, bytes], str] = {}


def row_texts(members: list[tuple[str, bytes]]) -> list[str]:
    """Each (cluster, member)'s row as JSON text, from the cache where present."""
    cached = [_rows.get(m) for m in members]
    missing = [m for m, text in zip(members, cached, strict=True) if text is None]
    if not missing:
        return cast(list[str], cached)
    fresh = {m: row_json(*m) for m in missing}
    if len(_rows) + len(fresh) > ROWS_CACHED:
        _rows.clear()  # crude but bounded; a changed row is a new member, never a stale hit
    _rows.update(fresh)
    return [fresh[m] if text is None else text for m, text in zip(members, cached, strict=True)]


def page_response(members: list[tuple[str, bytes]], rest: dict[str, Any]) -> Response:
    """`{"items": [rows...], **rest}` as a JSON response (as Flask would render the dict)."""
    items = ",".join(row_texts(members))
    tail = "".join(
        f",{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in rest.items()
    )
    return Response(f'{{"items":[{items}]{tail}}}\n', mimetype="application/json")
