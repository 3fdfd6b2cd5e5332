"""The stream process: one per query service, beside gunicorn's workers, serving every watch
stream (`GET /api/v1/watch`) of that service.

    python -m query.stream_server --socket PATH --master PID --alive-fd FD

gunicorn's master starts it (query.stream_supervisor). A worker's request thread authenticates
and validates a watch, then hands the client's socket over this process's Unix socket
(query.watch_handoff); the hub (query.watch_hub) then reads the feeds and writes to every
stream here, so no stream holds a request thread and none shares a worker's GIL with the list
requests. The socket's directory is private (0700) and the socket 0600; a connection from
anything but a child of this process's master (SO_PEERCRED, /proc) is closed unanswered, as it
would otherwise choose the identity its stream is filtered for. This process exits when its
master is gone; on SIGTERM its clients see their connections close and resume elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import logging
import os
import selectors
import signal
import socket
import time
from typing import Any

from werkzeug.datastructures import MultiDict

from common import logs
from common.errors import RequestError
from common.rbac.authorizer import UserInfo
from common.settings import Settings
from query import housekeeping, params, positions
from query.state import QueryState
from query.watch_handoff import FULL, TAKEN, Handoff, HandoffError, Receiver, parent_of, peer
from query.watch_hub import Hub, Subscription
from query.watch_sinks import SocketSink

log = logging.getLogger(__name__)
BACKLOG = 1024
HANDOFF_TIMEOUT_S = 30.0
"""A handoff not complete by then is dropped (its worker is gone or stuck)."""


def listen(path: str) -> socket.socket:
    """The Unix socket at `path`, created 0600 (its directory is the master's private one)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a previous stream process's
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # no moment where the socket is open to others
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def allowed(conn: socket.socket, master: int) -> bool:
    """Only a child of our master (a gunicorn worker) running as our user may hand streams."""
    got = peer(conn)
    if got is None:  # no SO_PEERCRED on this platform: the private directory alone
        return True
    pid, uid = got
    return uid == os.geteuid() and parent_of(pid) == master


class StreamServer:
    """Accepts handoffs on `listener` and admits their streams into `hub`."""

    def __init__(self, hub: Hub, listener: socket.socket, master: int) -> None:
        self.hub = hub
        self.listener = listener
        self.master = master
        self.receiving: dict[Receiver, None] = {}
        hub.sel.register(listener, selectors.EVENT_READ, self._accept)
        hub.ticks.append(self._expire)

    def _accept(self, listener: Any, mask: int) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            if not allowed(conn, self.master):
                log.warning("stream server: refused a connection from outside this service")
                conn.close()
                continue
            full = self.hub.streams >= self.hub.st.settings.watch_streams_max
            try:
                conn.send(FULL if full else TAKEN)
            except OSError:
                conn.close()
                continue
            if full:
                conn.close()
                continue
            rx = Receiver(conn, time.monotonic())
            self.receiving[rx] = None
            self.hub.pending += 1
            self.hub.sel.register(conn, selectors.EVENT_READ, functools.partial(self._receive, rx))

    def _receive(self, rx: Receiver, conn: Any, mask: int) -> None:
        try:
            got = rx.read()
        except (HandoffError, OSError) as e:
            log.warning("stream server: handoff dropped: %s", e)
            self._done(rx)
            return
        if got is None:
            return
        handoff, fd = got
        self._done(rx)
        client = socket.socket(fileno=fd)
        try:
            sub = self.subscription(handoff)
        except Exception as e:
            client.close()  # the client sees its connection close, and retries
            if not isinstance(e, RequestError):
                raise
            log.warning("stream server: handoff refused: %s", e)  # validated by the worker
            return
        sub.sink = SocketSink(client)
        self.hub.admit(sub)

    def subscription(self, h: Handoff) -> Subscription:
        st = self.hub.st
        filters = params.filters(
            MultiDict(list(h.args)), st.registry, st.settings.flapping_threshold
        )
        start = positions.decode(st.signer, h.position)
        sub = Subscription(UserInfo(h.user, h.groups), filters, start)
        sub.preamble = [h.preamble] if h.preamble else []
        sub.ends_at = time.monotonic() + h.ends_in_s
        return sub

    def _done(self, rx: Receiver) -> None:
        self.receiving.pop(rx, None)
        self.hub.pending -= 1
        with contextlib.suppress(KeyError, ValueError):
            self.hub.sel.unregister(rx.sock)
        rx.close()

    def _expire(self, now: float) -> None:
        for rx in list(self.receiving):
            if now - rx.started_at > HANDOFF_TIMEOUT_S:
                log.warning("stream server: handoff not complete in %.0f s", HANDOFF_TIMEOUT_S)
                self._done(rx)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="fleetscope's watch stream process")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--master", type=int, required=True)
    ap.add_argument("--alive-fd", type=int, default=-1)
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    logs.configure(settings)
    housekeeping.start(settings)  # as the workers: its access memos and heap under RBAC churn
    stopping: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stopping.append(signum)
        hub.wake()

    hub = Hub(QueryState.build(settings))
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server = StreamServer(hub, listen(args.socket), args.master)
    if args.alive_fd >= 0:
        os.write(args.alive_fd, b"R")  # listening: the master may fork its workers
    gc.freeze()  # modules and state out of full collections, as the workers do
    log.info("stream server listening on %s", args.socket)
    hub.run(lambda: not stopping and os.getppid() == args.master)
    server.listener.close()
    for sub in list(hub.subs):
        if sub.sink is not None:
            sub.sink.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
