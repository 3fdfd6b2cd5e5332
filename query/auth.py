"""Who is calling: `oidc` (bearer JWT), `header` (a trusted proxy's X-Remote-User/Group) or
`anonymous` (explicit opt-in for demos). Every failure is a 401 JSON answer.

Identities are taken as a leaf's API server would take them (docs/security.md#identities): each
group header value is one group; a name that could not reach a leaf unchanged as an
Impersonate-* header value (control characters, outer blanks, beyond Latin-1) is refused.
The identity is a common.rbac.authorizer.UserInfo; query.state.caller adds `system:authenticated`.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from typing import Protocol

from flask import Request

from common.errors import Unauthenticated
from common.rbac.authorizer import ANONYMOUS, UserInfo
from common.settings import Settings
from query.gunicorn_worker import HEADER_FIELDS
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
        self.separator = settings.header_group_separator
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
        users = self._values(request, self.user_header)
        if len(users) > 1:
            raise Unauthenticated(f"the trusted proxy sent {self.user_header} more than once")
        name = _text(users[0].strip()) if users else ""
        if not name:
            raise Unauthenticated(f"the trusted proxy sent no {self.user_header} header")
        # Each header value is one group, as kube-apiserver's request-header authenticator
        # takes it: `cn=devs,system:masters` is one (odd) group, not two.
        values = [_text(raw.strip()) for raw in self._values(request, self.group_header)]
        if self.separator:
            values = [g.strip() for v in values for g in v.split(self.separator)]
        return _user(name, tuple(g for g in values if g))

    @staticmethod
    def _values(request: Request, header: str) -> list[str]:
        """Every field of `header` as received (query.gunicorn_worker), else the WSGI value:
        other servers join repeated fields with commas, so there they read as one value."""
        fields = request.environ.get(HEADER_FIELDS)
        if fields is None:
            return request.headers.getlist(header)
        upper = header.upper()
        return [value for name, value in fields if name == upper]


class AnonymousAuth:
    def __call__(self, request: Request) -> UserInfo:
        return UserInfo(ANONYMOUS, (UNAUTHENTICATED_GROUP,))


def _text(raw: str) -> str:
    """A header value as the bytes it arrived as, read as UTF-8 (what a Go API server compares);
    WSGI hands headers over decoded as Latin-1."""
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise Unauthenticated("identity headers must be UTF-8") from None


def header_safe(value: str) -> bool:
    """Can `value` travel as an Impersonate-* header value and arrive as the same name? No
    control characters (CR, LF, NUL, ESC, DEL, C1), no blanks at either end (HTTP trims them),
    nothing beyond Latin-1 (sent as UTF-8: common.leaf.client.header_value)."""
    if not value or value != value.strip(" \t"):
        return False
    if value.isascii():
        return value.isprintable()
    return all(ord(c) <= 0xFF and unicodedata.category(c) != "Cc" for c in value)


def _user(name: str, groups: tuple[str, ...]) -> UserInfo:
    if len(name) > MAX_NAME_LEN or len(groups) > MAX_GROUPS:
        raise Unauthenticated("identity too large")
    if any(len(g) > MAX_NAME_LEN for g in groups):
        raise Unauthenticated("group name too long")
    if not header_safe(name) or not all(header_safe(g) for g in groups):
        raise Unauthenticated(
            "the user or a group name cannot be passed on to the clusters unchanged: control "
            "characters, leading or trailing blanks and characters beyond Latin-1 are refused"
        )
    if name == ANONYMOUS or name.startswith("system:anonymous"):
        raise Unauthenticated("anonymous identities are only served in anonymous mode")
    return UserInfo(name, tuple(dict.fromkeys(groups)))


def make_authenticator(settings: Settings) -> Authenticator:
    if settings.auth_mode == "oidc":
        return OidcAuth(settings)
    if settings.auth_mode == "header":
        return HeaderAuth(settings)
    return AnonymousAuth()
