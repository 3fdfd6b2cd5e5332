"""A stand-in HTTP server for answers the real query service cannot be made to give on demand
(a 5xx, a proxy's HTML, a newer OpenAPI document): routes map a path to a status and a body,
or to a function of the query; every request is recorded with its headers."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Answer = tuple[int, Any]  # (status, JSON-able body, or bytes sent as text/html)
Route = Answer | Callable[[dict[str, list[str]]], Answer]


class FakeApi:
    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self.fields: list[list[tuple[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                fake.requests.append((url.path, query, dict(self.headers)))
                fake.fields.append(list(self.headers.items()))  # repeated fields kept
                route = fake.routes.get(
                    url.path, (404, {"error": "not_found", "message": "no route"})
                )
                status, body = route(query) if callable(route) else route
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                kind = "text/html" if isinstance(body, bytes) else "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def paths(self) -> list[str]:
        return [p for p, _, _ in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
