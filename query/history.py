"""`GET /api/v1/objects/{cluster}/{namespace}/{kind}/{name}/history?limit=&continue=`: an
object's recorded transitions (common.index.history), newest first, keyset-paginated.

Visible exactly when the row would be: the caller's replicated RBAC must let them `list` the
object's kind in its namespace on a cluster they can see; otherwise the same 404 as an unknown
object. A deleted object (no row, its history kept for the retention window) is judged the same
way, by its namespace and kind; it answers `"object": null`.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, request

from common.errors import NotFound
from common.index import history, keys, rows
from query import params
from query.relations import shown_row
from query.state import caller, state

bp = Blueprint("history", __name__, url_prefix="/api/v1")
HISTORY_PARAMS = ("limit", "continue")
_TOP = b"\xff"


@bp.get("/objects/<cluster>/<namespace>/<kind>/<name>/history")
def object_history(cluster: str, namespace: str, kind: str, name: str) -> dict[str, Any]:
    user = caller()
    params.check_known(request.args, HISTORY_PARAMS)
    st = state()
    namespace, k = params.object_path(cluster, namespace, kind, name, st.registry)
    limit = params.limit(request.args)
    identity = rows.sort_key(namespace, k.key, name)
    made_for = f"{cluster}\x00{identity}"
    token = request.args.get("continue", "")
    before = st.signer.decode_history(token, made_for) if token else None
    access = st.scope(user).visible.get(cluster)
    if access is None:
        raise NotFound(f"no cluster named {cluster!r} is registered")
    where = f"{namespace}/{name}" if namespace else name
    missing = NotFound(f"no {k.key} {where} in the index of cluster {cluster}")
    if not access.may_list(namespace, k.key):  # the same answer as an unknown object
        raise missing
    member, stored = _read(cluster, identity)
    retention = history.Retention(st.settings.history_max, st.settings.history_days)
    entries = history.served(stored, retention)
    if member is None and not entries:
        raise missing
    if before is not None:
        entries = [e for e in entries if e["position"] < before]
    page, more = entries[:limit], len(entries) > limit
    after = st.signer.encode_history(page[-1]["position"], made_for) if more else None
    return {
        "object": shown_row(cluster, member, access) if member is not None else None,
        "items": page,
        "continue": after,
    }


def _read(cluster: str, identity: str) -> tuple[str | None, str]:
    """The object's stored member (None when absent) and its stored history: one round trip."""
    prefix = identity.encode()
    pipe: Any = state().r.pipeline(transaction=False)
    pipe.zrangebylex(keys.rows(cluster), b"[" + prefix, b"[" + prefix + _TOP, 0, 1)
    history.queue_get(pipe, cluster, identity)
    found, *stored = pipe.execute()
    member = found[0].decode() if found and rows.is_member(found[0]) else None
    return member, history.joined(*stored)
