"""What one row change is to one watch stream: its filters and access decide the event type
(a filtered watch, as Kubernetes' cacher filters label selectors), and the row's JSON is the
list API's for this caller (query.body). Server-Sent Events framing is here too."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from common.index import feed, rows
from common.index.feed import Change
from common.index.read.reader import Filters
from common.rbac.grants import Access
from query import body


def matches(filters: Filters, cluster: str, member: bytes, now: float | None = None) -> bool:
    """True when the row passes the list filters (the reader's semantics, for one row)."""
    ns, kind, name, code, _ = rows.head(member.decode())
    f = filters
    if (f.clusters and cluster not in f.clusters) or (f.namespaces and ns not in f.namespaces):
        return False
    if (f.kinds and kind not in f.kinds) or (f.name and f.name not in name):
        return False
    if f.statuses and rows.CODE_STATUS[code] not in f.statuses:
        return False
    if f.suspended is not None and (code in rows.SUSPENDED_CODES) is not f.suspended:
        return False
    if f.labels and not f.labels.matches(rows.labels_of(member)):
        return False
    if f.flapping:
        return rows.transitions_24h(rows.recent_of(member.decode()), now) >= f.flapping
    return True


def visible(access: Mapping[str, Access], cluster: str, member: bytes) -> bool:
    """True when the caller may `list` this row's kind in its namespace on its cluster."""
    a = access.get(cluster)
    if a is None:
        return False
    ns, kind, _name, _code, _ = rows.head(member.decode())
    return a.may_list(ns, kind)


def event_for(
    filters: Filters, access: Mapping[str, Access], change: Change
) -> tuple[str, bytes] | None:
    """The event this change is for a stream (type, the member to show), or None.

    A MODIFIED row that enters the filter is ADDED; one that leaves it is DELETED, shown as it
    was (Kubernetes sends the previous object); one outside before and after is not sent."""
    if not visible(access, change.cluster, change.member):
        return None
    c = change.cluster
    if change.type == feed.DELETED:
        return (feed.DELETED, change.member) if matches(filters, c, change.member) else None
    now_in = matches(filters, c, change.member)
    if change.type == feed.ADDED:
        return (feed.ADDED, change.member) if now_in else None
    before = change.before or b""
    was_in = bool(before) and matches(filters, c, before)
    if now_in:
        return (feed.MODIFIED if was_in else feed.ADDED), change.member
    return (feed.DELETED, before) if was_in else None


def row_text(access: Mapping[str, Access], cluster: str, member: bytes) -> str:
    """The row's JSON exactly as a list page shows it to this caller."""
    return body.row_texts([(cluster, member)], access)[0]


def frame(kind: str, data: str, event_id: str | None = None) -> bytes:
    """One Server-Sent Event: `event: <TYPE>`, `id: <resourceVersion>`, `data: <json>`."""
    head = f"event: {kind}\n" + (f"id: {event_id}\n" if event_id else "")
    return f"{head}data: {data}\n\n".encode()


def row_event(kind: str, row_json: str, event_id: str) -> bytes:
    return frame(kind, f'{{"type":"{kind}","object":{row_json}}}', event_id)


def bookmark(event_id: str) -> bytes:
    obj = {"kind": "Bookmark", "resourceVersion": event_id}
    return frame("BOOKMARK", _dumps({"type": "BOOKMARK", "object": obj}), event_id)


def status(freshness: Mapping[str, Any]) -> bytes:
    return frame("STATUS", _dumps({"type": "STATUS", "object": dict(freshness)}))


def expired(message: str) -> bytes:
    """Kubernetes' answer to a watch from a position past retention (a metav1.Status)."""
    obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": 410,
        "reason": "Expired",
        "message": message,
    }
    return frame("ERROR", _dumps({"type": "ERROR", "object": obj}))


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
