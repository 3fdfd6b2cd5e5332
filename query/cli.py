"""`fleetscope serve [--bind HOST:PORT]`: the query service under gunicorn, started with exactly
the documented command (`gunicorn --config python:query.gunicorn_conf query.wsgi:app`)."""

from __future__ import annotations

import argparse
import os
import re
import sys

from common.settings import Settings

CONFIG = "python:query.gunicorn_conf"
APP = "query.wsgi:app"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bind", metavar="HOST:PORT", help="listen address (default: FLEETSCOPE_BIND)"
    )


def command(bind: str | None = None) -> list[str]:
    """The gunicorn command line (run with this Python, so the same virtualenv)."""
    argv = [sys.executable, "-m", "gunicorn", "--config", CONFIG]
    if bind:
        argv += ["--bind", bind]
    return [*argv, APP]


_LISTENING = re.compile(r"Listening at: [a-z]+://[^\s,]*?:(\d+)[\s,]")


def listening_port(log_text: str) -> int | None:
    """The port gunicorn reports in its log ("Listening at: http://127.0.0.1:43121 (pid)"),
    so a caller can start it with `--bind 127.0.0.1:0` and learn the port the OS picked,
    instead of choosing a free port that may be taken before gunicorn binds it."""
    found = _LISTENING.search(log_text)
    return int(found.group(1)) if found else None


def run(args: argparse.Namespace) -> int:
    Settings.from_env()  # fail fast with a readable ConfigError before exec'ing gunicorn
    argv = command(args.bind)
    os.execv(argv[0], argv)
    return 0  # not reached
