"""Continue tokens: opaque, HMAC-signed (cluster, last sort key, filters hash) positions.

The key is `FLEETSCOPE_CONTINUE_TOKEN_KEY`, or a random key stored once in Redis (SET NX) so
every worker and replica signs alike. A token that was tampered with, is not ours, or was made
for other filters is refused with 400 (`continue`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets

import redis

from common import keys
from common.errors import InvalidInput
from common.reader import Cursor, Filters

VERSION = 1
MAX_TOKEN_LEN = 2048


def filters_hash(f: Filters) -> str:
    canon = json.dumps(
        [sorted(f.clusters), sorted(f.namespaces), sorted(f.kinds), sorted(f.statuses), f.name],
        separators=(",", ":"),
    )
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def shared_key(r: redis.Redis, configured: str) -> bytes:
    """The signing key: configured, else the fleet-wide random one in Redis (created once)."""
    if configured:
        return configured.encode()
    r.set(keys.TOKEN_KEY, secrets.token_hex(32), nx=True)
    value = r.get(keys.TOKEN_KEY)
    if value is None:  # deleted between SET NX and GET: try once more
        r.set(keys.TOKEN_KEY, secrets.token_hex(32), nx=True)
        value = r.get(keys.TOKEN_KEY)
    return value if isinstance(value, bytes) else str(value).encode()


class TokenSigner:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def _mac(self, payload: bytes) -> str:
        return _b64(hmac.new(self.key, payload, hashlib.sha256).digest()[:18])

    def encode(self, cursor: Cursor, filters: Filters) -> str:
        body = {
            "v": VERSION,
            "c": cursor.cluster,
            "k": _b64(cursor.identity),
            "f": filters_hash(filters),
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._mac(payload)}"

    def decode(self, token: str, filters: Filters) -> Cursor:
        bad = InvalidInput(
            "continue",
            "not a continue token of this service; pass the `continue` value of the "
            "previous page unchanged, with the same filters",
        )
        if len(token) > MAX_TOKEN_LEN or token.count(".") != 1:
            raise bad
        body_b64, mac = token.split(".")
        try:
            payload = _unb64(body_b64)
        except (ValueError, TypeError):
            raise bad from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise bad
        try:
            body = json.loads(payload)
            cursor = Cursor(str(body["c"]), _unb64(str(body["k"])))
            made_for = str(body["f"])
        except (ValueError, KeyError, TypeError):
            raise bad from None
        if body.get("v") != VERSION:
            raise bad
        if made_for != filters_hash(filters):
            raise InvalidInput(
                "continue",
                "this token was made for other filters; repeat the query with the "
                "filters of the first page, or drop `continue` to start over",
            )
        return cursor
