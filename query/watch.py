"""`GET /api/v1/watch`: the caller's visible row changes as Server-Sent Events (query.watch_hub
serves them), and the `resourceVersion` every list answer carries (query.positions).

`resourceVersion` (or the `Last-Event-ID` header) resumes after that position with no gap and
no duplicate; absent, "" or "0" (Kubernetes' "state, then changes") sends the rows the caller
may list as ADDED first. Under query.gunicorn_worker the request thread only authenticates,
validates and (without a resourceVersion) lists; the socket then goes to the stream process
(query.stream_server; 503 when it is not reachable). A server that cannot hand sockets over
(werkzeug's, the Flask test client, gunicorn's own TLS) streams from this process's in-thread
hub on the request's own thread.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, request

from common.errors import InvalidInput, TooBusy
from common.index import feed
from common.index.read import tally
from common.index.read.reader import PageRequest
from query import body, listing, params, positions, watch_events, watch_handoff, watch_hub
from query.gunicorn_worker import HANDOFF, SUBSCRIPTION
from query.state import QueryState, caller, state
from query.watch_sinks import QueueSink

bp = Blueprint("watch", __name__, url_prefix="/api/v1")

FILTER_PARAMS = (
    "cluster",
    "namespace",
    "kind",
    "status",
    "suspended",
    "name",
    "flapping",
    "labelSelector",
)
WATCH_PARAMS = (
    *FILTER_PARAMS,
    "resourceVersion",
    "allowWatchBookmarks",
    "watch",
    "timeoutSeconds",
)
TIMEOUT_S = (1800, 3600)
"""A stream ends after a random time in this range (kube-apiserver's watch timeout, from its
`--min-request-timeout` of 1800 s), or after `timeoutSeconds`: the client reconnects with its
last id and is authenticated again."""
INITIAL_MAX = 10_000
"""Rows a watch without resourceVersion sends as ADDED; more: list (pages) then watch."""
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


_last_position: tuple[Any, list[str], list[Any], str] | None = None
"""(signer, clusters, their generations, the token): the last list position made here."""


@contextlib.contextmanager
def list_position(st: QueryState) -> Iterator[str]:
    """The fleet position of a list about to be read in the block: each registered cluster's
    generation, read before the rows (a change racing the list may come again as an event,
    never lost; a cluster registered since the fleet view's last read is absent: watched from
    its start). The page read in the block uses the same read of the generations and the
    grants version (`tally.read_once`) instead of reading them again."""
    names = st.fleet.known()
    with tally.read_once(st.r, names) as gens:
        yield _position_token(st, names, gens)


def _position_token(st: QueryState, names: list[str], gens: list[Any]) -> str:
    """The signed token of these generations. The token of the last generations read is reused
    while they hold: encoding and signing 1,000 clusters' positions was half of a list page's
    time at fleet XL."""
    global _last_position
    last = _last_position
    if last is not None and last[0] is st.signer and last[2] == gens and last[1] == names:
        return last[3]
    token = positions.encode_generations(st.signer, names, gens)
    _last_position = (st.signer, names, list(gens), token)
    return token


@bp.get("/watch")
def watch() -> Response:
    st, user = state(), caller()
    params.check_known(request.args, WATCH_PARAMS)
    filters = params.filters(request.args, st.registry, st.settings.flapping_threshold)
    rv = request.args.get("resourceVersion") or request.headers.get("Last-Event-ID", "")
    streams: str | None = request.environ.get(HANDOFF)
    hub = None if streams else watch_hub.hub(st)
    if hub is not None and hub.streams >= st.settings.watch_streams_max:
        raise TooBusy("this service serves as many watch streams as it may; retry later")
    ends_in_s = _timeout_s()
    preamble: list[bytes] = []
    if rv in ("", "0"):
        names = st.fleet.known()
        token = _position_token(st, names, tally.generations(st.r, names)[0])
        start = positions.decode(st.signer, token)
        preamble = _initial(st, user, filters, token)
    else:
        token, start = rv, positions.decode(st.signer, rv)
    if streams:
        link = watch_handoff.connect(streams)  # 503 when not reachable, 429 when full
        args = tuple((k, v) for k, v in request.args.items(multi=True) if k in FILTER_PARAMS)
        handoff = watch_handoff.Handoff(
            user.name, user.groups, args, token, ends_in_s, b"".join(preamble)
        )
        request.environ[SUBSCRIPTION] = (link, handoff)
        return Response(iter(()), 200, HEADERS, mimetype="text/event-stream")
    assert hub is not None
    sub = watch_hub.Subscription(user, filters, start, preamble)
    sub.ends_at = time.monotonic() + ends_in_s
    sink = QueueSink()
    sub.sink = sink
    hub.subscribe(sub)
    return Response(sink.drain(), 200, HEADERS, mimetype="text/event-stream")


def _timeout_s() -> float:
    raw = request.args.get("timeoutSeconds")
    if raw is None:
        return random.uniform(*TIMEOUT_S)
    if not raw.isdigit() or not 1 <= int(raw) <= TIMEOUT_S[1]:
        raise InvalidInput("timeoutSeconds", f"whole seconds, 1..{TIMEOUT_S[1]}")
    return float(raw)


def _initial(st: QueryState, user: Any, filters: Any, token: str) -> list[bytes]:
    """The rows the caller may list, as ADDED events (at most INITIAL_MAX)."""
    out: list[bytes] = []
    cursor = None
    while True:
        page, scope = listing.list_page(st, user, PageRequest(filters, 500, cursor))
        texts = body.row_texts(page.members, scope.visible)
        out += [watch_events.row_event(feed.ADDED, t, token) for t in texts]
        if len(out) > INITIAL_MAX:
            raise InvalidInput(
                "resourceVersion",
                f"more than {INITIAL_MAX} rows match; list them (with `continue`) and watch "
                "from the list's `resourceVersion`, or narrow the filters",
            )
        if page.cursor is None:
            return out
        cursor = page.cursor
