"""Port pressure for start-up tests: thousands of loopback connections hold ephemeral ports, the
way a busy machine does, so code that picks a "free" port and binds it later (or binds a run of
consecutive ports) fails here instead of only sometimes on someone else's laptop.

Connections are held open (ESTABLISHED both ends) and reset at the end (SO_LINGER 0), so unlike
TIME_WAIT nothing outlives the test to disturb other processes on the machine.
`scripts/newcomer-check.sh --time-wait` makes the TIME_WAIT kind for whole-program runs.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import struct
from collections.abc import Iterator

RESERVED_FDS = 256  # left for the code under test


def _fd_budget(wanted: int) -> int:
    """Raise the soft descriptor limit as far as allowed; how many more can be opened."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = wanted + RESERVED_FDS * 2 if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
            soft = max(soft, target)
    return max(0, soft - RESERVED_FDS * 2)


def _reset(sock: socket.socket) -> None:
    """Close with RST: no TIME_WAIT left behind."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@contextlib.contextmanager
def ephemeral_ports_held(count: int = 3000) -> Iterator[list[int]]:
    """Hold `count` ephemeral ports (fewer if descriptors run short) with open loopback
    connections; yields the client-side ports, which nothing else can bind meanwhile."""
    count = min(count, _fd_budget(count * 2) // 2)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    clients: list[socket.socket] = []
    accepted: list[socket.socket] = []
    try:
        while len(clients) < count:
            batch = [
                socket.create_connection(listener.getsockname())
                for _ in range(min(500, count - len(clients)))
            ]
            clients += batch
            accepted += [listener.accept()[0] for _ in batch]
        yield [c.getsockname()[1] for c in clients]
    finally:
        for sock in clients + accepted:
            _reset(sock)
        listener.close()


def bind_fails(port: int, reuse_address: bool = True) -> bool:
    """True when a listener could not bind `port` on loopback now (by default even with
    SO_REUSEADDR, as servers set it)."""
    with socket.socket() as s:
        if reuse_address:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
