"""A tiny OIDC identity provider on a loopback port (discovery document and JWKS over real HTTP,
test keys that sign tokens), the forged token of the classic HS256 attack, and who the API
says a bearer token is."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

_GENERATED: dict[str, object] = {}


class Issuer:
    """A tiny identity provider: serves discovery and JWKS, counts requests, signs tokens."""

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, object]] = {}
        self.published: list[str] = []
        self.requests: list[str] = []
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests.append(self.path)
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/keys"}
                elif self.path == "/keys":
                    body = {"keys": [issuer.jwk(kid) for kid in issuer.published]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def add_key(self, kid: str, alg: str, publish: bool = True) -> None:
        if kid not in _GENERATED:  # RSA generation is slow: once per test session
            if alg == "RS256":
                _GENERATED[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            else:
                _GENERATED[kid] = ec.generate_private_key(ec.SECP256R1())
        self.keys[kid] = (alg, _GENERATED[kid])
        if publish:
            self.published.append(kid)

    def jwk(self, kid: str) -> dict:
        alg, key = self.keys[kid]
        if alg == "ES256":
            # RFC 7518 6.2.1.2: coordinates are the full 32 bytes. PyJWT < 2.10's to_jwk drops
            # leading zero bytes (1 key in ~64) and its from_jwk then refuses its own output.
            nums = key.public_key().public_numbers()
            coord = lambda n: base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()  # noqa: E731
            data = {"kty": "EC", "crv": "P-256", "x": coord(nums.x), "y": coord(nums.y)}
        else:
            algo = jwt.get_algorithm_by_name(alg)
            data = json.loads(algo.to_jwk(key.public_key()))  # type: ignore[attr-defined]
        return {**data, "kid": kid, "use": "sig", "alg": alg}

    def token(self, kid: str = "rsa1", **claims: object) -> str:
        alg, key = self.keys[kid]
        now = int(time.time())
        body = {
            "iss": self.url,
            "aud": "fleetscope",
            "sub": "u-123",
            "exp": now + 300,
            "iat": now,
            "email": "dana@example.com",
            "groups": ["sre", "team-a"],
            **claims,
        }
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})


def forge_hs256(claims: dict, secret: bytes) -> str:
    """The classic attack: HS256 "signed" with the issuer's public key (by hand: PyJWT refuses)."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa1"}).encode())
    body = b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(mac)}"


def whoami(app, token: str | None):
    h = {"Authorization": f"Bearer {token}"} if token is not None else {}
    resp = app.test_client().get("/api/v1/access", headers=h)
    return resp.status_code, resp.get_json()
