"""A logged traceback reads the lines it prints and caches no source (common.logs)."""

from __future__ import annotations

import json
import linecache
import logging
import subprocess
import sys
from pathlib import Path

from common import logs

ROOT = Path(__file__).resolve().parents[2]


def _fail() -> None:
    try:
        {}["missing"]
    except KeyError as e:
        raise RuntimeError("while looking it up") from e


def test_a_logged_traceback_reads_its_lines_without_caching_the_files() -> None:
    try:
        _fail()
    except RuntimeError:
        ei = sys.exc_info()
    linecache.clearcache()
    ours = logs.TextFormatter().formatException(ei)
    assert __file__ not in linecache.cache  # no source kept
    assert ours == logging.Formatter().formatException(ei)  # the standard text, lines and all
    assert '{}["missing"]' in ours and "The above exception was the direct cause" in ours


def test_the_json_formatter_too() -> None:
    try:
        _fail()
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    linecache.clearcache()
    out = logs.JsonFormatter().format(record)
    assert "while looking it up" in out and __file__ not in linecache.cache


LIBRARY_TRACEBACKS = """
import json, linecache, traceback
from billiard.einfo import ExceptionInfo
from celery import beat
from common import logs
from common.settings import Settings

def texts():  # files whose whole text the cache holds (lazy entries hold a loader, no text)
    return sorted(k for k, v in linecache.cache.items() if len(v) > 1)

def formatted():
    try:
        beat.Scheduler.apply_entry(None, None)  # fails inside Celery's beat.py
    except AttributeError:
        einfo = ExceptionInfo()
    return einfo.traceback + "".join(traceback.format_stack())

out = {}
for phase in ("standard", "ours"):  # one call site: the same stack both times
    if phase == "ours":
        linecache.clearcache()
        logs.configure(Settings(log_format="json"))
    out[phase], out[phase + "_cached"] = formatted(), texts()
print(json.dumps(out))
"""


def _library_tracebacks() -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", LIBRARY_TRACEBACKS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_tracebacks_libraries_format_keep_no_source_once_logging_is_configured() -> None:
    """billiard's ExceptionInfo (each failed Celery task) and format_stack read their lines
    through linecache: once a process has configured fleetscope's logging, the same text comes
    out and no file's source stays in the cache. Each in a fresh interpreter: the pytest
    process has long had it configured."""
    import celery.beat

    got = _library_tracebacks()
    assert celery.beat.__file__ in got["standard_cached"]  # the standard reading keeps files
    assert got["ours"] == got["standard"]  # the same lines, source and all
    assert "info('Scheduler: Sending due task %s (%s)', entry.name" in str(got["ours"])
    assert got["ours_cached"] == []
