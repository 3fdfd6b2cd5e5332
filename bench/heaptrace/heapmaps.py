"""Where a process's resident memory lies (a soak's heap diagnosis): its mappings' RSS by kind
(`smaps_kib`) and Python's small-object allocator's arenas (`pymalloc`). Imported as
`bench.heaptrace.heapmaps` by the soak and as `heapmaps` by the traced processes'
sitecustomize (this directory first on their PYTHONPATH)."""

from __future__ import annotations

import os
import re
import tempfile

_HEADER = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")
_STAT = re.compile(r"^# (.+?)\s*=\s*([\d,]+)$")
_UNUSED = re.compile(r"^(\d+) unused pools \* (\d+) bytes")


def smaps_kib(pid: int | str = "self") -> dict[str, int]:
    """RSS (KiB) of a process's mappings by kind: `heap` (glibc's main arena, the brk heap),
    `stack` (the main thread's), `anon` (every other anonymous mapping: Python's arenas, other
    glibc arenas and mmapped chunks, thread stacks) and `file` (the binary, libraries, mapped
    files); {} when the process is gone."""
    out = {"heap": 0, "stack": 0, "anon": 0, "file": 0}
    kind = "anon"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for row in f:
                if _HEADER.match(row):
                    parts = row.split(None, 5)
                    path = parts[5].strip() if len(parts) > 5 else ""
                    if path == "[heap]":
                        kind = "heap"
                    elif path.startswith("[stack"):
                        kind = "stack"
                    elif not path or path.startswith("["):
                        kind = "anon"
                    else:
                        kind = "file"
                elif row.startswith("Rss:"):
                    out[kind] += int(row.split()[1])
    except OSError:
        return {}
    return out


def pymalloc() -> dict[str, int]:
    """This process's pymalloc figures (sys._debugmallocstats): arenas now and at most, bytes in
    live blocks and in free blocks of used pools, and free pools. Captured from fd 2, where
    CPython prints them; a line another thread logs in that instant is lost."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as tmp:
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    return parse_pymalloc(text)


def parse_pymalloc(text: str) -> dict[str, int]:
    names = {
        "arenas allocated current": "arenas",
        "arenas highwater mark": "arenas_max",
        "bytes in allocated blocks": "live",
        "bytes in available blocks": "free_in_pools",
    }
    out: dict[str, int] = {}
    for row in text.splitlines():
        if m := _STAT.match(row.strip()):
            if m.group(1) in names:
                out[names[m.group(1)]] = int(m.group(2).replace(",", ""))
        elif m := _UNUSED.match(row.strip()):
            out["free_pools"] = int(m.group(1)) * int(m.group(2))
    return out
