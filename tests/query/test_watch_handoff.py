"""The handoff's wire format and its two ends (query.watch_handoff), over real Unix sockets: a
subscription and its socket arrive whole however the bytes are split; a handoff cut short, over
its limits or not one at all is refused; a worker's connect is a 503 when the stream process is
missing or silent and a 429 when it is full."""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
from pathlib import Path

import pytest

from common.errors import TooBusy, Unavailable
from query import watch_handoff
from query.watch_handoff import FRAME, MAGIC, Handoff, HandoffError, Receiver

HANDOFF = Handoff(
    "tina",
    ("team-a", "system:authenticated"),
    (("status", "unhealthy"), ("labelSelector", "tier in (web,db)")),
    "position.mac",
    1800.0,
    b"event: ADDED\ndata: {}\n\n" * 1000,
)


def receive(rx: Receiver) -> tuple[Handoff, int]:
    while True:
        got = rx.read()
        if got is not None:
            return got
        assert select.select([rx.sock], [], [], 5)[0], "the sender stopped"


def test_a_handoff_arrives_whole_with_its_socket() -> None:
    worker, server = socket.socketpair()
    client, peer = socket.socketpair()
    rx = Receiver(server, 0.0)
    assert rx.read() is None  # nothing yet
    sender = threading.Thread(target=watch_handoff.Link(worker).hand, args=(client, HANDOFF))
    sender.start()
    got, fd = receive(rx)
    sender.join()
    assert got == HANDOFF
    handed = socket.socket(fileno=fd)
    handed.sendall(b"hello")
    assert peer.recv(5) == b"hello"  # the very connection the worker had
    for s in (handed, client, peer):
        s.close()
    rx.close()


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\n\r\n",  # not a handoff
        FRAME.pack(MAGIC, 1 << 30, 0),  # over the head's limit
        FRAME.pack(MAGIC, 2, 0) + b"{}",  # no socket attached
        FRAME.pack(MAGIC, 2, 0) + b"[]",  # not the fields of one
    ],
)
def test_what_is_not_a_handoff_is_refused(data: bytes) -> None:
    a, b = socket.socketpair()
    a.sendall(data)
    a.close()
    rx = Receiver(b, 0.0)
    with pytest.raises(HandoffError):
        rx.read()
    rx.close()


def test_a_handoff_cut_short_is_refused_and_its_socket_closed() -> None:
    a, b = socket.socketpair()
    client, peer = socket.socketpair()
    head, _ = HANDOFF.encode()
    socket.send_fds(a, [head[: FRAME.size + 3]], [client.fileno()])
    a.close()
    client.close()
    rx = Receiver(b, 0.0)
    with pytest.raises(HandoffError):
        while rx.read() is None:
            pass
    rx.close()  # closes the descriptor it received: the client's connection ends
    peer.settimeout(5)
    assert peer.recv(1) == b""
    peer.close()


def test_connect_is_a_503_when_missing_or_silent_and_a_429_when_full(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    with pytest.raises(Unavailable):
        watch_handoff.connect(path)  # no stream process
    for answer, error in ((None, Unavailable), (b"!", TooBusy), (b"?", Unavailable)):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(4)
        server = threading.Thread(target=answering, args=(listener, answer))
        server.start()
        with pytest.raises(error):
            watch_handoff.connect(path, timeout_s=0.5)
        server.join()
        listener.close()
        os.unlink(path)


def answering(listener: socket.socket, answer: bytes | None) -> None:
    """Accept one connection and answer it (None: hold it, silent, until the client gives up)."""
    conn, _ = listener.accept()
    if answer is None:
        conn.recv(1)  # the client's close
    else:
        conn.sendall(answer)
    conn.close()


def test_the_frame_is_magic_and_two_lengths() -> None:
    head, rest = HANDOFF.encode()
    magic, head_len, rest_len = FRAME.unpack_from(head)
    assert (magic, rest_len, len(head)) == (MAGIC, len(rest), FRAME.size + head_len)
    assert struct.calcsize("!4sII") == FRAME.size
