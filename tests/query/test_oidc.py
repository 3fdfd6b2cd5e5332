"""OIDC identity against a local issuer (discovery document + JWKS over real HTTP) with test
keys: RS256/ES256 accepted; expired, immature, foreign audience/issuer, `none` and HMAC refused;
an unknown kid refetches the keys once; claims and prefixes map to the user and groups."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from common.settings import Settings
from tests.support.http import make_app
from tests.support.oidc import Issuer, forge_hs256, whoami


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
