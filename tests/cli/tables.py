"""Reading the CLI's tables back: split on runs of spaces, the last column (MESSAGE) whole."""

from __future__ import annotations

from typing import Any

KEYS = ("cluster", "namespace", "kind", "name", "status")


def parse_table(text: str, columns: int) -> list[list[str]]:
    out = []
    for line in text.splitlines():
        cells = line.split(None, columns - 1)
        out.append(cells + [""] * (columns - len(cells)))
    return out


def expected_cells(row: dict[str, Any]) -> list[str]:
    """What the table shows for an API row, AGE left out (it moves with the clock)."""
    status = row["status"] + (",suspended" if row.get("suspended") is True else "")
    message = " ".join((row.get("message") or "").split())
    return [row["cluster"], row["namespace"] or "<none>", row["kind"], row["name"], status, message]


def shown_cells(cells: list[str]) -> list[str]:
    """A parsed table line of the default columns, AGE left out."""
    return [*cells[:5], cells[6]]
