"""gunicorn's threaded worker, answering the requests gunicorn itself refuses as JSON, and
handing the app each header field as it came.

gunicorn reads the request line and headers before the Flask app runs; one that is too long
(414), has too many or too large header fields (431) or is malformed (400) is answered by
gunicorn with an HTML page. This worker writes the API's JSON error document instead, so every
answer of the service is `{"error": ..., "message": ...}` (docs/security.md#edges).

WSGI joins repeated header fields with commas, so `X-Remote-Group: a` twice and
`X-Remote-Group: a,a` look alike; kube-apiserver tells them apart (docs/security.md#identities).
This worker adds the fields as received under `environ[HEADER_FIELDS]` (query.auth reads it).

A watch stream (`GET /api/v1/watch`) is answered like any request (same auth, Host check and
headers, on a request thread); once its head is written, the connection's socket is handed to
the stream process (query.stream_server, over query.watch_handoff) with the response head, which
that process writes once the stream is admitted; the request thread is free again: the body is delimited by closing the connection (`Connection: close`, no chunking),
as HTTP/1.1 allows. A TLS connection (gunicorn's own TLS) cannot change process: it is served
on its request thread (query.watch).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from query import stream_supervisor

HEADER_FIELDS = "fleetscope.header_fields"
"""environ key: the request's header fields, ((UPPER-CASE NAME, value), ...), as received."""
HANDOFF = "fleetscope.watch.handoff"
"""environ key: the stream process's socket, where this connection can be handed (query.watch)."""
SUBSCRIPTION = "fleetscope.watch.subscription"
"""environ key the watch view sets: (link, handoff) to send the socket with once answered."""
_current = threading.local()  # the request a gthread thread is answering
_log = logging.getLogger(__name__)

ERRORS_BY_STATUS = {
    400: ("bad_request", "the request could not be parsed as HTTP/1.1"),
    414: ("uri_too_long", "the request line (URL and query) is too long; send fewer filters"),
    431: (
        "request_header_fields_too_large",
        "too many request headers, or one too large; send fewer or smaller headers",
    ),
}


def error_document(status: int, reason: str) -> tuple[str, bytes]:
    """The status line's reason and the JSON body for a status gunicorn answers itself."""
    code, message = ERRORS_BY_STATUS.get(
        status, ("internal", "internal error; the server log has details")
    )
    if status not in ERRORS_BY_STATUS and 400 <= status < 500:
        code, message = reason.lower().replace(" ", "_"), reason
    return reason, json.dumps({"error": code, "message": message}).encode()


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's replacement: the same status, as JSON, the connection closed.
    gunicorn's own message (`mesg`) may quote the request: it is left out."""
    reason, body = error_document(status_int, reason)
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        "Cache-Control: no-store\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


class JsonErrorWorker(ThreadWorker):  # type: ignore[misc]
    """The `gthread` worker whose own error answers are JSON (module docstring)."""

    def init_process(self) -> None:
        # gunicorn's Worker.handle_error writes through gunicorn.util.write_error: replaced in
        # this worker process only (the arbiter and other programs keep gunicorn's).
        util.write_error = write_json_error
        super().init_process()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        app: Callable[..., Iterable[bytes]] = self.wsgi  # type: ignore[has-type]

        def with_fields(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
            req = getattr(_current, "req", None)
            conn = getattr(_current, "conn", None)
            if req is not None:
                environ[HEADER_FIELDS] = tuple(req.headers)
            streams = stream_supervisor.socket_path()
            if streams and conn is not None and not isinstance(conn.sock, ssl.SSLSocket):
                environ[HANDOFF] = streams
            result: Iterable[bytes] = app(environ, start)
            handed = environ.pop(SUBSCRIPTION, None)
            if handed is not None and conn is not None:
                return hand_over(handed, start, result, conn)
            return result

        self.wsgi = with_fields

    def handle_request(self, req: Any, conn: Any) -> Any:
        _current.req, _current.conn = req, conn  # the app runs on this thread, in this call
        try:
            return super().handle_request(req, conn)
        finally:
            _current.req = _current.conn = None


def hand_over(
    handed: tuple[Any, Any],
    start: Callable[..., Any],
    result: Iterable[bytes],
    conn: Any,
) -> Iterable[bytes]:
    """Send the socket to the stream process with the response's head, which it writes once
    the stream is admitted (a client that has the head is sure to get every later change);
    gunicorn then sees an empty body and lets (a stand-in for) the connection go."""
    link, handoff = handed
    resp = getattr(start, "__self__", None)
    if resp is None or getattr(resp, "status_code", None) != 200:
        link.close()
        return result
    if hasattr(result, "close"):
        result.close()
    resp.chunked = False
    resp.response_length = None  # the body ends with the connection
    resp.headers = [(k, v) for k, v in resp.headers if k.lower() != "content-length"]
    resp.force_close()
    head = _Captured()
    resp.sock = head
    resp.send_headers()  # gunicorn's own head, kept for the stream process
    # gunicorn closes the connection once this request is done (a half-close, which would end
    # the stream whatever fd is left): it gets an unconnected socket to close instead.
    real, conn.sock = conn.sock, socket.socket()
    resp.sock = conn.sock
    try:
        link.hand(real, dataclasses.replace(handoff, preamble=head.data + handoff.preamble))
    except OSError as e:  # the client or the stream process went away: the client resumes
        _log.warning("watch stream not handed over: %s", e)
    finally:
        link.close()
        real.close()  # this process's descriptor only: the stream process holds its own
    return []


class _Captured:
    """Stands for the client's socket while gunicorn writes the response head."""

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data
