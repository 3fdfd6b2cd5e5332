"""`fleetscope get -w/--watch`: kubectl's list-then-watch. The list is printed (unless
`--watch-only`), then each change as it comes from `GET /api/v1/watch`, resumed from the last
event's id after a dropped connection (a second later after a 503 or 429: the server's stream
process restarting, or full) and listed again after a 410 Expired. Ctrl-C exits 0.

Table output prints each change as a row (with `--output-watch-events`, an EVENT column first:
the list's rows are ADDED); json and yaml print one document per object (with
`--output-watch-events`, `{"type": ..., "object": ...}` as kubectl does); name prints names.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

import requests

from fleetscope.client import listing
from fleetscope.client.errors import ClientError
from fleetscope.client.features import OBJECTS
from fleetscope.client.printers import TablePrinter, dump_yaml, object_name
from fleetscope.client.table import write_table
from fleetscope.client.terminal import escape, json_text
from fleetscope.client.transport import Api, Params

WATCH = "/api/v1/watch"
ROW_EVENTS = ("ADDED", "MODIFIED", "DELETED")
RETRY_S = 1.0
"""Pause before resuming a watch the server answered 503 or 429 (streams restarting, full)."""


class EventPrinter:
    """One change at a time, in the chosen format."""

    def __init__(
        self, out: TextIO, fmt: str, events: bool, headers: bool, blocked_by: bool
    ) -> None:
        self.out, self.fmt, self.events, self.headers = out, fmt, events, headers
        self.table = TablePrinter(out, fmt == "wide", blocked_by, headers)
        self.rows = 0

    def event(self, kind: str, row: dict[str, Any]) -> None:
        if self.fmt in ("table", "wide"):
            cells = self.table.cells(row)
            header = None
            if self.headers and self.rows == 0:
                header = self.table.columns()
                header = ["EVENT", *header] if self.events else header
            line = [kind, *cells] if self.events else cells
            self.table.widths = write_table(self.out, header, [line], self.table.widths)
        elif self.fmt == "name":
            name = escape(object_name(row))
            self.out.write(f"{kind} {name}\n" if self.events else f"{name}\n")
        else:
            doc: Any = {"type": kind, "object": row} if self.events else row
            if self.fmt == "json":
                self.out.write(json_text(json.dumps(doc, indent=4, ensure_ascii=False)) + "\n")
            else:
                self.out.write("---\n" + dump_yaml(doc))
        self.rows += 1
        self.out.flush()


def run(api: Api, params: Params, printer: EventPrinter, watch_only: bool) -> int:
    """List, then watch; again from a fresh list whenever the position expired."""
    try:
        while True:
            rv = _list(api, params, printer, print_rows=not watch_only)
            watch_only = False  # a list after a 410 is printed: the rows may have changed
            if not _watch(api, params, printer, rv):
                print("the watch position expired; listing again", file=sys.stderr)
    except KeyboardInterrupt:
        return 0


def _list(api: Api, params: Params, printer: EventPrinter, print_rows: bool) -> str:
    rv = ""
    for i, page in enumerate(listing.pages(api, OBJECTS, params, listing.MAX_CHUNK)):
        if i == 0:
            listing.warn_degraded(page.freshness)
            rv = page.resource_version
        if print_rows:
            for row in page.items:
                printer.event("ADDED", row)
    if not rv:
        raise ClientError("the server's lists carry no resourceVersion: it cannot watch")
    return rv


def _watch(api: Api, params: Params, printer: EventPrinter, rv: str) -> bool:
    """Print events until the position expires (False); reconnect after a dropped stream."""
    while True:
        try:
            for kind, eid, data in _events(api, params, rv):
                if eid:
                    rv = eid
                if kind == "ERROR":
                    if (data.get("object") or {}).get("code") == 410:
                        return False
                    raise ClientError(str((data.get("object") or {}).get("message", data)))
                if kind in ROW_EVENTS and isinstance(data.get("object"), dict):
                    printer.event(kind, data["object"])
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError):
            pass  # reconnect from the last id
        except requests.exceptions.Timeout:
            pass
        except ClientError as e:
            if e.status not in (429, 503):
                raise
            time.sleep(RETRY_S)  # the server's stream process restarting, or full: again later


def _events(api: Api, params: Params, rv: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    api.session.close()  # the stream gets a connection of its own, not the list's pooled one
    resp = api.stream(WATCH, [*params, ("resourceVersion", rv)], "text/event-stream")
    kind, eid, data = "", "", ""
    try:
        for raw in _lines(resp.raw):
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if not line:
                if kind and data:
                    yield kind, eid, json.loads(data)
                kind, eid, data = "", "", ""
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                kind = value
            elif field == "id":
                eid = value
            elif field == "data":
                data += value
    finally:
        resp.close()


def _lines(raw: Any) -> Iterator[bytes]:
    """The body's lines as soon as each is complete (requests' iter_lines waits for 512 bytes:
    a small event would sit in it until more came)."""
    read1 = getattr(raw, "read1", None)  # urllib3 2; 1.x reads a byte at a time
    buf = b""
    while True:
        chunk = read1(65536) if read1 is not None else raw.read(1)
        if not chunk:
            if buf:
                yield buf
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line
