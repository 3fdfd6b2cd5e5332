"""Logging set-up, done once per entry point (CLI, gunicorn, Celery worker, watcher).

Libraries only call `logging.getLogger(__name__)`; context goes in `extra` (`cluster`,
`task_id`) and shows up as JSON fields or as `key=value` in text mode.
"""

from __future__ import annotations

import itertools
import json
import linecache
import logging
import os
import sys
import time
import traceback
from types import TracebackType
from typing import Any

from common.settings import Settings

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]


def format_exception(ei: _ExcInfo) -> str:
    """A traceback as `logging` prints it, each source line read from its file alone. The
    standard formatting goes through `linecache`, which keeps the whole source of every file a
    logged traceback passed through for the life of the process: two broker errors logged in a
    Celery process cached 12 files, 25,821 lines, and raised its RSS by 2.9 MiB that clearing
    the cache did not give back (Celery beat stepped 74 -> 79 MiB at a soak's Redis failover,
    its first logged traceback; docs/operations.md, "Soak")."""
    if ei[1] is None:
        return ""
    te = traceback.TracebackException(type(ei[1]), ei[1], ei[2], lookup_lines=False)
    seen: set[int] = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        for frame in t.stack:  # `_line`: FrameSummary's line on 3.11-3.12; elsewhere the
            # attribute is not there and the line comes from linecache, as before
            if frame.lineno is not None and getattr(frame, "_line", "") is None:
                frame._line = _source_line(frame.filename, frame.lineno)  # type: ignore[attr-defined]
        todo += [x for x in (t.__cause__, t.__context__) if x is not None]
    return "".join(te.format()).rstrip("\n")


def _source_line(filename: str, lineno: int) -> str:
    """Line `lineno` (from 1) of a source file, read without caching; "" when unreadable."""
    try:
        with open(filename, encoding="utf-8", errors="replace") as f:
            return next(itertools.islice(f, lineno - 1, None), "")
    except (OSError, ValueError):
        return ""


def read_source_uncached() -> None:
    """From now on, a source line read through `linecache.getline` for a file whose text is not
    cached yet is read from the file alone, and the file is not kept: what libraries format in
    our processes (billiard's `ExceptionInfo` of every failed Celery task, Celery beat's
    `format_stack`, `warnings`) would otherwise keep the whole source of every file on their
    tracebacks for the life of the process, a step in RSS at the first Redis failover
    (docs/operations.md, "Soak"). Text registered in the cache (generated code) and names that
    are not absolute paths are read as before; so is a file this cannot read. Idempotent."""
    if getattr(linecache.getline, "_fleetscope", False):
        return
    cached_getline = linecache.getline

    def getline(filename: str, lineno: int, module_globals: Any = None) -> str:
        entry = linecache.cache.get(filename)
        if (entry is None or len(entry) == 1) and os.path.isabs(filename):  # not read yet
            line = _source_line(filename, lineno)
            if line:
                return line
        return cached_getline(filename, lineno, module_globals)

    getline._fleetscope = True  # type: ignore[attr-defined]
    linecache.getline = getline


class _Formatter(logging.Formatter):
    def formatException(self, ei: Any) -> str:
        return format_exception(ei)


class JsonFormatter(_Formatter):
    """One JSON object per line: time, level, logger, message and any `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(_Formatter):
    """Human-readable lines with `key=value` context appended."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        return f"{line} [{context}]" if context else line


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def configure(settings: Settings, stream: Any = None) -> None:
    """Configure the root logger once for this process (idempotent), and have tracebacks that
    libraries format keep no source (`read_source_uncached`)."""
    read_source_uncached()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_fleetscope", False):
            root.removeHandler(old)
    handler._fleetscope = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # The kubernetes client and urllib3 log request details (headers) at DEBUG: keep them quiet.
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    if settings.extra:  # names only: a misspelt variable may well hold a secret
        logging.getLogger(__name__).warning(
            "ignoring unknown settings (misspelt?): %s", ", ".join(sorted(settings.extra))
        )
