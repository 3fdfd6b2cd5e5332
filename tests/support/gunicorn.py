"""The query service under a real gunicorn, started as `fleetscope serve` starts it (its command
line, its config and worker class), on a port the OS picks (read back from its log: no
pick-then-bind race), with only the FLEETSCOPE_* settings given."""

from __future__ import annotations

import http.client
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from query.cli import command, listening_port
from tests.support.paths import REPO
from tests.support.waiting import wait_for


@contextmanager
def serving(settings: dict[str, str], log: Path, stdout: Path | None = None) -> Iterator[str]:
    """gunicorn serving until the block ends: `HOST:PORT` once /healthz answers 200. `settings`
    are FLEETSCOPE_* names without the prefix; its stderr goes to `log`, its stdout (the access
    log, if asked for) to `stdout`."""
    with master(settings, log, stdout) as (_proc, host):
        yield host


@contextmanager
def master(
    settings: dict[str, str], log: Path, stdout: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`serving`, with the gunicorn master's process too (its children: workers, the stream
    process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update({f"FLEETSCOPE_{k.upper()}": v for k, v in settings.items()})
    # The child keeps its own copies of the descriptors.
    with log.open("wb") as err, (stdout or Path(os.devnull)).open("wb") as out:
        proc = subprocess.Popen(command("127.0.0.1:0"), env=env, cwd=REPO, stdout=out, stderr=err)
    try:
        yield proc, wait_for(lambda: _answering(proc, log), 30, lambda: f"gunicorn: {_tail(log)}")
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _answering(proc: subprocess.Popen[bytes], log: Path) -> str | None:
    """`HOST:PORT` once gunicorn answers /healthz with a 200; fails if it exited."""
    assert proc.poll() is None, f"gunicorn did not start: {_tail(log)}"
    port = listening_port(log.read_text(errors="replace"))
    if not port:
        return None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/healthz")
        return f"127.0.0.1:{port}" if conn.getresponse().status == 200 else None
    except OSError:
        return None
    finally:
        conn.close()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


def header_mode(redis_url: str, **more: str) -> dict[str, str]:
    """Settings of a query service on `redis_url` in `header` mode trusting loopback: one worker
    of two threads unless `more` says otherwise."""
    base = {
        "redis_url": redis_url,
        "auth_mode": "header",
        "trusted_proxy_cidrs": "127.0.0.1/32",
        "query_workers": "1",
        "query_threads": "2",
    }
    return {**base, **more}


@contextmanager
def watch_server(redis_url: str, log: Path) -> Iterator[str]:
    """gunicorn for the watch stream tests (`header` mode, a bookmark every second)."""
    with serving(header_mode(redis_url, watch_bookmark_s="1"), log) as host:
        yield host


@contextmanager
def watch_master(
    redis_url: str, log: Path, threads: int = 2
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`watch_server` with `threads` request threads, and the master's process."""
    settings = header_mode(redis_url, watch_bookmark_s="1", query_threads=str(threads))
    with master(settings, log) as served:
        yield served
