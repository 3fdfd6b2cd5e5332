"""gunicorn's threaded worker, answering the requests gunicorn itself refuses as JSON, and
handing the app each header field as it came.

gunicorn reads the request line and headers before the Flask app runs; one that is too long
(414), has too many or too large header fields (431) or is malformed (400) is answered by
gunicorn with an HTML page. This worker writes the API's JSON error document instead, so every
answer of the service is `{"error": ..., "message": ...}` (docs/security.md#edges).

WSGI joins repeated header fields with commas, so `X-Remote-Group: a` twice and
`X-Remote-Group: a,a` look alike; kube-apiserver tells them apart (docs/security.md#identities).
This worker adds the fields as received under `environ[HEADER_FIELDS]` (query.auth reads it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

HEADER_FIELDS = "fleetscope.header_fields"
"""environ key: the request's header fields, ((UPPER-CASE NAME, value), ...), as received."""
_current = threading.local()  # the request a gthread thread is answering

CODES = {
    400: ("bad_request", "the request could not be parsed as HTTP/1.1"),
    414: ("uri_too_long", "the request line (URL and query) is too long; send fewer filters"),
    431: (
        "request_header_fields_too_large",
        "too many request headers, or one too large; send fewer or smaller headers",
    ),
}


def error_document(status: int, reason: str) -> tuple[str, bytes]:
    """The status line's reason and the JSON body for a status gunicorn answers itself."""
    code, message = CODES.get(status, ("internal", "internal error; the server log has details"))
    if status not in CODES and 400 <= status < 500:
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
            if req is not None:
                environ[HEADER_FIELDS] = tuple(req.headers)
            result: Iterable[bytes] = app(environ, start)
            return result

        self.wsgi = with_fields

    def handle_request(self, req: Any, conn: Any) -> Any:
        _current.req = req  # the app runs on this thread, inside this call
        try:
            return super().handle_request(req, conn)
        finally:
            _current.req = None
