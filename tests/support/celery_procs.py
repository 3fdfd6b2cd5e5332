"""Celery's own command as subprocesses for the end-to-end worker tests: a worker (prefork, its
/metrics on a port of its own) or beat against the test Redis, each logging to a file, and the
token their fake leaf requires (no log may show it)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from common.redis_server import free_port
from tests.support.waiting import wait_for

TOKEN = "celery-SECRET-token-8080"
CELERY = str(Path(sys.executable).with_name("celery"))


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen([CELERY, "-A", "collector", *args], env=env, stdout=out, stderr=out)


def start_worker(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A prefork worker with /metrics on a fresh port; another port if that one was taken
    between being picked and being bound (the worker says so in its log)."""
    argv = ["worker", "--pool", "prefork", "-c", "2", "--without-gossip", "--without-mingle"]
    for _attempt in range(5):
        port = free_port()
        worker = start(argv, {**env, "FLEETSCOPE_WORKER_METRICS_PORT": str(port)}, log)
        answered = bound_or_refused(worker, port, log)
        if answered:
            return worker, port
        stop(worker)
    raise AssertionError(f"the worker found no free metrics port: {log.read_text()[-2000:]}")


def bound_or_refused(worker: subprocess.Popen[bytes], port: int, log: Path) -> bool:
    """Wait until the worker's /metrics answers (True) or it logs that it cannot listen."""

    def outcome() -> str | None:
        if "metrics cannot listen" in log.read_text(errors="replace"):
            return "refused"
        assert worker.poll() is None, f"worker exited: {log.read_text()[-2000:]}"
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        except OSError:
            return None
        return "bound" if b"fleetscope_build_info" in text else None

    tail = lambda: f"worker metrics: {log.read_text()[-2000:]}"  # noqa: E731
    return wait_for(outcome, 60, tail, interval_s=0.1) == "bound"


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
