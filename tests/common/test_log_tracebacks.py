"""A logged traceback reads the lines it prints and caches no source (common.logs)."""

from __future__ import annotations

import linecache
import logging
import sys

from common import logs


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
    assert __file__ in linecache.cache  # the standard formatting, for contrast, kept it


def test_the_json_formatter_too() -> None:
    try:
        _fail()
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    linecache.clearcache()
    out = logs.JsonFormatter().format(record)
    assert "while looking it up" in out and __file__ not in linecache.cache
