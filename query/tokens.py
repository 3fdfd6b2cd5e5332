"""Continue tokens: opaque, HMAC-signed (cluster, last sort key, filters hash) positions; a
time-ordered walk's (`sort`) also hold the last row's time, the walk's start and the order.

The key is `FLEETSCOPE_CONTINUE_TOKEN_KEY`, or a random key stored once in Redis (SET NX) so
every worker and replica signs alike. Redis is ephemeral: each process re-asserts the key it
uses every few seconds (SET NX), so a flushed Redis gets the fleet's key back, and a token that
fails under the cached key is checked again against Redis's current key (a replica that started
while Redis was empty may have made a new one). A token that was tampered with, is not ours,
or was made for other filters is refused with 400 (`continue`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets
import threading
import time
from typing import Any

import redis

from common import redis_client
from common.errors import InvalidInput
from common.index import keys
from common.index.read.groups import GroupCursor
from common.index.read.reader import Cursor, Filters
from common.index.read.timesort import TimeCursor

VERSION = 1
MAX_TOKEN_LEN = 2048
REASSERT_S = 10.0  # how often a process puts its key back into Redis (SET NX: no-op if there)
RECHECK_S = 1.0  # at most this often, a failing token makes us re-read Redis's key
KEEP_KEYS = 3  # keys accepted for verification: the current one and two earlier ones


@functools.lru_cache(maxsize=1024)  # every page's token carries it; filters repeat
def filters_hash(f: Filters) -> str:
    parts: list[object] = [
        sorted(f.clusters),
        sorted(f.namespaces),
        sorted(f.kinds),
        sorted(f.statuses),
        f.name,
    ]
    if f.suspended is not None:  # appended only when set: tokens made without it stay valid
        parts.append(f.suspended)
    if f.flapping:
        parts.append(f"flapping>={f.flapping}")
    if f.drift:  # appended only when set, as above
        parts.append("drift")
    if f.labels:  # appended only when set, as `suspended`
        parts.append(f"labels:{f.labels.canonical()}")
    canon = json.dumps(parts, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _object_hash(made_for: str) -> str:
    return hashlib.sha256(made_for.encode()).hexdigest()[:16]


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
    """Signs with the current key; verifies with the current and recently replaced keys."""

    def __init__(self, key: bytes, r: redis.Redis | None = None) -> None:
        self.keys = [key]
        self._r = r  # None: a configured key, never refreshed from Redis
        self._asserted_at = self._rechecked_at = time.monotonic()
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, r: redis.Redis, configured: str) -> TokenSigner:
        if configured:
            return cls(configured.encode())
        return cls(shared_key(r, ""), r)

    @property
    def key(self) -> bytes:
        if self._r is not None and time.monotonic() - self._asserted_at > REASSERT_S:
            self._refresh()
        return self.keys[0]

    def _refresh(self) -> None:
        """Put our key back if Redis lost it; adopt Redis's key if another process made one."""
        assert self._r is not None
        with self._lock:
            self._asserted_at = self._rechecked_at = time.monotonic()
            try:
                self._r.set(keys.TOKEN_KEY, self.keys[0], nx=True)
                current = self._r.get(keys.TOKEN_KEY)
            except redis_client.ERRORS:
                return  # keep signing with what we have; Redis errors surface elsewhere
            if isinstance(current, bytes) and current != self.keys[0]:
                self.keys = [current, *[k for k in self.keys if k != current]][:KEEP_KEYS]

    def _mac(self, payload: bytes, key: bytes | None = None) -> str:
        return _b64(hmac.digest(key or self.key, payload, "sha256")[:18])  # one-shot, in C

    def _verified(self, payload: bytes, mac: str) -> bool:
        if any(hmac.compare_digest(mac, self._mac(payload, k)) for k in self.keys):
            return True
        if self._r is None or time.monotonic() - self._rechecked_at < RECHECK_S:
            return False
        self._refresh()
        return any(hmac.compare_digest(mac, self._mac(payload, k)) for k in self.keys)

    def encode(self, cursor: Cursor, filters: Filters) -> str:
        body = {
            "v": VERSION,
            "c": cursor.cluster,
            "k": _b64(cursor.identity),
            "f": filters_hash(filters),
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._mac(payload)}"

    def encode_time(self, cursor: TimeCursor, filters: Filters, sort: str) -> str:
        body = {
            "v": VERSION,
            "c": cursor.cluster,
            "k": _b64(cursor.entry),
            "t": cursor.at,
            "s": cursor.start,
            "o": sort,
            "f": filters_hash(filters),
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._mac(payload)}"

    def decode_time(self, token: str, filters: Filters, sort: str) -> TimeCursor:
        body = self._body(token, filters, sort)
        try:
            return TimeCursor(
                int(body["t"]), str(body["c"]), _unb64(str(body["k"])), int(body["s"])
            )
        except (ValueError, KeyError, TypeError):
            raise _bad() from None

    def encode_group(self, cursor: GroupCursor, filters: Filters, by: str) -> str:
        """A group walk's position (`/api/v1/groups`): the last group's unhealthy count and
        key, and when the walk began; made for one `by`."""
        body = {
            "v": VERSION,
            "u": cursor.unhealthy,
            "k": _b64(cursor.key),
            "s": cursor.start,
            "o": f"groups:{by}",
            "f": filters_hash(filters),
        }
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._mac(payload)}"

    def decode_group(self, token: str, filters: Filters, by: str) -> GroupCursor:
        body = self._body(token, filters, f"groups:{by}")
        try:
            return GroupCursor(int(body["u"]), _unb64(str(body["k"])), int(body["s"]))
        except (ValueError, KeyError, TypeError):
            raise _bad() from None

    def encode_position(self, rank: int, cluster: str, filters: Filters, what: str) -> str:
        """A position in a group's cluster list (worst status first: its rank, then cluster)."""
        body = {"v": VERSION, "t": rank, "c": cluster, "o": what, "f": filters_hash(filters)}
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._mac(payload)}"

    def decode_position(self, token: str, filters: Filters, what: str) -> tuple[int, str]:
        body = self._body(token, filters, what)
        try:
            return int(body["t"]), str(body["c"])
        except (ValueError, KeyError, TypeError):
            raise _bad() from None

    def encode_history(self, position: int, made_for: str) -> str:
        """A position in one object's history (`.../history`): the last entry's position;
        `made_for` names the object (its cluster and identity)."""
        body = {"v": VERSION, "t": position, "o": "history", "f": _object_hash(made_for)}
        payload = json.dumps(body, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{self._mac(payload)}"

    def decode_history(self, token: str, made_for: str) -> int:
        body = self._verified_body(token, _object_hash(made_for), "history")
        try:
            return int(body["t"])
        except (ValueError, KeyError, TypeError):
            raise _bad() from None

    def decode(self, token: str, filters: Filters) -> Cursor:
        body = self._body(token, filters, "")
        try:
            return Cursor(str(body["c"]), _unb64(str(body["k"])))
        except (ValueError, KeyError, TypeError):
            raise _bad() from None

    def _body(self, token: str, filters: Filters, sort: str) -> dict[str, Any]:
        """A token's verified body, made for these filters and this order."""
        return self._verified_body(token, filters_hash(filters), sort)

    def _verified_body(self, token: str, wanted: str, sort: str) -> dict[str, Any]:
        bad = _bad()
        if len(token) > MAX_TOKEN_LEN or token.count(".") != 1:
            raise bad
        body_b64, mac = token.split(".")
        try:
            payload = _unb64(body_b64)
        except (ValueError, TypeError):
            raise bad from None
        if not self._verified(payload, mac):
            raise bad
        try:
            body = json.loads(payload)
            made_for = str(body["f"])
        except (ValueError, KeyError, TypeError):
            raise bad from None
        if not isinstance(body, dict) or body.get("v") != VERSION:
            raise bad
        if made_for != wanted or body.get("o", "") != sort:
            raise InvalidInput(
                "continue",
                "this token was made for other filters or another sort (or grouping); repeat "
                "the query with the parameters of the first page, or drop `continue` to start "
                "over",
            )
        return body


def _bad() -> InvalidInput:
    return InvalidInput(
        "continue",
        "not a continue token of this service; pass the `continue` value of the "
        "previous page unchanged, with the same filters",
    )
