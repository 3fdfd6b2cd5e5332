"""The per-cluster sync lock: SET NX PX with a random token, renewed by a background thread while
the sync works, released by compare-and-delete. A killed worker's lock expires after `ttl_s`."""

from __future__ import annotations

import logging
import secrets
import threading
from types import TracebackType

import redis

from common.errors import LockBusy
from common.index import keys
from common.index.store import Fence

log = logging.getLogger(__name__)

# Both only act while the lock still holds our token (never on another worker's lock).
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


class ClusterLock:
    """`with ClusterLock(r, cluster, ttl_s):` raises LockBusy when another worker holds it."""

    def __init__(self, r: redis.Redis, cluster: str, ttl_s: float, work: str = "objects") -> None:
        self.r = r
        self.cluster = cluster
        self.key = keys.lock(cluster, work)
        self.ttl_ms = max(1000, int(ttl_s * 1000))
        self.token = secrets.token_hex(16)
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def fence(self) -> Fence:
        """For common.index.store: write only while this lock is still ours."""
        return Fence(self.key, self.token)

    def acquire(self) -> None:
        if not self.r.set(self.key, self.token, nx=True, px=self.ttl_ms):
            raise LockBusy(f"cluster {self.cluster} is being synced by another worker")
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="lock-renew")
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.r.eval(_RELEASE, 1, self.key, self.token)
        except redis.RedisError:
            log.warning("could not release the sync lock; it expires by itself", exc_info=True)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                if not self.r.eval(_RENEW, 1, self.key, self.token, str(self.ttl_ms)):
                    self.lost = True
                    log.warning("sync lock lost", extra={"cluster": self.cluster})
                    return
            except redis.RedisError:
                log.warning("could not renew the sync lock", extra={"cluster": self.cluster})

    def __enter__(self) -> ClusterLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
