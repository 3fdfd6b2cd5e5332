"""Logging set-up, done once per entry point (CLI, gunicorn, Celery worker, watcher).

Libraries only call `logging.getLogger(__name__)`; context goes in `extra` (`cluster`,
`task_id`) and shows up as JSON fields or as `key=value` in text mode.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from common.settings import Settings

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
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


class TextFormatter(logging.Formatter):
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
    """Configure the root logger once for this process (idempotent)."""
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
