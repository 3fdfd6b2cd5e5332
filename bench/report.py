"""What every benchmark prints and records: the machine, the run, and its results table, plus the
one-line JSON summary on stdout.

docs/benchmarks.md gets the table twice: appended to the history at the end, and in the run's
current table near the top, the block between `<!-- current:KEY -->` and `<!-- /current:KEY -->`
whose KEY is the run's (`current_key`). A run of some of a table's rows (`--profile`) replaces
those rows and keeps the others, each row naming its run; a run with other columns replaces the
whole table. A run whose key has no block in the doc goes to the history only.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
RUN = "run"
"""The column a current table adds: the date of the run each row comes from."""
SAME_CONDITIONS = frozenset(
    {
        "--preset",  # in the title, or in the table's fleet column
        "--presets",
        "--shape",
        "--profile",  # which rows
        "--redis-url",  # where the fleet already is
        "--no-doc",
        "--seconds",  # how long
        "--slices",
        "--warmup",
        "--runs",
        "--requests",
    }
)
"""Flags that choose which rows a run measures, where its fleet is or how long it measures. Any
other flag (`--churn 100`, `--distinct`, `--connections 32`) measures under other conditions:
it is part of the run's key, so the run updates a current table of its own, if the doc has one."""
_CELL_SEP = re.compile(r"(?<!\\)\|")


def machine() -> dict[str, Any]:
    """CPU count and model, memory, Python: the context a number needs."""
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration):
        mem_kb = 0
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "mem_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
    }


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=DOC.parent.parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def command() -> str:
    """The run's command line, quoted so that it can be pasted back."""
    name = sys.argv[0].rsplit("/", 1)[-1].removesuffix(".py")
    return shlex.join(["./dev", "bench", name, *sys.argv[1:]])


def current_key(title: str, args: Sequence[str]) -> str:
    """The current table a run updates: its title, plus the flags (and their values) outside
    `SAME_CONDITIONS`, as given: `query: list pages at fleet L [--churn 100 --churn-rows]`."""
    conditions: list[str] = []
    keep = False
    for arg in args:
        if arg.startswith("--"):
            keep = arg.split("=", 1)[0] not in SAME_CONDITIONS
        if keep:
            conditions.append(arg)
    return f"{title} [{' '.join(conditions)}]" if conditions else title


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|")


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _rule(n: int) -> str:
    return "|" + "|".join("---" for _ in range(n)) + "|"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = [_line([_cell(h) for h in header]), _rule(len(header))]
    lines += [_line([_cell(c) for c in row]) for row in rows]
    return "\n".join(lines)


def _cells(line: str) -> list[str]:
    """A table line's cells as written (escaped pipes stay escaped)."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip() for c in _CELL_SEP.split(inner)]


def _parse_block(body: str) -> tuple[list[str], list[list[str]], dict[str, str]]:
    """A current block's header (with its run column), rows and runs (date -> context line)."""
    lines = [ln for ln in body.splitlines() if ln.strip()]
    table_lines = [ln for ln in lines if ln.lstrip().startswith("|")]
    runs = {ln[2:].split(",", 1)[0]: ln[2:] for ln in lines if ln.startswith("- ") and "," in ln}
    if len(table_lines) < 2:
        return [], [], runs
    return _cells(table_lines[0]), [_cells(ln) for ln in table_lines[2:]], runs


def _unique_keys(rows: Sequence[Sequence[str]]) -> bool:
    keys = [r[0] for r in rows if r]
    return len(keys) == len(set(keys))


def _insert_new_rows(
    merged: list[list[str]], new: Sequence[list[str]], old_keys: set[str]
) -> list[list[str]]:
    """Each new row after the row that precedes it in its run, or before the old row that
    follows it there, or at the end."""
    for i, row in enumerate(new):
        if row[0] in old_keys:
            continue
        at = [r[0] for r in merged]
        before = [r[0] for r in new[:i] if r[0] in at]
        after = [r[0] for r in new[i + 1 :] if r[0] in old_keys]
        if before:
            merged.insert(at.index(before[-1]) + 1, row)
        elif after:
            merged.insert(at.index(after[0]), row)
        else:
            merged.append(row)
    return merged


def merge_current(body: str, header: Sequence[str], rows: Sequence[list[str]], ctx: str) -> str:
    """A current block's new text: the run's rows replace those with the same first cell and
    the others stay (when the columns are the same and first cells unique), else the run's
    table replaces the block; the runs the rows come from are listed under the table."""
    run_id = ctx.split(",", 1)[0]
    new = [[*row, run_id] for row in rows]
    full_header = [*header, RUN]
    old_header, old_rows, runs = _parse_block(body)
    if old_header == full_header and _unique_keys(old_rows) and _unique_keys(new):
        by_key = {r[0]: r for r in new}
        merged = [by_key.get(r[0], r) for r in old_rows]
        merged = _insert_new_rows(merged, new, {r[0] for r in old_rows})
    else:
        merged, runs = new, {}
    runs[run_id] = ctx
    used = sorted({r[-1] for r in merged if r[-1] in runs}, reverse=True)
    lines = [_line(full_header), _rule(len(full_header)), *(_line(r) for r in merged)]
    return "\n".join(["", *lines, "", *(f"- {runs[u]}" for u in used), ""])


def update_current(
    doc: str, key: str, header: Sequence[Any], rows: Sequence[Sequence[Any]], ctx: str
) -> str | None:
    """`doc` with the block of `key` updated by the run (`merge_current`), or None when the doc
    has no block for that key."""
    start, end = f"<!-- current:{key} -->", f"<!-- /current:{key} -->"
    i = doc.find(start)
    j = doc.find(end, i + len(start)) if i >= 0 else -1
    if j < 0:
        return None
    cells = [[_cell(c) for c in row] for row in rows]
    body = merge_current(doc[i + len(start) : j], [_cell(h) for h in header], cells, ctx)
    return doc[: i + len(start)] + body + doc[j:]


def record(
    title: str,
    summary: dict[str, Any],
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    notes: str = "",
    write_doc: bool = True,
) -> None:
    """Print the JSON summary and the table; append both, with the run's context, to the doc's
    history, and update the run's current table there (`update_current`)."""
    m = machine()
    context = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "command": command(),
        "load_avg_end": load_average(),
        **m,
    }
    summary = {**summary, **context}
    body = table(header, rows)
    print(body, file=sys.stderr)
    print(json.dumps(summary, sort_keys=False))
    if not write_doc:
        return
    ctx = (
        f"{context['date']}, commit `{context['commit']}`, `{context['command']}`; "
        f"{m['nproc']} x {m['cpu']}, {m['mem_gb']} GB RAM, Python {m['python']}; "
        f"load average at the end {context['load_avg_end']}"
    )
    text = f"\n### {title}\n\n{ctx}\n\n{body}\n"
    if notes:
        text += f"\n{notes}\n"
    _write_doc(current_key(title, sys.argv[1:]), header, rows, ctx, text)


def _write_doc(
    key: str, header: Sequence[Any], rows: Sequence[Sequence[Any]], ctx: str, history: str
) -> None:
    """Append the run's record to the doc and update its current table, if the doc has one."""
    doc = DOC.read_text() + history
    updated = update_current(doc, key, header, rows, ctx)
    DOC.write_text(doc if updated is None else updated)
    where = "history only" if updated is None else "history and current table"
    print(f"{DOC.name}: {where} ({key})", file=sys.stderr)
