"""A small process supervisor for `fleetscope demo`: start children, watch them, stop them all.

Each child runs in its own process group so that stopping it also stops whatever it forked
(gunicorn and Celery prefork workers); `stop_all` sends SIGTERM, waits, then SIGKILLs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Supervisor:
    """Starts children with their output in `log_dir/<name>.log`; stops them all on exit."""

    log_dir: Path
    env: dict[str, str]
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Child:
        """Start `argv` as `name`, with the supervisor's environment plus `env`."""
        log_path = self.log_dir / f"{name}.log"
        log = open(log_path, "ab")  # noqa: SIM115 - the child owns it for its lifetime
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**self.env, **env} if env else self.env,
            start_new_session=True,
        )
        log.close()
        child = Child(name, proc, log_path)
        self.children.append(child)
        return child

    def dead(self) -> list[Child]:
        return [c for c in self.children if not c.alive()]

    def stop_all(self, timeout_s: float = 10.0) -> None:
        for child in reversed(self.children):
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for child in reversed(self.children):
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.1, deadline - time.monotonic()))
        for child in self.children:
            # The group may hold grandchildren even after the leader exited: kill them all.
            _signal_group(child.process, signal.SIGKILL)
            if child.alive():
                child.process.wait(5)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def python_module(module: str, *args: str) -> list[str]:
    """argv running `module` with this interpreter (works without the console scripts on PATH)."""
    return [sys.executable, "-m", module, *args]
