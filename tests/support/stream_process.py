"""The query service's stream process seen from outside: the gunicorn master's children, the
stream process among them, and which processes hold a TCP connection (from /proc)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.sse import Stream


def children(master: int) -> dict[int, bytes]:
    """The master's child processes and their command lines."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rpartition(b")")[2].split()
            if int(fields[1]) == master:
                out[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
    return out


def stream_process(master: int, not_pid: int = 0, wait_s: float = 30.0) -> int:
    """The pid of the master's stream process (another than `not_pid`: a restarted one)."""
    deadline = time.monotonic() + wait_s
    while True:
        for pid, cmd in children(master).items():
            if b"query.stream_server" in cmd and pid != not_pid:
                return pid
        assert time.monotonic() < deadline, f"no stream process under {master}"
        time.sleep(0.05)  # polling for the restart, not fixing a race


def holders(server_port: int, client_port: int) -> set[int]:
    """The processes holding the server's end of the TCP connection from `client_port`."""
    inode = ""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if (
            int(f[1].split(":")[1], 16) == server_port
            and int(f[2].split(":")[1], 16) == client_port
        ):
            inode = f[9]
    assert inode, "no such connection"
    found = set()
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) == f"socket:[{inode}]":
                found.add(int(fd.parent.parent.name))
        except OSError:
            continue
    return found


def client_port(stream: Stream) -> int:
    port: int = stream.resp.fp.raw._sock.getsockname()[1]  # type: ignore[union-attr]
    return port
