"""Identity attacks, each a 401 JSON answer: OIDC tokens with `alg: none`, the wrong key, HMAC
signed with the issuer's public key, expired, not yet valid, foreign `aud`/`iss`, unknown or
missing `kid`; header identity from an untrusted address (over real HTTP, forwarded-for headers
ignored); no identity at all, unless anonymous mode is explicitly on (it is not the default)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from common.errors import ConfigError
from common.settings import Settings
from query.app import create_app
from tests.support.http import raw_get, serve
from tests.support.oidc import Issuer, forge_hs256
from tests.support.small_fleet import ADMIN

_ATTACKER_KEY: list[rsa.RSAPrivateKey] = []


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    iss = Issuer()
    iss.add_key("rsa1", "RS256")
    iss.add_key("ec1", "ES256")
    yield iss
    iss.server.shutdown()
    iss.server.server_close()


def attacker_key() -> rsa.RSAPrivateKey:
    if not _ATTACKER_KEY:
        _ATTACKER_KEY.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return _ATTACKER_KEY[0]


def claims(issuer: Issuer, **over: object) -> dict:
    now = int(time.time())
    base = {"iss": issuer.url, "aud": "fleetscope", "sub": "mallory", "exp": now + 300}
    return {**base, **over}


def attacks(issuer: Issuer) -> dict[str, str]:
    now = int(time.time())
    _, rsa_key = issuer.keys["rsa1"]
    public_pem = rsa_key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    evil = attacker_key()
    return {
        "alg none": jwt.encode(claims(issuer), None, algorithm="none", headers={"kid": "rsa1"}),
        "wrong key, real kid": jwt.encode(claims(issuer), evil, "RS256", headers={"kid": "rsa1"}),
        "unknown kid": jwt.encode(claims(issuer), evil, "RS256", headers={"kid": "evil"}),
        "no kid": jwt.encode(claims(issuer), evil, "RS256"),
        "hmac with public key": forge_hs256(claims(issuer), public_pem),
        "RS256 token naming the EC key": jwt.encode(
            claims(issuer), evil, "RS256", headers={"kid": "ec1"}
        ),
        "expired": issuer.token(exp=now - 3600),
        "not yet valid": issuer.token(nbf=now + 3600),
        "wrong aud": issuer.token(aud="another-app"),
        "wrong iss": issuer.token(iss="https://evil.example"),
        "no exp": issuer.token(exp=None),
        "truncated signature": issuer.token()[:-10],
        "not a jwt": "x" * 40,
    }


def test_forged_and_invalid_tokens_are_401(issuer: Issuer, redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url,
        auth_mode="oidc",
        oidc_issuer_url=issuer.url,
        oidc_client_id="fleetscope",
    )
    client = create_app(settings).test_client()
    good = client.get("/api/v1/access", headers={"Authorization": f"Bearer {issuer.token()}"})
    assert good.status_code == 200, "the control: a valid token is accepted"
    for what, token in attacks(issuer).items():
        resp = client.get("/api/v1/objects", headers={"Authorization": f"Bearer {token}"})
        body = resp.get_json()
        assert resp.status_code == 401 and body["error"] == "unauthenticated", what
        assert resp.headers["WWW-Authenticate"].startswith("Bearer"), what
    for headers in ({}, {"Authorization": "Basic YWRtaW46YWRtaW4="}, ADMIN):
        assert client.get("/api/v1/objects", headers=headers).status_code == 401


def test_header_identity_only_from_trusted_proxies(redis_url: str) -> None:
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("10.0.0.0/8",)
    )
    with serve(create_app(settings)) as host:  # we call from 127.0.0.1: not a trusted proxy
        for extra in ({}, {"X-Forwarded-For": "10.0.0.1"}, {"X-Real-IP": "10.0.0.1"}):
            status, body = raw_get(host, "/api/v1/objects", {**ADMIN, **extra})
            assert status == 401 and body["error"] == "unauthenticated", extra
    trusted = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    with serve(create_app(trusted)) as host:
        assert raw_get(host, "/api/v1/objects", {"X-Remote-Group": "fleet-admins"})[0] == 401
        anon = {"X-Remote-User": "system:anonymous", "X-Remote-Group": "fleet-admins"}
        assert raw_get(host, "/api/v1/objects", anon)[0] == 401
        assert raw_get(host, "/api/v1/objects", ADMIN)[0] == 200, "the control"


def test_anonymous_is_never_the_default() -> None:
    assert Settings().auth_mode == "oidc"
    assert Settings.from_env({}).auth_mode == "oidc"
    with pytest.raises(ConfigError):  # oidc without an issuer fails at start, not open
        create_app(Settings.from_env({}))
