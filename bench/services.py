"""Processes the HTTP benchmarks stand up: the query service and the one-GET reference app,
each under gunicorn with `query.gunicorn_conf` (the production defaults unless overridden)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import gunicorn as gunicorn_pkg
import requests

from query.cli import listening_port

ROOT = Path(__file__).resolve().parent.parent
DAY_S = 86400


def bench_env(redis_url: str, port: int) -> dict[str, str]:
    """Header auth from loopback; freshness limits of a day, so a fleet loaded once stays served
    for the whole run (the benchmark does not re-collect)."""
    return {
        **os.environ,
        "FLEETSCOPE_REDIS_URL": redis_url,
        "FLEETSCOPE_AUTH_MODE": "header",
        "FLEETSCOPE_TRUSTED_PROXY_CIDRS": "127.0.0.1/32",
        "FLEETSCOPE_BIND": f"127.0.0.1:{port}",
        "FLEETSCOPE_RBAC_MAX_AGE_S": str(DAY_S),
        "FLEETSCOPE_STALE_AFTER_S": str(DAY_S),
        "FLEETSCOPE_LOG_LEVEL": "WARNING",
    }


@contextmanager
def gunicorn(
    app: str, redis_url: str, probe: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """Serve `app` (module:attr) under gunicorn with the query service's config (and `env` over
    the benchmarks' environment); yields its URL.

    gunicorn binds port 0 and the URL comes from its "Listening at" line, so no port is picked
    beforehand for someone else to take."""
    cmd = [sys.executable, "-m", "gunicorn", "--config", "python:query.gunicorn_conf"]
    if gunicorn_pkg.version_info >= (25, 1):  # the control socket came in 25.1
        cmd += ["--no-control-socket"]  # two servers side by side: no shared control socket
    cmd += [app]
    with tempfile.NamedTemporaryFile(prefix="fleetscope-bench-gunicorn-", suffix=".log") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**bench_env(redis_url, 0), **(env or {})},
            stderr=log,
            stdout=subprocess.DEVNULL,
        )
        try:
            yield _wait(proc, Path(log.name), probe)
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(proc: subprocess.Popen[bytes], log: Path, probe: str, timeout_s: float = 60.0) -> str:
    """The base URL once gunicorn answers `probe`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"gunicorn exited with {proc.returncode}:\n{tail}")
        port = listening_port(log.read_text(errors="replace"))
        base = f"http://127.0.0.1:{port}"
        try:
            if port and requests.get(base + probe, timeout=2).status_code < 500:
                return base
        except (requests.ConnectionError, requests.Timeout):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"gunicorn did not answer {probe} within {timeout_s}s")
