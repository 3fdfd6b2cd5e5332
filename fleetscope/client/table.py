"""kubectl-style tables: columns aligned with three spaces between them, headers in capitals,
`<none>` for empty cells, and ages as kubectl shows them (`45s`, `5m10s`, `3h`, `2d4h`, `3y`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TextIO

from fleetscope.client.terminal import escape

NONE = "<none>"
GAP = "   "


def human_age(seconds: float) -> str:
    """kubectl's HumanDuration (k8s.io/apimachinery/pkg/util/duration), same rounding."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, hours // 24 % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def age_since(timestamp: str | None, now: dt.datetime | None = None) -> str:
    """The age of an RFC 3339 timestamp, or `<unknown>` when there is none."""
    if not timestamp:
        return "<unknown>"
    try:
        then = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    return human_age((now - then).total_seconds())


def cell(value: object) -> str:
    """One table cell: empty becomes `<none>`, whitespace (newlines too) single spaces, other
    control characters visible escapes (fleetscope.client.terminal)."""
    text = " ".join(str(value).split()) if value is not None else ""
    return escape(text) or NONE


def write_table(
    out: TextIO,
    header: Sequence[str] | None,
    rows: Sequence[Sequence[str]],
    widths: Sequence[int] = (),
) -> list[int]:
    """Rows aligned on their own widths (and the header's, when given), never narrower than
    `widths` (those of earlier pages, so columns only ever widen as pages arrive). The last
    column is not padded: a long message does not put trailing spaces on every line.
    Returns the widths used. Every cell is escaped (fleetscope.client.terminal), whoever built it."""
    lines = [[escape(c) for c in line] for line in ([header] if header else []) + list(rows)]
    if not lines:
        return list(widths)
    used = [max(len(line[i]) for line in lines) for i in range(len(lines[0]) - 1)]
    used = [max(w, widths[i] if i < len(widths) else 0) for i, w in enumerate(used)]
    for line in lines:
        padded = [c.ljust(w) for c, w in zip(line, used, strict=False)] + [line[-1]]
        out.write(GAP.join(padded).rstrip() + "\n")
    return used
