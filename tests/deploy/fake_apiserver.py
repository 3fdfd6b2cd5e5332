"""A tiny Kubernetes API server on loopback (HTTPS) for driving the real `kubectl` in tests.

It serves discovery for core/v1 and the Secrets it is given, records requests and bearer tokens,
and leaves a token Secret's `data` empty for its first `token_delay` reads, as the token
controller does. Its certificate is self-signed for 127.0.0.1 (`ca_pem` verifies it).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

API_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "secrets",
            "singularName": "secret",
            "namespaced": True,
            "kind": "Secret",
            "verbs": ["get", "list"],
        }
    ],
}


class FakeApiServer:
    def __init__(self, secrets: dict[tuple[str, str], dict[str, Any]], token_delay: int = 0):
        self.secrets = secrets
        self.token_delay = token_delay
        self.requests: list[tuple[str, str]] = []
        self.bearer_tokens: set[str] = set()
        self.secret_reads = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.ca_pem = _serve_tls(self.httpd)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def _answer(self, path: str) -> tuple[int, dict[str, Any]]:
        if path == "/api":
            return 200, {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [],
            }
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
        if path == "/api/v1":
            return 200, API_RESOURCES
        parts = path.strip("/").split("/")
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
            secret = self.secrets.get((parts[3], parts[5]))
            if secret is not None:
                self.secret_reads += 1
                if self.secret_reads <= self.token_delay:
                    return 200, {**secret, "data": {}}
                return 200, secret
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                server.requests.append(("GET", path))
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Bearer "):
                    server.bearer_tokens.add(auth[len("Bearer ") :])
                code, body = server._answer(path)
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _serve_tls(httpd: ThreadingHTTPServer) -> str:
    """Wrap the server's socket in TLS with a fresh self-signed certificate; return its PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-apiserver")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cert.pem").write_text(cert_pem)
        (Path(tmp) / "key.pem").write_text(key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(Path(tmp) / "cert.pem", Path(tmp) / "key.pem")
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    return cert_pem


@contextmanager
def fake_apiserver(
    secrets: dict[tuple[str, str], dict[str, Any]], token_delay: int = 0
) -> Iterator[FakeApiServer]:
    server = FakeApiServer(secrets, token_delay)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(5)
