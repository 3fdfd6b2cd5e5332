"""Attack tests on the stream process's Unix socket, through the real gunicorn: whoever hands a
socket over chooses the identity its stream is filtered for, so only gunicorn's workers may.
The socket is 0600 in a 0700 directory of the service's user (another user cannot reach it);
a connection from a process of the same user that is not a child of the master is closed
unanswered, and a forged handoff claiming an admin through it never becomes a stream."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from query.watch_handoff import Handoff
from tests.support import topology
from tests.support.gunicorn import watch_master
from tests.support.http import raw_get as get
from tests.support.sse import Stream
from tests.support.stream_process import stream_process
from tests.support.team_cluster import change, seed

ADMIN = {"X-Remote-User": "root", "X-Remote-Group": "admins"}


@pytest.fixture
def r(redis_url: str) -> Iterator[Any]:
    client = topology.client(redis_url)
    seed(client)
    yield client
    client.close()


@pytest.fixture
def served(r: Any, redis_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(host:port, the stream process's socket path)."""
    with watch_master(redis_url, tmp_path / "gunicorn.log") as (proc, host):
        pid = stream_process(proc.pid)
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        yield host, argv[argv.index(b"--socket") + 1].decode()


def test_the_socket_is_private_to_the_services_user(served: tuple[str, str]) -> None:
    _, path = served
    sock, directory = os.stat(path), os.stat(os.path.dirname(path))
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
    assert stat.S_IMODE(directory.st_mode) == 0o700
    assert sock.st_uid == directory.st_uid == os.geteuid()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_cannot_reach_the_socket(served: tuple[str, str]) -> None:
    _, path = served
    pid = os.fork()
    if pid == 0:  # the child becomes `nobody` and tries to connect
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            code = 1  # reached it
        except PermissionError:
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_a_foreign_process_is_closed_unanswered_and_cannot_forge_a_stream(
    r: Any, served: tuple[str, str]
) -> None:
    host, path = served
    mine, theirs = socket.socketpair()  # `theirs` is what the forger hopes to get served
    forger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    forger.settimeout(10)
    forger.connect(path)  # this test's process: the same user, not a child of the master
    assert forger.recv(1) == b""  # closed, no handshake byte
    _, page = get(host, "/api/v1/objects", ADMIN)
    forged = Handoff("root", ("admins", "system:authenticated"), (), page["resourceVersion"], 60)
    head, rest = forged.encode()
    with pytest.raises(OSError):  # the stream process closed the connection: nothing to send to
        socket.send_fds(forger, [head + rest], [theirs.fileno()])
        forger.send(b"x" * 65536)  # a closed peer fails the second write at the latest
    forger.close()
    theirs.close()
    change(r, "team-a", "secret")
    mine.settimeout(10)
    try:
        assert mine.recv(4096) == b""  # never served: no head, no event, the other end is gone
    finally:
        mine.close()
    # and the service still serves real streams
    stream = Stream(host, f"/api/v1/watch?resourceVersion={page['resourceVersion']}", ADMIN)
    assert stream.rows(1)[0][2]["object"]["name"] == "secret"
    stream.close()
