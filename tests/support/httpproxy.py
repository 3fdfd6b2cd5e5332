"""A small HTTP proxy on loopback for tests: CONNECT tunnels (https servers) and absolute-form
forwarding (http servers), as an operator's egress proxy serves kube API traffic. It counts the
connections it takes and records what each asked for (the target and the Proxy-Authorization it
got), and with `credentials` set answers 407 to a request without them. Forwarded requests go
on without their Proxy-Authorization header (what reached the server is recorded too)."""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit

HEAD_MAX = 64 * 1024


@dataclass
class Seen:
    method: str  # CONNECT or the forwarded method
    target: str  # host:port for CONNECT, the absolute URL otherwise
    proxy_auth: str  # the Proxy-Authorization value received ("" for none)
    forwarded_head: bytes = b""  # the head sent on to the server (absolute-form only)


@dataclass
class HttpProxy:
    credentials: tuple[str, str] | None = None
    connections: int = 0
    seen: list[Seen] = field(default_factory=list)
    refused: int = 0  # 407 answers
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sock: socket.socket | None = None
    _open: set[socket.socket] = field(default_factory=set)
    _stopped: bool = False

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    def url(self, userinfo: str = "") -> str:
        return f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"

    def start(self) -> HttpProxy:
        self._sock = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True, name="test-proxy").start()
        return self

    def stop(self) -> None:
        self._stopped = True
        if self._sock is not None:
            _close(self._sock)  # shut down first: a thread blocked in accept() wakes up
        with self._lock:
            for s in list(self._open):
                _close(s)

    def __enter__(self) -> HttpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stopped:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = _read_head(conn)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _version = lines[0].split(" ", 2)
            headers = [line for line in lines[1:] if line]
            auth = next(
                (
                    h.split(":", 1)[1].strip()
                    for h in headers
                    if h.lower().startswith("proxy-authorization:")
                ),
                "",
            )
            seen = Seen(method, target, auth)
            with self._lock:
                self.seen.append(seen)
            if self.credentials is not None and auth != basic(*self.credentials):
                with self._lock:
                    self.refused += 1
                conn.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n'
                    b"Connection: close\r\n\r\n"
                )
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=10)
                upstream.settimeout(None)
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                url = urlsplit(target)
                upstream = socket.create_connection((url.hostname, url.port or 80), timeout=10)
                upstream.settimeout(None)
                path = url.path + (f"?{url.query}" if url.query else "")
                kept = [h for h in headers if not h.lower().startswith("proxy-")]
                forwarded = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{h}\r\n" for h in kept)
                seen.forwarded_head = forwarded.encode("latin-1") + b"\r\n"
                upstream.sendall(seen.forwarded_head + rest)
            with self._lock:
                self._open.add(upstream)
            pump = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
            pump.start()
            _pump(conn, upstream)
            pump.join(5)
        except (OSError, ValueError):
            pass
        finally:
            for s in (conn, upstream):
                if s is not None:
                    _close(s)
                    with self._lock:
                        self._open.discard(s)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(4096)
        if not data or len(buf) > HEAD_MAX:
            raise ValueError("no request head")
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy until `src` ends, then end `dst`'s sending side."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
