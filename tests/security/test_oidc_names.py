"""OIDC identities as a leaf's API server would take them: with the `email` username claim, a
token whose `email_verified` is false (or not the boolean true) is refused, as kube-apiserver
refuses it; `system:` user and group names from a token (`system:masters`,
`system:serviceaccount:...`, even `system:authenticated`) are refused unless an operator lists
them in FLEETSCOPE_OIDC_ALLOWED_SYSTEM_NAMES. Each refusal is a 401 JSON answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from common.errors import ConfigError
from common.settings import Settings
from tests.support.http import make_app
from tests.support.oidc import Issuer, whoami


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    iss = Issuer()
    iss.add_key("rsa1", "RS256")
    yield iss
    iss.server.shutdown()
    iss.server.server_close()


def oidc_app(issuer: Issuer, redis_url: str, **changes: object):
    settings = Settings(
        redis_url=redis_url,
        auth_mode="oidc",
        oidc_issuer_url=issuer.url,
        oidc_client_id="fleetscope",
        **changes,  # type: ignore[arg-type]
    )
    return make_app(settings)


def refused(answer: tuple[int, dict]) -> str:
    status, body = answer
    assert status == 401, body
    assert body["error"] == "unauthenticated" and body["message"]
    return str(body["message"])


@pytest.mark.parametrize("verified", [False, "false", "true", 0, []])
def test_unverified_email_is_refused(issuer: Issuer, seeded, redis_url: str, verified) -> None:
    app = oidc_app(issuer, redis_url, oidc_username_claim="email")
    token = issuer.token(email="mallory@example.com", email_verified=verified)
    assert "email_verified" in refused(whoami(app, token))


def test_verified_or_absent_email_verified_is_accepted(issuer: Issuer, seeded, redis_url) -> None:
    app = oidc_app(issuer, redis_url, oidc_username_claim="email")
    for token in (
        issuer.token(email="dana@example.com", email_verified=True),
        issuer.token(email="dana@example.com"),  # kube-apiserver checks it only when present
    ):
        status, body = whoami(app, token)
        assert status == 200 and body["user"]["name"] == "dana@example.com"


def test_email_verified_only_matters_for_the_email_claim(issuer: Issuer, seeded, redis_url) -> None:
    app = oidc_app(issuer, redis_url, oidc_username_claim="sub")
    status, body = whoami(app, issuer.token(sub="u-1", email_verified=False))
    assert status == 200 and body["user"]["name"] == "u-1"


@pytest.mark.parametrize(
    "claims",
    [
        {"groups": ["devs", "system:masters"]},
        {"groups": "system:masters"},
        {"groups": ["system:nodes"]},
        {"groups": ["system:authenticated"]},
        {"sub": "system:serviceaccount:kube-system:clusterrole-aggregation-controller"},
        {"sub": "system:admin"},
        {"sub": "system:kube-controller-manager"},
    ],
)
def test_system_names_from_a_token_are_refused(
    issuer: Issuer, seeded, redis_url: str, claims: dict
) -> None:
    app = oidc_app(issuer, redis_url)
    message = refused(whoami(app, issuer.token(**claims)))
    assert "system:" in message and "FLEETSCOPE_OIDC_ALLOWED_SYSTEM_NAMES" in message


def test_a_prefix_makes_system_names_harmless(issuer: Issuer, seeded, redis_url: str) -> None:
    app = oidc_app(issuer, redis_url, oidc_username_prefix="oidc:", oidc_groups_prefix="oidc:")
    token = issuer.token(sub="system:admin", groups=["system:masters"])
    status, body = whoami(app, token)
    assert status == 200
    assert body["user"]["name"] == "oidc:system:admin"
    assert "oidc:system:masters" in body["user"]["groups"]


def test_the_allow_list_lets_named_system_names_through(
    issuer: Issuer, seeded, redis_url: str
) -> None:
    app = oidc_app(
        issuer,
        redis_url,
        oidc_allowed_system_names=("system:serviceaccount:ci:deployer", "system:monitoring"),
    )
    token = issuer.token(sub="system:serviceaccount:ci:deployer", groups=["system:monitoring"])
    status, body = whoami(app, token)
    assert status == 200
    assert body["user"]["name"] == "system:serviceaccount:ci:deployer"
    assert body["user"]["groups"] == ["system:monitoring", "system:authenticated"]
    # Listed names only: another system: group in the same token is still refused.
    token = issuer.token(sub="system:serviceaccount:ci:deployer", groups=["system:masters"])
    refused(whoami(app, token))


@pytest.mark.parametrize("names", [("system:authenticated",), ("system:anonymous",), ("masters",)])
def test_the_allow_list_takes_only_system_names_tokens_may_carry(names) -> None:
    with pytest.raises(ConfigError, match="FLEETSCOPE_OIDC_ALLOWED_SYSTEM_NAMES"):
        Settings().replace(oidc_allowed_system_names=names)


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "alice\r\nImpersonate-Group: system:masters"},
        {"sub": "alice\n"},
        {"sub": "al\x1bice"},
        {"sub": "ユーザー"},
        {"sub": " alice"},
        {"groups": ["devs\r\nX-Evil: 1"]},
        {"groups": ["devs\x00"]},
        {"groups": ["開発"]},
        {"groups": ["devs "]},
    ],
)
def test_identities_that_are_not_header_safe_are_401(
    issuer: Issuer, seeded, redis_url: str, claims: dict
) -> None:
    app = oidc_app(issuer, redis_url)
    message = refused(whoami(app, issuer.token(**claims)))
    assert "cannot be passed on" in message
