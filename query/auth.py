"""Who is calling: `oidc` (bearer JWT), `header` (a trusted proxy's X-Remote-User/Group) or
`anonymous` (explicit opt-in for demos). Every failure is a 401 JSON answer.

The identity is a common.rbac.authorizer.UserInfo; query.state.caller adds `system:authenticated`.
"""

from __future__ import annotations

import ipaddress
from typing import Protocol

from flask import Request

from common.errors import Unauthenticated
from common.rbac.authorizer import ANONYMOUS, UserInfo
from common.settings import Settings
from query.oidc import OidcVerifier

UNAUTHENTICATED_GROUP = "system:unauthenticated"
MAX_NAME_LEN = 512
MAX_GROUPS = 500


class Authenticator(Protocol):
    def __call__(self, request: Request) -> UserInfo: ...


class OidcAuth:
    def __init__(self, settings: Settings) -> None:
        self.verifier = OidcVerifier(settings)

    def __call__(self, request: Request) -> UserInfo:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("send `Authorization: Bearer <OIDC ID token>`")
        name, groups = self.verifier.verify(token.strip())
        return _user(name, groups)


_PEERS_MAX = 1024


class HeaderAuth:
    def __init__(self, settings: Settings) -> None:
        self.user_header = settings.remote_user_header
        self.group_header = settings.remote_group_header
        self.trusted = [ipaddress.ip_network(c, strict=False) for c in settings.trusted_proxy_cidrs]
        self._peers: dict[str | None, bool] = {}

    def _trusted(self, addr: str | None) -> bool:
        # Remembered per peer address (the proxies are few): parsing it and testing every
        # network cost more than the rest of authentication. Bounded, in case peers vary.
        known = self._peers.get(addr)
        if known is None:
            known = self._judge(addr)
            if len(self._peers) >= _PEERS_MAX:
                self._peers.clear()
            self._peers[addr] = known
        return known

    def _judge(self, addr: str | None) -> bool:
        try:
            ip = ipaddress.ip_address(addr or "")
        except ValueError:
            return False
        return any(ip in net for net in self.trusted)

    def __call__(self, request: Request) -> UserInfo:
        if not self._trusted(request.remote_addr):
            raise Unauthenticated("identity headers are accepted only from trusted proxies")
        name = request.headers.get(self.user_header, "").strip()
        if not name:
            raise Unauthenticated(f"the trusted proxy sent no {self.user_header} header")
        groups = [
            g.strip()
            for raw in request.headers.getlist(self.group_header)
            for g in raw.split(",")
            if g.strip()
        ]
        return _user(name, tuple(groups))


class AnonymousAuth:
    def __call__(self, request: Request) -> UserInfo:
        return UserInfo(ANONYMOUS, (UNAUTHENTICATED_GROUP,))


def _user(name: str, groups: tuple[str, ...]) -> UserInfo:
    if len(name) > MAX_NAME_LEN or len(groups) > MAX_GROUPS:
        raise Unauthenticated("identity too large")
    if any(len(g) > MAX_NAME_LEN for g in groups):
        raise Unauthenticated("group name too long")
    if name == ANONYMOUS or name.startswith("system:anonymous"):
        raise Unauthenticated("anonymous identities are only served in anonymous mode")
    return UserInfo(name, tuple(dict.fromkeys(groups)))


def make_authenticator(settings: Settings) -> Authenticator:
    if settings.auth_mode == "oidc":
        return OidcAuth(settings)
    if settings.auth_mode == "header":
        return HeaderAuth(settings)
    return AnonymousAuth()
