"""Where a watch stream's bytes go: a client socket written without blocking (the stream
process, query.stream_server), or a queue a response generator drains on its request thread
(a server that cannot hand sockets over: werkzeug's, the Flask test client, gunicorn's own TLS).
"""

from __future__ import annotations

import contextlib
import queue
import socket
from collections.abc import Iterator
from typing import Protocol

OUTBOX_MAX = 1 << 20
"""Bytes a slow client may fall behind by before its stream is closed (it resumes)."""


class Sink(Protocol):
    closed: bool

    def send(self, data: bytes) -> bool: ...

    def close(self) -> None: ...


class SocketSink:
    """A handed-over client socket: written without blocking, the rest kept in an outbox
    (flushed when the socket is writable again)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.outbox = bytearray()
        self.limit = OUTBOX_MAX
        """Bytes the outbox may hold (the stream's initial rows come on top of OUTBOX_MAX)."""
        self.closed = False

    def send(self, data: bytes) -> bool:
        if self.closed:
            return False
        if self.outbox:
            self.outbox += data
        else:
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                self.close()
                return False
            if n < len(data):
                self.outbox += data[n:]
        return self._bounded()

    def flush(self) -> bool:
        try:
            while self.outbox:
                n = self.sock.send(self.outbox)
                del self.outbox[:n]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self.close()
            return False
        return self._bounded()

    def _bounded(self) -> bool:
        if len(self.outbox) > self.limit:
            self.close()
            return False
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.outbox = bytearray()
            with contextlib.suppress(OSError):
                self.sock.close()


class QueueSink:
    """A stream served on its request's own thread: a response generator drains it."""

    def __init__(self) -> None:
        self.q: queue.Queue[bytes | None] = queue.Queue(maxsize=10_000)
        self.closed = False

    def send(self, data: bytes) -> bool:
        if self.closed:
            return False
        try:
            self.q.put_nowait(data)
        except queue.Full:
            self.close()
            return False
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(queue.Full):
                self.q.put_nowait(None)

    def drain(self, keepalive_s: float = 5.0) -> Iterator[bytes]:
        try:
            while True:
                try:
                    item = self.q.get(timeout=keepalive_s)
                except queue.Empty:
                    yield b": keepalive\n\n"
                    continue
                if item is None:
                    return
                yield item
        finally:
            self.closed = True
