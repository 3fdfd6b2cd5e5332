"""A real HTTP server (werkzeug, threaded) around a Flask app on a free loopback port, and a raw
client that sends the request target byte for byte (no normalisation of `..` or `%2F`)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from werkzeug.serving import make_server


@contextmanager
def serve(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def raw_get(host: str, target: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET `target` exactly as given; the answer's status and JSON body (None if not JSON)."""
    name, port = host.split(":")
    conn = http.client.HTTPConnection(name, int(port), timeout=10)
    try:
        conn.putrequest("GET", target, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, None
