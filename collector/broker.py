"""A Celery worker lets go of a broker connection it lost (`install`).

Two references in kombu's Redis transport (checked against kombu 5.7.0) outlive a lost
connection, and together kept every connection a worker's parent ever lost: with Sentinel
~0.6 MiB per failover (eight failovers of a Sentinel set: 80.3 to 85.3 MiB; docs/operations.md,
"Soak"), without bound, since the parent is never recycled. Both were found by walking the
parent's heap back from the leaked connection pools.

**The QoS finalizer.** kombu's Redis channel registers, for each consuming channel, an at-exit
finalizer (`multiprocessing.util.Finalize`) that holds the channel's QoS, hence the channel, its
connection pools and their connections, until the channel is closed. Closing an idle consumer's
channel first reads the reply of the BRPOP it has outstanding; when the broker has gone away (a
Redis failover, a restart) that read raises, the close stops there, and Celery's consumer, which
swallows the error and opens a new connection, leaves the old channel in the finalizer registry
for the life of the process. With Sentinel each such channel holds two Sentinel clients of three
connections each plus their pools. `install` wraps the channel's `close`: when it raises, the
channel leaves its poller and the finalizer is cancelled, so the channel is freed like any other
object once nothing else holds it. A message delivered on it and not yet acknowledged does hold
it, and acking it later still works: the channel keeps its pools (with Sentinel they find the
new primary). The unacknowledged messages of a channel that is gone stay in the broker's unacked
set, where every consumer's periodic restore puts them back after the visibility timeout
(collector.app), as it does for a killed worker's; nothing is restored over a connection known
to be dead, which on a black-holed network could block the consumer's reconnection for minutes.

**The event loop's tick callbacks.** Registering a transport with Celery's event loop adds a
tick callback (it polls the transport's sockets) and five repeating timers, and nothing removes
them: the worker's consumer reconnects with a new connection, hence a new transport, and the
old one stayed in the loop's `on_tick` set, with its poller and channels, called on every tick.
`install` also wraps the registration: a transport registered with a loop first takes out of it
the callbacks and timers of the transports registered there before whose connection was closed
(their poller holds no channel any more), then runs a full collection, since what the lost
connection left is in reference cycles; a transport still open is left alone. With the three,
a prefork parent through five Sentinel failovers kept the same 2 channels, 5 Sentinel clients,
40 pymalloc arenas and 430-431 thousand blocks after each (throw-away script, the heap read
after every failover).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import weakref
from typing import Any

from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)
_MARK = "_fleetscope_releases_on_failed_close"


_REGISTERED: weakref.WeakKeyDictionary[Any, list[tuple[Any, set[Any]]]] = (
    weakref.WeakKeyDictionary()
)
"""Per event loop (kombu's Hub), the Redis transports registered with it and the tick callbacks
each added."""


def install() -> None:
    """Wrap kombu's Redis channel's `close` (the Sentinel channel inherits it) and its
    transport's `register_with_event_loop` (the Sentinel transport inherits it); idempotent."""
    close: Any = kombu_redis.Channel.close
    if getattr(close, _MARK, False):
        return
    register: Any = kombu_redis.Transport.register_with_event_loop

    @functools.wraps(register)
    def registering(transport: Any, connection: Any, loop: Any) -> None:
        if forget_closed(loop, keep=transport):
            # A reconnection: what the lost connection left in reference cycles (its channels
            # and pools, the exceptions' frames) is in the oldest generation of a process that
            # rarely collects it (a prefork parent's heap is mostly frozen or long-lived).
            gc.collect()
        before = set(loop.on_tick)
        register(transport, connection, loop)
        added = set(loop.on_tick) - before
        _REGISTERED.setdefault(loop, []).append((weakref.ref(transport), added))

    @functools.wraps(close)
    def releasing_close(channel: Any) -> None:
        try:
            close(channel)
        except BaseException:
            release(channel)
            raise

    setattr(releasing_close, _MARK, True)
    kombu_redis.Channel.close = releasing_close  # type: ignore[method-assign]
    kombu_redis.Transport.register_with_event_loop = registering  # type: ignore[method-assign]


def forget_closed(loop: Any, keep: Any = None) -> int:
    """Takes out of `loop` the tick callbacks and repeating timers of the Redis transports
    registered with it (other than `keep`) whose poller holds no channel: their connection was
    closed (kombu's `close_connection` closes the poller first, whatever the channels' closes
    then raise). Returns how many transports it let go."""
    kept, gone = [], 0
    for ref, callbacks in _REGISTERED.get(loop, []):
        transport = ref()
        if transport is None:
            continue
        if transport is keep or not _closed(transport):
            kept.append((ref, callbacks))
            continue
        loop.on_tick.difference_update(callbacks)
        for name, tref in list(vars(transport.cycle).items()):
            if name.endswith("_tref") and hasattr(tref, "cancel"):
                tref.cancel()
        gone += 1
    if loop in _REGISTERED:
        _REGISTERED[loop] = kept
    return gone


def _closed(transport: Any) -> bool:
    """Whether a registered transport's connection was closed: its poller (kombu's
    MultiChannelPoller) holds no channel; an open connection's holds at least its default
    channel."""
    channels = getattr(getattr(transport, "cycle", None), "_channels", None)
    return channels is not None and not channels


def release(channel: Any) -> None:
    """What a channel whose close failed still owes without a broker: out of its transport's
    poller, its sockets closed, its QoS finalizer cancelled (the reference that kept it
    alive). Never raises."""
    with contextlib.suppress(Exception):
        channel.connection.cycle.discard(channel)
    # Its pools stay, their sockets closed (a pool reconnects when next used): a task that ends
    # after the reconnection acks its message on this channel (kombu's Message holds it), and a
    # channel without a pool would build one from its closed transport's connection info (None:
    # the worker's event loop died on the AttributeError). With Sentinel the pool finds the new
    # primary. They go with the channel.
    managers = [channel.__dict__.get(k) for k in ("_sentinel_manager", "_async_sentinel_manager")]
    pools = [s.connection_pool for m in managers if m is not None for s in m.sentinels]
    for pool in [channel.__dict__.get("_pool"), channel.__dict__.get("_async_pool")]:
        if pool is not None:
            pools.append(pool)
    for pool in pools:
        with contextlib.suppress(Exception):
            pool.disconnect()
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
