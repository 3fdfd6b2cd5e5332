"""A client of `GET /api/v1/watch`'s server-sent events, read as the query service frames them
(no Content-Length, no chunks: the body ends when the connection does)."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any


class Stream:
    """An SSE client: events as (type, id, data) read with a deadline."""

    def __init__(self, host: str, path: str, headers: dict[str, str]) -> None:
        self.conn = http.client.HTTPConnection(*host.split(":"), timeout=15)
        self.conn.request("GET", path, headers=headers)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = dict(self.resp.getheaders())

    def next(self) -> tuple[str, str | None, Any]:
        kind, eid, data = "", None, ""
        while True:
            line = self.resp.readline().decode()  # as framed: no Content-Length, no chunks
            if not line:
                raise EOFError("stream closed")
            line = line.rstrip("\n")
            if not line:
                if kind:
                    return kind, eid, json.loads(data)
                continue
            field, _, value = line.partition(": ")
            if field == "event":
                kind = value
            elif field == "id":
                eid = value
            elif field == "data":
                data = value

    def rows(self, count: int, skip: tuple[str, ...] = ("BOOKMARK", "STATUS")) -> list[Any]:
        """The next `count` events but those skipped (bookmarks keep coming: a deadline)."""
        out = []
        deadline = time.monotonic() + 15
        while len(out) < count:
            assert time.monotonic() < deadline, f"only {out} in 15 s"
            kind, eid, data = self.next()
            if kind not in skip:
                out.append((kind, eid, data))
        return out

    def close(self) -> None:
        self.resp.close()
        self.conn.close()
