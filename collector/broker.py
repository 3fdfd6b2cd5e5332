"""The broker's channels let go of what a lost broker connection left them (`install`).

kombu's Redis channel (checked against kombu 5.7.0) registers, for each consuming channel, an
at-exit finalizer (`multiprocessing.util.Finalize`) that holds the channel's QoS, hence the
channel, its connection pools and their connections, until the channel is closed. Closing an
idle consumer's channel first reads the reply of the BRPOP it has outstanding; when the broker
has gone away (a Redis failover, a restart) that read raises, the close stops there, and
Celery's consumer, which swallows the error and opens a new connection, leaves the old channel
in the finalizer registry for the life of the process. With Sentinel each such channel holds
two Sentinel clients of three connections each plus their pools: a prefork worker's parent grew
~0.6 MiB per failover (eight failovers of a Sentinel set, 80.3 to 85.3 MiB; docs/operations.md,
"Soak"), without bound, since the parent is never recycled.

`install` wraps the channel's `close`: when it raises, what it did not get to that needs no
broker is done anyway (the channel leaves the poller, its pools drop their sockets) and the
finalizer is cancelled, so the channel is freed like any other object. The messages the channel
had delivered and not acknowledged stay in the broker's unacked set, where every consumer's
periodic restore puts them back after the visibility timeout (collector.app), as it does for a
killed worker; nothing is restored over a connection known to be dead, which on a black-holed
network could block the consumer's reconnection for minutes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)
_MARK = "_fleetscope_releases_on_failed_close"


def install() -> None:
    """Wrap kombu's Redis channel's `close` (the Sentinel channel inherits it); idempotent."""
    close: Any = kombu_redis.Channel.close
    if getattr(close, _MARK, False):
        return

    @functools.wraps(close)
    def releasing_close(channel: Any) -> None:
        try:
            close(channel)
        except BaseException:
            release(channel)
            raise

    setattr(releasing_close, _MARK, True)
    kombu_redis.Channel.close = releasing_close  # type: ignore[method-assign]


def release(channel: Any) -> None:
    """What a channel whose close failed still owes without a broker: out of its transport's
    poller, its pools' sockets closed, its QoS finalizer cancelled (the reference that kept it
    alive). Never raises."""
    with contextlib.suppress(Exception):
        channel.connection.cycle.discard(channel)
    with contextlib.suppress(Exception):
        channel._disconnect_pools()
    qos = channel.__dict__.get("_qos")
    finalizer = getattr(qos, "_on_collect", None)
    if finalizer is not None and finalizer.still_active():
        finalizer.cancel()
        unacked = len(getattr(qos, "_delivered", ()))
        if unacked:
            log.info(
                "broker channel closed with its connection lost: %d unacknowledged message(s) "
                "come back after the visibility timeout",
                unacked,
            )
