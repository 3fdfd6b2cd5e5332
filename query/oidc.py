"""OIDC bearer tokens: JWKS from the issuer's discovery document, a URL or a file, verified
with PyJWT (RS256 and ES256 only; `none` and HMAC are refused before any key is used).

Keys are cached and refetched when a token names an unknown `kid` (at most once per
`refetch_interval_s`, so random kids cannot make us hammer the identity provider).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import jwt
import requests

from common.errors import ConfigError, Unauthenticated
from common.settings import Settings

ALGORITHMS = ("RS256", "ES256")
FETCH_TIMEOUT_S = 5.0
MAX_TOKEN_LEN = 16384


class JwksCache:
    """The identity provider's signing keys by `kid`, refreshed on an unknown kid."""

    def __init__(self, settings: Settings, refetch_interval_s: float = 10.0) -> None:
        self.settings = settings
        self.refetch_interval_s = refetch_interval_s
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = threading.Lock()
        self.fetches = 0

    def _jwks_url(self) -> str:
        s = self.settings
        if s.oidc_jwks_url:
            return s.oidc_jwks_url
        url = s.oidc_issuer_url.rstrip("/") + "/.well-known/openid-configuration"
        doc = self._get_json(url)
        if not isinstance(doc.get("jwks_uri"), str):
            raise Unauthenticated("the identity provider's discovery document has no jwks_uri")
        return str(doc["jwks_uri"])

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            resp = requests.get(url, timeout=FETCH_TIMEOUT_S)
            resp.raise_for_status()
            data = resp.json()
        except (requests.RequestException, ValueError) as e:
            raise Unauthenticated(
                f"cannot fetch the identity provider's keys ({type(e).__name__}); retry later"
            ) from e
        if not isinstance(data, dict):
            raise Unauthenticated("the identity provider sent no JSON object")
        return data

    def _load(self) -> dict[str, Any]:
        if self.settings.oidc_jwks_file:
            try:
                with open(self.settings.oidc_jwks_file) as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                raise ConfigError(f"FLEETSCOPE_OIDC_JWKS_FILE unreadable: {e}") from e
            return data if isinstance(data, dict) else {}
        return self._get_json(self._jwks_url())

    def _refresh(self) -> None:
        data = self._load()
        found: dict[str, jwt.PyJWK] = {}
        for raw in data.get("keys") or []:
            if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(raw)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key type or algorithm we do not accept
            if key.algorithm_name in ALGORITHMS:
                found[str(raw.get("kid", ""))] = key
        self._keys = found
        self._fetched_at = time.monotonic()
        self.fetches += 1

    def get(self, kid: str) -> jwt.PyJWK:
        key = self._keys.get(kid)
        if key is not None:
            return key
        with self._lock:
            if kid not in self._keys and (
                time.monotonic() - self._fetched_at >= self.refetch_interval_s
            ):
                self._refresh()
        key = self._keys.get(kid)
        if key is None:
            raise Unauthenticated("the token's signing key (kid) is not one of the issuer's keys")
        return key


class OidcVerifier:
    """Bearer JWT -> (username, groups) as kube-apiserver's `--oidc-*` flags would."""

    def __init__(self, settings: Settings, jwks: JwksCache | None = None) -> None:
        if not settings.oidc_issuer_url or not settings.oidc_client_id:
            raise ConfigError(
                "FLEETSCOPE_AUTH_MODE=oidc needs FLEETSCOPE_OIDC_ISSUER_URL and "
                "FLEETSCOPE_OIDC_CLIENT_ID"
            )
        self.settings = settings
        self.jwks = jwks or JwksCache(settings)

    def verify(self, token: str) -> tuple[str, tuple[str, ...]]:
        s = self.settings
        if len(token) > MAX_TOKEN_LEN:
            raise Unauthenticated("bearer token too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("the bearer token is not a JWT") from None
        if header.get("alg") not in ALGORITHMS:
            raise Unauthenticated(f"token algorithm must be one of {', '.join(ALGORITHMS)}")
        key = self.jwks.get(str(header.get("kid", "")))
        if key.algorithm_name != header["alg"]:
            raise Unauthenticated("the token's algorithm does not match its key")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[header["alg"]],
                audience=s.oidc_client_id,
                issuer=s.oidc_issuer_url,
                leeway=s.oidc_leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("the bearer token has expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("the bearer token is not valid yet (nbf)") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated("the bearer token is for another audience (aud)") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated("the bearer token is from another issuer (iss)") from None
        except jwt.PyJWTError as e:
            raise Unauthenticated(f"invalid bearer token ({type(e).__name__})") from None
        return self._identity(claims)

    def _identity(self, claims: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        s = self.settings
        user = claims.get(s.oidc_username_claim)
        if not isinstance(user, str) or not user:
            raise Unauthenticated(f"the token has no {s.oidc_username_claim!r} claim")
        if s.oidc_username_claim == "email":
            _check_email_verified(claims)
        raw_groups = claims.get(s.oidc_groups_claim) or []
        if isinstance(raw_groups, str):
            raw_groups = [raw_groups]
        if not isinstance(raw_groups, list):
            raise Unauthenticated(f"the token's {s.oidc_groups_claim!r} claim is not a list")
        groups = tuple(s.oidc_groups_prefix + g for g in raw_groups if isinstance(g, str) and g)
        # kube-apiserver prefixes non-email claims with the issuer by default; here the
        # prefix is explicit (empty = none), so the names match the leaf's RBAC subjects as set.
        name = s.oidc_username_prefix + user
        for what, value in (("user name", name), *(("group", g) for g in groups)):
            if value.startswith(SYSTEM_PREFIX) and value not in s.oidc_allowed_system_names:
                raise Unauthenticated(
                    f"the token's {what} {value[:80]!r} is a reserved `system:` name; an "
                    "operator may allow it with FLEETSCOPE_OIDC_ALLOWED_SYSTEM_NAMES"
                )
        return name, groups


SYSTEM_PREFIX = "system:"


def _check_email_verified(claims: dict[str, Any]) -> None:
    """kube-apiserver's rule for `--oidc-username-claim=email`: when the token carries
    `email_verified`, it must be the JSON boolean true (a string or false is refused); a
    token without the claim is accepted, as there."""
    if "email_verified" in claims and claims["email_verified"] is not True:
        raise Unauthenticated("the token's email is not verified (email_verified)")
