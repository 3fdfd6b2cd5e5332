"""Handing a watch stream from a gunicorn worker to the stream process (query.stream_server).

The request thread connects to the stream process's Unix socket (private directory, 0600; the
stream process answers only its master's children) and waits for one byte: `+` taken, `!` full
(429). The view has then authenticated and validated the request; the worker writes the
response head and sends the subscription (caller, filter parameters, signed position, time
left, the initial events) with the client's socket attached (SCM_RIGHTS), then closes its own
copies: from here the stream process alone writes to the client. Not reachable, or no answer
within `HANDSHAKE_TIMEOUT_S`: 503, never a hang.

    "FSW1" | head length (u32) | initial events length (u32) | head (JSON) | initial events
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

from common.errors import TooBusy, Unavailable

MAGIC = b"FSW1"
FRAME = struct.Struct("!4sII")
HEAD_MAX = 1 << 20
PREAMBLE_MAX = 256 << 20
HANDSHAKE_TIMEOUT_S = 5.0
SEND_TIMEOUT_S = 30.0
TAKEN, FULL = b"+", b"!"
UNAVAILABLE = (
    "the watch stream server of this query service is not running (it is restarted within "
    "seconds); retry the watch, resuming from the last event's id"
)


class HandoffError(Exception):
    """A handoff that cannot be read: cut short, malformed or over a limit."""


@dataclass(frozen=True)
class Handoff:
    """A watch subscription as the request thread validated it."""

    user: str
    groups: tuple[str, ...]
    args: tuple[tuple[str, str], ...]
    """The filter parameters, as received (the stream process parses them again)."""
    position: str
    """The signed resourceVersion to resume after."""
    ends_in_s: float
    preamble: bytes = b""
    """Events written before any change (the initial ADDED rows)."""

    def encode(self) -> tuple[bytes, bytes]:
        head = json.dumps(
            {
                "user": self.user,
                "groups": list(self.groups),
                "args": [list(a) for a in self.args],
                "position": self.position,
                "endsInS": self.ends_in_s,
            },
            separators=(",", ":"),
        ).encode()
        return FRAME.pack(MAGIC, len(head), len(self.preamble)) + head, self.preamble

    @classmethod
    def decode(cls, head: bytes, preamble: bytes) -> Handoff:
        try:
            d = json.loads(head)
            return cls(
                str(d["user"]),
                tuple(str(g) for g in d["groups"]),
                tuple((str(k), str(v)) for k, v in d["args"]),
                str(d["position"]),
                float(d["endsInS"]),
                preamble,
            )
        except (ValueError, KeyError, TypeError) as e:
            raise HandoffError(f"malformed handoff: {type(e).__name__}") from e


class Link:
    """A worker's connection to the stream process, which agreed to take one stream."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def hand(self, client: socket.socket, handoff: Handoff) -> None:
        """Send the subscription with the client's socket; OSError when the stream process went
        away meanwhile (the client then sees its connection close, and resumes)."""
        first, rest = handoff.encode()
        self.sock.settimeout(SEND_TIMEOUT_S)
        try:
            socket.send_fds(self.sock, [first], [client.fileno()])
            if rest:
                self.sock.sendall(rest)
        finally:
            self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def connect(path: str, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> Link:
    """A link to the stream process at `path` that agreed to take a stream; 503 when it is not
    reachable or does not answer, 429 when it serves as many streams as it may."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(path)
        answer = sock.recv(1)
    except OSError:
        sock.close()
        raise Unavailable(UNAVAILABLE) from None
    if answer == TAKEN:
        return Link(sock)
    sock.close()
    if answer == FULL:
        raise TooBusy("this service serves as many watch streams as it may; retry later")
    raise Unavailable(UNAVAILABLE)


class Receiver:
    """The stream process's side of one handoff, read without blocking as bytes arrive."""

    def __init__(self, sock: socket.socket, started_at: float) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.started_at = started_at
        self.buf = bytearray()
        self.fds: list[int] = []

    def read(self) -> tuple[Handoff, int] | None:
        """The handoff and the client's descriptor once all of it arrived, else None."""
        while True:
            try:
                data, fds, flags, _ = socket.recv_fds(self.sock, 1 << 18, 1)
            except (BlockingIOError, InterruptedError):
                return None
            self.fds += fds
            if flags & socket.MSG_CTRUNC or len(self.fds) > 1:
                raise HandoffError("more than one descriptor")
            if not data:
                raise HandoffError("closed before the whole handoff arrived")
            self.buf += data
            done = self._complete()
            if done is not None:
                return done

    def _complete(self) -> tuple[Handoff, int] | None:
        if len(self.buf) < FRAME.size:
            return None
        magic, head_len, pre_len = FRAME.unpack_from(self.buf)
        if magic != MAGIC or head_len > HEAD_MAX or pre_len > PREAMBLE_MAX:
            raise HandoffError("not a handoff, or over its limits")
        end = FRAME.size + head_len + pre_len
        if len(self.buf) < end:
            return None
        if len(self.buf) > end or not self.fds:
            raise HandoffError("a handoff has exactly one socket and nothing after it")
        head = bytes(self.buf[FRAME.size : FRAME.size + head_len])
        handoff = Handoff.decode(head, bytes(self.buf[FRAME.size + head_len :]))
        fd = self.fds.pop()
        return handoff, fd

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        with contextlib.suppress(OSError):
            self.sock.close()


def peer(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket (Linux), else None."""
    opt: Any = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt, 12))
    return pid, uid


def parent_of(pid: int) -> int | None:
    """A process's parent pid (Linux /proc), None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    try:
        return int(stat.rpartition(b")")[2].split()[1])
    except (IndexError, ValueError):
        return None
