"""JSON bodies of list pages, built from per-row JSON text cached by stored member.

A row's JSON is a pure function of its cluster and stored member (RBAC decided which members a
page holds before this point), so pages that repeat rows (dashboards polling the same first
pages) join cached text instead of decoding and encoding 50 rows each time. The one part that
depends on the caller, `blockedBy` (shown only when they may list that node), is cached beside
the text and spliced in per request, and so is the one that depends on the time,
`transitions24h` (counted from the row's recent transitions: none for most rows).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from flask import Response

from common.index import rows
from common.index.edges import decode_blocker
from common.index.read import facets as reader_facets
from common.index.read import memo
from common.index.read.memo import Memo
from common.index.read.reader import Facets
from common.rbac.grants import Access

ROWS_CACHED = 16_384
"""Row texts kept per process (~0.6 KB each with the key: ~10 MB at most)."""


class _Blocker(NamedTuple):
    namespace: str
    kind: str


class _Cached(NamedTuple):
    text: str
    """The row's JSON without `blockedBy`."""
    blocker: _Blocker | None
    blocked_text: str
    """The row's JSON with its `blockedBy` (the same as `text` when it has none)."""
    times: tuple[int, ...]
    """Its recent transitions' times (common.index.rows), sorted: `transitions24h` is counted
    per request (by bisection, not by parsing them again for every row of every page). Both
    texts are held without their closing brace."""


_rows: dict[tuple[str, bytes], _Cached] = {}
memo.on_sweep(_rows.clear)  # rows of pages asked since the last sweep, not of the whole run
memo.on_sweep(rows.clear_caches)  # the rows' decoded times, likewise


def _render(cluster: str, member: bytes) -> _Cached:
    text = rows.timeless_row_json(cluster, member)[:-1]  # the closing brace comes per request
    stored = member.decode()
    times = tuple(sorted(rows.recent_times(rows.recent_of(stored))[1]))
    blocked = decode_blocker(cluster, rows.blocked_of(stored))
    if blocked is None:
        return _Cached(text, None, text, times)
    spliced = f'{text},"blockedBy":{json.dumps(blocked, separators=(",", ":"))}'
    return _Cached(text, _Blocker(blocked["namespace"], blocked["kind"]), spliced, times)


def _closed(text: str, times: tuple[int, ...], now: float) -> str:
    """A cached row's text with its `transitions24h` as of now (it slides with time)."""
    if not times:
        return text + ',"transitions24h":0}'
    return f'{text},"transitions24h":{rows.within_24h(times, now)}}}'


def row_texts(
    members: list[tuple[str, bytes]], access: Mapping[str, Access] | None = None
) -> list[str]:
    """Each (cluster, member)'s row as JSON text, from the cache where present, with its
    `blockedBy` where `access` (per cluster: the caller's) lets them list the blocking node."""
    hits = [_rows.get(m) for m in members]
    fresh: dict[tuple[str, bytes], _Cached] = {}
    if None in hits:
        fresh = {m: _render(*m) for m, hit in zip(members, hits, strict=True) if hit is None}
        if len(_rows) + len(fresh) > ROWS_CACHED:
            _rows.clear()  # crude but bounded; a changed row is a new member, never a stale hit
        _rows.update(fresh)
    found = [hit or fresh[m] for m, hit in zip(members, hits, strict=True)]
    out = []
    now = time.time()
    for (cluster, _), row in zip(members, found, strict=True):
        blocker = row.blocker
        if blocker is None or access is None:
            out.append(_closed(row.text, row.times, now))
            continue
        a = access.get(cluster)
        shown = a is not None and a.may_list(blocker.namespace, blocker.kind)
        out.append(_closed(row.blocked_text if shown else row.text, row.times, now))
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


def _label_values(counts: Facets, label_keys: tuple[str, ...]) -> dict[str, Any]:
    """`labels` (per asked key, its top values with their rows) and `labelsOmitted` (per key
    with more values than shown: how many values and rows were left out)."""
    shown: dict[str, dict[str, int]] = {}
    omitted: dict[str, dict[str, int]] = {}
    for k in label_keys:
        top, values, rows_left = reader_facets.top_values(counts.labels.get(k, {}))
        shown[k] = top
        if values:
            omitted[k] = {"values": values, "rows": rows_left}
    return {"labels": shown, "labelsOmitted": omitted}


FACETS_CACHED = 128
_facets: Memo[tuple[int, tuple[str, ...]], str] = Memo(FACETS_CACHED, "body.facets")
"""Encoded facets answers by the counts they encode (its owner: held, so its id stays its
own). At fleet L one is 0.5-0.8 MB: the count alone (once 1,024, cleared when full) let a
worker's RSS climb by hundreds of MB under writes, each write making new counts, so it is a
named memo, in the budget (`FLEETSCOPE_QUERY_MEMO_MIB`), least recently used first out."""


_ns_texts: Memo[int, str] = Memo(FACETS_CACHED, "body.namespaces")
"""Encoded `namespaces` of facets answers by the dict they encode (its owner): the reader
shares one while the caller's rows per namespace do not move, so an answer after a
transition (which moves statuses, not namespaces) does not sort and encode thousands again."""


def _namespaces_text(namespaces: dict[str, int]) -> str:
    """`namespaces` as JSON; `_`: cluster-scoped rows, as the namespace filter and object
    paths name them."""
    text = _ns_texts.get(id(namespaces), owner=namespaces)
    if text is None:
        shown = {ns or "_": n for ns, n in sorted(namespaces.items())}
        text = json.dumps(shown, separators=(",", ":"))
        _ns_texts.put(id(namespaces), text, owner=namespaces)  # held: its id stays its own
    return text


def facets_response(
    counts: Facets,
    freshness: dict[str, Any],
    label_keys: tuple[str, ...] = (),
    by: str = "",
) -> Response:
    """`{"total", "clusters", "kinds", "statuses", "suspended", "namespaces", "freshness"}`
    as a JSON response (`namespaces` not with `by`; `labels` with `label_keys`). The counts' part is encoded once per result the reader shares (its remembered
    facets keep their dicts while no cluster is written), so a fleet's 200-cluster object is
    not sorted and encoded again on every request (with `label_keys`: per keys asked, the
    answer's labels being shared with it)."""
    key = (id(counts.clusters), label_keys)
    text = _facets.get(key, owner=counts.clusters)
    if text is None:
        members = {
            "total": counts.total,
            "clusters": dict(sorted(counts.clusters.items())),
            "kinds": dict(sorted(counts.kinds.items())),
            "statuses": dict(sorted(counts.statuses.items())),
            "suspended": {flag: counts.suspended.get(flag, 0) for flag in ("true", "false")},
        }
        text = json.dumps(members, separators=(",", ":"))[1:-1]
        if not by:  # rows per namespace (group counts have none)
            text += ',"namespaces":' + _namespaces_text(counts.namespaces)
        if label_keys:
            labels = _label_values(counts, label_keys)
            text += "," + json.dumps(labels, separators=(",", ":"))[1:-1]
        _facets.put(key, text, owner=counts.clusters)  # held: its id stays its own
    fresh = json.dumps(freshness, separators=(",", ":"))
    return Response(f'{{{text},"freshness":{fresh}}}\n', mimetype="application/json")
