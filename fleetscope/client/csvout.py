"""`-o csv`: the server's CSV export (`Accept: text/csv`, every page of the query in one
answer) re-written record by record, so `--limit` and `--no-headers` apply and, on a terminal,
control characters in leaf-written text are shown escaped rather than obeyed."""

from __future__ import annotations

import codecs
import csv
import sys
from collections.abc import Iterator
from typing import TextIO

from fleetscope.client import terminal
from fleetscope.client.errors import BadInput
from fleetscope.client.transport import Api, Params

CSV = "text/csv"


def write(
    api: Api,
    path: str,
    params: Params,
    out: TextIO = sys.stdout,
    limit: int | None = None,
    headers: bool = True,
) -> int:
    """Write the export of `path` under `params` to `out`; the number of records written."""
    features = api.features()
    if features.known and path not in features.csv_paths:
        raise BadInput("this server does not export CSV (-o csv needs a newer fleetscope server)")
    terminal = out.isatty()
    resp = api.stream(path, params, CSV)
    try:
        text = codecs.iterdecode(resp.iter_content(64 * 1024), "utf-8")
        writer = csv.writer(out, lineterminator="\n" if terminal else "\r\n")
        shown = 0
        for n, record in enumerate(csv.reader(_lines(text))):
            if n == 0 and not headers:
                continue
            if n > 0 and limit is not None and shown >= limit:
                break
            writer.writerow([_visible(c) for c in record] if terminal else record)
            shown += n > 0
        return shown
    finally:
        resp.close()


def _visible(cell: str) -> str:
    return terminal.escape(cell, keep="\t\n")


def _lines(chunks: Iterator[str]) -> Iterator[str]:
    """Decoded chunks as lines that keep their line ends (csv joins quoted line breaks)."""
    rest = ""
    for chunk in chunks:
        *done, rest = (rest + chunk).split("\n")
        for line in done:
            yield line + "\n"
    if rest:
        yield rest
