"""The per-cluster sync lock: a lease (common.index.lease) renewed by a background thread while the sync
works and released when it ends. A killed worker's lock expires after `ttl_s`."""

from __future__ import annotations

import logging
import threading
from types import TracebackType

import redis

from common import redis_client
from common.errors import LockBusy
from common.index import keys, lease
from common.index.lease import Fence, Lease

log = logging.getLogger(__name__)


class ClusterLock:
    """`with ClusterLock(r, cluster, ttl_s):` raises LockBusy when another worker holds it."""

    def __init__(self, r: redis.Redis, cluster: str, ttl_s: float, work: str = "objects") -> None:
        self.cluster = cluster
        self.lease = Lease(r, keys.lock(cluster, work), lease.new_token(), lease.ttl_ms(ttl_s))
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def fence(self) -> Fence:
        """For the index writer: write only while this lock is still ours."""
        return self.lease.fence

    def acquire(self) -> None:
        if not self.lease.acquire():
            raise LockBusy(f"cluster {self.cluster} is being synced by another worker")
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="lock-renew")
        self._thread.start()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.lease.release()
        except redis_client.ERRORS:
            log.warning("could not release the sync lock; it expires by itself", exc_info=True)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease.ttl_ms / 3000):
            try:
                if not self.lease.renew():
                    self.lost = True
                    log.warning("sync lock lost", extra={"cluster": self.cluster})
                    return
            except redis_client.ERRORS:
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
