"""The query app for tests (`make_app`: the fleet view re-read on every request), a real HTTP
server (werkzeug, threaded) around a Flask app on a free loopback port, and raw clients that
send the request target byte for byte (no normalisation of `..` or `%2F`), each header as
given."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from werkzeug.serving import make_server

from common.settings import Settings
from query.app import create_app


def make_app(settings: Settings) -> Any:
    app = create_app(settings)
    app.extensions["fleetscope"].fleet.cache_s = 0  # tests change sync status between requests
    return app


@contextmanager
def serve(app: Any, ssl_context: Any = None) -> Iterator[str]:
    """`app` on a real HTTP server on a free loopback port: `HOST:PORT` (HTTPS with
    `ssl_context`)."""
    server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=ssl_context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def raw_get(host: str, target: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET `target` exactly as given; the answer's status and JSON body (None if not JSON)."""
    answer = request(host, target, list((headers or {}).items()))
    return answer.status, answer.body


Headers = list[tuple[str, str | bytes]]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any  # the JSON document, or None when the answer is not JSON


def request(
    host: str, target: str, headers: Headers | None = None, http_host: str | None = None
) -> Answer:
    """GET `target` byte for byte, each header as given (repeated ones repeated; bytes values
    sent as they are), with `http_host` as the Host header when given."""
    name, port = host.rsplit(":", 1)
    conn = http.client.HTTPConnection(name, int(port), timeout=10)
    try:
        conn.putrequest("GET", target, skip_host=http_host is not None, skip_accept_encoding=True)
        if http_host is not None:
            conn.putheader("Host", http_host)
        for k, v in headers or []:
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
