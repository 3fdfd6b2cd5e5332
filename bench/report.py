"""What every benchmark prints and records: the machine, the run, and a results table appended to
docs/benchmarks.md, plus the one-line JSON summary on stdout."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


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
    name = sys.argv[0].rsplit("/", 1)[-1].removesuffix(".py")
    return " ".join(["./dev bench", name, *sys.argv[1:]])


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def record(
    title: str,
    summary: dict[str, Any],
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    notes: str = "",
    write_doc: bool = True,
) -> None:
    """Print the JSON summary and the table; append both, with the run's context, to the doc."""
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
    with DOC.open("a") as f:
        f.write(text)
