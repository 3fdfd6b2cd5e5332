"""gunicorn's master starts the stream process (query.stream_server) and starts it again when it
dies; its workers learn the stream process's socket from here.

Why a child of the master, checked from the master's own loop: the master outlives every
worker, already restarts them from that loop, and its death must end the streams too (the stream
process exits when its parent changes). `install` runs from the gunicorn config's `when_ready`,
before the first worker is forked, so every worker inherits `socket_path()`, and waits until
the stream process listens (so a ready service serves streams); it wraps the
arbiter's `manage_workers` (called every second and after every SIGCHLD) to also check the
stream process, so no thread runs in the master. Liveness is a pipe only the child holds open:
its end of file says the child is gone, whoever reaped it (gunicorn reaps every child).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

RESTART_MIN_S = 1.0
"""A stream process that keeps dying is started again at most this often."""
STOP_TIMEOUT_S = 5.0
READY_TIMEOUT_S = 30.0
"""How long the master waits, before forking its workers, for the stream process to listen."""

_current: Supervisor | None = None


def socket_path() -> str | None:
    """The stream process's socket, in a process forked from a master that started one."""
    return _current.path if _current is not None else None


class Supervisor:
    def __init__(self, log: Any, metrics_dir: str = "") -> None:
        self.log = log
        self.metrics_dir = metrics_dir
        self.dir = tempfile.mkdtemp(prefix="fleetscope-streams-")  # 0700: this user only
        self.path = os.path.join(self.dir, "streams.sock")
        self.pid = 0
        self.started_at = float("-inf")
        self.ready = False
        self._alive: int | None = None  # read end of the child's liveness pipe
        self._unreaped: list[int] = []

    def start(self) -> None:
        r, w = os.pipe()
        argv = [sys.executable, "-m", "query.stream_server", "--socket", self.path]
        argv += ["--master", str(os.getpid()), "--alive-fd", str(w)]
        proc = subprocess.Popen(argv, pass_fds=(w,), close_fds=True)
        os.close(w)
        proc.returncode = 0  # reaped below by pid (or by gunicorn), never by subprocess
        self.pid, self._alive, self.started_at = proc.pid, r, time.monotonic()
        self.ready = False
        self.log.info("Started the stream process (pid: %s) at %s", self.pid, self.path)

    def alive(self) -> bool:
        """Whether the stream process runs (it writes one byte once it listens, then holds
        the pipe open: end of file says it is gone)."""
        if self._alive is None:
            return False
        while select.select([self._alive], [], [], 0)[0]:
            if not os.read(self._alive, 1):
                return False
            self.ready = True
        return True

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the stream process listens (or died, or `timeout_s` passed)."""
        deadline = time.monotonic() + timeout_s
        while self._alive is not None and not self.ready:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._alive], [], [], left)[0]:
                return False
            if not self.alive():
                return False
        return self.ready

    def check(self) -> None:
        """Start the stream process again if it died (from the master's loop, which an
        exception would end: a failed start is logged and tried again a second later)."""
        self._reap()
        if self.alive() or time.monotonic() - self.started_at < RESTART_MIN_S:
            return
        if self._alive is not None:
            self.log.warning("The stream process (pid: %s) exited; starting it again", self.pid)
            self._gone()
        try:
            self.start()
        except OSError as e:
            self.started_at = time.monotonic()
            self.log.error("Could not start the stream process: %s", e)

    def _gone(self) -> None:
        assert self._alive is not None
        os.close(self._alive)
        self._alive = None
        self._unreaped.append(self.pid)
        self._reap()
        if self.metrics_dir:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(self.pid)  # type: ignore[no-untyped-call]

    def _reap(self) -> None:
        """Reap stream processes that exited, unless gunicorn's waitpid(-1) already did."""
        for pid in list(self._unreaped):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done == pid:
                self._unreaped.remove(pid)

    def stop(self) -> None:
        """Stop the stream process (its clients see their connections close) and remove the
        socket's directory."""
        if self._alive is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while self.alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGKILL)
                    break
                select.select([self._alive], [], [], left)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self._gone()
        shutil.rmtree(self.dir, ignore_errors=True)


def install(server: Any, metrics_dir: str = "") -> Supervisor:
    """Start the stream process for gunicorn's arbiter `server` and check it from its loop."""
    global _current
    sup = _current = Supervisor(server.log, metrics_dir)
    sup.check()
    if not sup.wait_ready(READY_TIMEOUT_S):  # the service is ready when streams can be served
        server.log.error("The stream process is not listening; watch requests answer 503")
    manage_workers = server.manage_workers

    def manage_workers_and_streams() -> None:
        manage_workers()
        sup.check()

    server.manage_workers = manage_workers_and_streams
    return sup


def uninstall() -> None:
    """Stop the stream process (the master is exiting)."""
    global _current
    if _current is not None:
        _current.stop()
        _current = None
