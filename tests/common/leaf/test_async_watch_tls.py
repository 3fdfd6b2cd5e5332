"""Watch streams (common.leaf.async_watch) against a small TLS server that requires a client
certificate (the kubeconfig's inline CA, client certificate and key): the answer comes in tiny
chunks (a line split across many of them), the server ends the watch cleanly as its timeout
does (the stream just ends), a silent server past the idle timeout breaks the stream, and a
client without the certificate is refused."""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from collector.watch import loop as watch_loop
from common.errors import ClusterUnreachable
from common.leaf import async_watch
from common.leaf.client import ClusterConfig, LeafClient
from kubesim.tls import ServingCert, make_ca, make_serving_cert

KS = "kustomize.toolkit.fluxcd.io/v1"
CLIENT_CN = "fleetscope-collector"
PEM = serialization.Encoding.PEM


def run(coro: Any) -> Any:
    return watch_loop.shared().submit(coro).result(30)


def client_cert(cn: str) -> tuple[bytes, bytes, bytes]:
    """A client CA, and a certificate (with its key) it signed for `cn`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca = make_ca("client-ca", 1)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(PEM), cert.public_bytes(PEM), key_pem


@dataclass
class WatchServer:
    """Answers every request with `lines` sent chunked, `chunk` bytes a chunk, then ends (or,
    with `stall`, sends the head and nothing more)."""

    serving: ServingCert
    client_ca: bytes
    lines: list[bytes]
    chunk: int = 7
    stall: bool = False
    peers: list[str] = field(default_factory=list)
    heads: list[str] = field(default_factory=list)
    handshake_errors: int = 0
    _sock: socket.socket | None = None

    def start(self) -> WatchServer:
        ctx = self.serving.server_context()
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=self.client_ca.decode())
        self._ctx = ctx
        self._sock = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        assert self._sock is not None
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    @property
    def url(self) -> str:
        assert self._sock is not None
        return f"https://127.0.0.1:{self._sock.getsockname()[1]}"

    def _accept(self) -> None:
        assert self._sock is not None
        while True:
            try:
                raw, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self._ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            self.handshake_errors += 1
            raw.close()
            return
        with conn:
            try:
                peer: Any = conn.getpeercert() or {}
                names = [v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"]
                self.peers.append(str(names[0]) if names else "")
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(4096)
                    if not data:
                        return
                    head += data
                self.heads.append(head.decode("latin-1"))
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                if self.stall:
                    conn.recv(1)  # until the client goes away
                    return
                body = b"".join(self.lines)
                for i in range(0, len(body), self.chunk):
                    part = body[i : i + self.chunk]
                    conn.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                conn.sendall(b"0\r\n\r\n")  # the server's timeout: a clean end
            except OSError:
                return


def event(kind: str, name: str, message: str = "") -> bytes:
    obj = {
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "apps", "resourceVersion": "7"},
        "status": {"conditions": [{"type": "Ready", "status": "False", "message": message}]},
    }
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


@pytest.fixture
def mtls() -> Iterator[tuple[WatchServer, tuple[bytes, bytes]]]:
    """The server, and the client certificate and key it accepts."""
    client_ca, cert, key = client_cert(CLIENT_CN)
    lines = [
        event("ADDED", "a"),
        event("MODIFIED", "big", "x" * 100_000),
        b'{"type":"BOOKMARK","object":{"kind":"Kustomization","metadata":{"resourceVersion":"9"}}}\n',
        event("DELETED", "a"),
    ]
    s = WatchServer(make_serving_cert(["127.0.0.1"]), client_ca, lines).start()
    yield s, (cert, key)
    s.stop()


def leaf(server: WatchServer, cert: tuple[bytes, bytes] | None) -> LeafClient:
    """A client with the server's CA and, when given, the client certificate and key."""
    user: dict[str, str] = {}
    if cert is not None:
        user = {
            "client-certificate-data": base64.b64encode(cert[0]).decode(),
            "client-key-data": base64.b64encode(cert[1]).decode(),
        }
    ca = base64.b64encode(server.serving.ca_pem).decode()
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [
            {"name": "c", "cluster": {"server": server.url, "certificate-authority-data": ca}}
        ],
        "users": [{"name": "u", "user": user}],
    }
    return LeafClient(ClusterConfig("c", "dir", "test", kubeconfig), timeout_s=5)


async def read_all(client: LeafClient, idle_s: float = 10) -> list[tuple[str, dict[str, Any]]]:
    stream = await async_watch.open_watch(
        client, async_watch.ssl_context(client), KS, "kustomizations", "5", 300, idle_s
    )
    assert stream.chunked
    return [e async for e in stream]


def test_client_certificate_tiny_chunks_and_a_clean_end(
    mtls: tuple[WatchServer, tuple[bytes, bytes]],
) -> None:
    server, cert = mtls
    client = leaf(server, cert)
    events = run(read_all(client))
    assert [(k, o["metadata"].get("name")) for k, o in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "big"),
        ("BOOKMARK", None),
        ("DELETED", "a"),
    ]
    assert events[1][1]["status"]["conditions"][0]["message"] == "x" * 100_000
    assert server.peers == [CLIENT_CN]
    head = server.heads[0]
    assert head.startswith(f"GET /apis/{KS}/kustomizations?watch=1&allowWatchBookmarks=true")
    assert "authorization" not in head.lower()  # the certificate is the identity: no token
    client.close()


def test_silent_server_breaks_the_stream(mtls: tuple[WatchServer, tuple[bytes, bytes]]) -> None:
    server, cert = mtls
    server.stall = True
    client = leaf(server, cert)
    with pytest.raises(ClusterUnreachable, match="silent"):
        run(read_all(client, idle_s=0.5))
    client.close()


def test_without_the_client_certificate_the_watch_fails(
    mtls: tuple[WatchServer, tuple[bytes, bytes]],
) -> None:
    server, _ = mtls
    client = leaf(server, None)
    with pytest.raises(ClusterUnreachable, match="watch"):
        run(read_all(client))
    assert server.peers == []
    client.close()
