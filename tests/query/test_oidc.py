"""OIDC identity against a local issuer (discovery document + JWKS over real HTTP) with test
keys: RS256/ES256 accepted; expired, immature, foreign audience/issuer, `none` and HMAC refused;
an unknown kid refetches the keys once; claims and prefixes map to the user and groups."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from common.settings import Settings
from tests.query.conftest import make_app

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


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    iss = Issuer()
    iss.add_key("rsa1", "RS256")
    iss.add_key("ec1", "ES256")
    yield iss
    iss.server.shutdown()
    iss.server.server_close()


@pytest.fixture
def app(issuer: Issuer, seeded, redis_url: str):
    settings = Settings(
        redis_url=redis_url,
        auth_mode="oidc",
        oidc_issuer_url=issuer.url,
        oidc_client_id="fleetscope",
        oidc_username_claim="email",
        oidc_username_prefix="oidc:",
        oidc_groups_prefix="oidc:",
    )
    return make_app(settings)


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


@pytest.mark.parametrize("kid", ["rsa1", "ec1"])
def test_valid_tokens_map_claims_and_prefixes(app, issuer: Issuer, kid: str) -> None:
    status, body = whoami(app, issuer.token(kid))
    assert status == 200, body
    # system:authenticated is added by the identity layer, as kube-apiserver does
    groups = ["oidc:sre", "oidc:team-a", "system:authenticated"]
    assert body["user"] == {"name": "oidc:dana@example.com", "groups": groups}


def test_bad_tokens_are_401_json(app, issuer: Issuer) -> None:
    now = int(time.time())
    _, rsa_key = issuer.keys["rsa1"]
    public_pem = rsa_key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    unsigned = jwt.encode(
        {"iss": issuer.url, "aud": "fleetscope", "email": "x", "exp": now + 60},
        None,
        algorithm="none",
        headers={"kid": "rsa1"},
    )
    hmac_forged = forge_hs256(
        {"iss": issuer.url, "aud": "fleetscope", "email": "x", "exp": now + 60}, public_pem
    )
    bad = {
        "expired": issuer.token(exp=now - 3600),
        "not yet valid": issuer.token(nbf=now + 3600),
        "other audience": issuer.token(aud="someone-else"),
        "other issuer": issuer.token(iss="https://evil.example"),
        "no exp": issuer.token(exp=None),
        "alg none": unsigned,
        "hmac with public key": hmac_forged,
        "garbage": "not.a.jwt",
        "no username claim": issuer.token(email=None),
    }
    for what, token in bad.items():
        status, body = whoami(app, token)
        assert status == 401, what
        assert body["error"] == "unauthenticated" and body["message"], what
    assert whoami(app, None)[0] == 401
    resp = app.test_client().get("/api/v1/access", headers={"Authorization": "Basic eDp5"})
    assert resp.status_code == 401


def test_leeway_accepts_small_clock_skew(app, issuer: Issuer) -> None:
    assert whoami(app, issuer.token(exp=int(time.time()) - 5))[0] == 200


def test_unknown_kid_refetches_keys_once(app, issuer: Issuer) -> None:
    assert whoami(app, issuer.token("rsa1"))[0] == 200
    fetches = issuer.requests.count("/keys")
    assert whoami(app, issuer.token("rsa1"))[0] == 200
    assert issuer.requests.count("/keys") == fetches, "keys are cached"
    app.extensions["fleetscope"].authenticate.verifier.jwks.refetch_interval_s = 0
    issuer.add_key("rsa2", "RS256")  # key rotation at the issuer
    assert whoami(app, issuer.token("rsa2"))[0] == 200
    assert issuer.requests.count("/keys") == fetches + 1
    app.extensions["fleetscope"].authenticate.verifier.jwks.refetch_interval_s = 3600
    issuer.add_key("unpublished", "RS256", publish=False)
    for _ in range(3):
        assert whoami(app, issuer.token("unpublished"))[0] == 401
    assert issuer.requests.count("/keys") == fetches + 1, "unknown kids are rate-limited"


def test_jwks_file_works_offline(issuer: Issuer, seeded, redis_url: str, tmp_path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [issuer.jwk("ec1")]}))
    settings = Settings(
        redis_url=redis_url,
        auth_mode="oidc",
        oidc_issuer_url=issuer.url,
        oidc_client_id="fleetscope",
        oidc_jwks_file=str(path),
    )
    app = make_app(settings)
    status, body = whoami(app, issuer.token("ec1"))
    assert status == 200 and body["user"]["name"] == "u-123"
    assert issuer.requests == []


def test_anonymous_mode_is_system_anonymous(seeded, redis_url: str) -> None:
    app = make_app(Settings(redis_url=redis_url, auth_mode="anonymous"))
    status, body = whoami(app, None)
    assert status == 200
    assert body["user"] == {"name": "system:anonymous", "groups": ["system:unauthenticated"]}
    assert body["clusters"] == []
