"""The one lease type: a Redis key held under a random token for a TTL (SET NX PX), renewed while
its work goes on, released by compare-and-delete, and checked by writers as a fence. Sync locks
(collector.lock) and watcher cluster ownership (collector.watch.replica) are both leases; a
holder that dies stops renewing, so its lease expires after the TTL. `delete_if` is the same
compare-and-delete for a key beside a lease (a watcher's claim on another replica's cluster).

The fence is a second key (`keys.owner`): the holder's token, written when the lease is taken
and deleted when it is released, but not by renewals. Writers WATCH it and read both keys: a
renewal (a PEXPIRE every few seconds) would otherwise abort every transaction that outlasts it,
and a watcher writing thousands of rows on a busy machine never got one through."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from common.errors import LockBusy
from common.index import keys
from common.redis_client import text

# Each acts only while the key still holds our token (never on another holder's lease).
_ACQUIRE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('set', KEYS[2], ARGV[1])
  return 1
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  if redis.call('get', KEYS[2]) == ARGV[1] then redis.call('del', KEYS[2]) end
  return redis.call('del', KEYS[1])
end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_DELETE_IF = """
local held = redis.call('get', KEYS[1])
for _, value in ipairs(ARGV) do
  if held == value then return redis.call('del', KEYS[1]) end
end
return 0
"""


@dataclass(frozen=True)
class Fence:
    """Write only while the lease `key` and its owner key hold `token` (common.index.write.writer
    reads both and WATCHes the owner key)."""

    key: str
    token: str

    @property
    def owner(self) -> str:
        return keys.owner(self.key)


def ttl_ms(ttl_s: float) -> int:
    """A lease TTL in milliseconds (at least one second)."""
    return max(1000, int(ttl_s * 1000))


def new_token(prefix: str = "") -> str:
    """A holder's random token; `prefix` names the holder for operators reading the key."""
    return f"{prefix}:{secrets.token_hex(8)}" if prefix else secrets.token_hex(16)


@dataclass(frozen=True)
class Lease:
    """One lease: `key` held with `token` for `ttl_ms`."""

    r: redis.Redis
    key: str
    token: str
    ttl_ms: int

    @property
    def fence(self) -> Fence:
        return Fence(self.key, self.token)

    def acquire(self) -> bool:
        """Take the lease if nobody holds it (or we still do: an expired, untaken lease of ours)."""
        args = (self.token, str(self.ttl_ms))
        return bool(self.r.eval(_ACQUIRE, 2, self.key, keys.owner(self.key), *args))

    def renew(self) -> bool:
        """Extend the TTL while the lease is ours; False once it is gone."""
        return bool(self.r.eval(_RENEW, 1, self.key, self.token, str(self.ttl_ms)))

    def release(self) -> None:
        """Give the lease up now (a clean hand-over, no TTL wait); a no-op if it is not ours."""
        self.r.eval(_RELEASE, 2, self.key, keys.owner(self.key), self.token)


def renew_all(r: redis.Redis, leases: Sequence[Lease]) -> list[bool]:
    """Renew many leases in one pipelined round trip: whether each is still ours."""
    if not leases:
        return []
    pipe: Any = r.pipeline(transaction=False)
    for lease in leases:
        pipe.execute_command("EVAL", _RENEW, 1, lease.key, lease.token, str(lease.ttl_ms))
    return [bool(ok) for ok in pipe.execute()]


def delete_if(r: redis.Redis, key: str, *values: str) -> bool:
    """Delete `key` only while it holds one of `values` (a claim or a mark of ours, never
    another holder's), in one round trip; whether it was deleted."""
    return bool(r.eval(_DELETE_IF, 1, key, *values))


def check(pipe: Any, fence: Fence | None, what: str) -> None:
    """Inside a WATCHing pipeline: raise LockBusy unless the fence is still ours (the WATCH on
    its owner key then makes the EXEC fail if the lease changes hands before the write)."""
    if fence is None:
        return
    pipe.watch(fence.owner)
    # execute_command: redis-py's cluster pipeline refuses its mget() even for one slot.
    held, owner = (text(v) for v in pipe.execute_command("MGET", fence.key, fence.owner))
    if held != fence.token or owner != fence.token:
        raise LockBusy(f"{what}: {fence.key} is no longer ours; nothing written")
