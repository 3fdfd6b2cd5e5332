"""`fleetscope watch`: the long-running watcher (near-real-time updates), separate from Celery.

Run any number of replicas against the same Redis; they share the registered clusters through
leases. SIGINT/SIGTERM stop it cleanly (leases released, so another replica takes over at once).
`--heartbeat-file` is touched after every round of leases, for a container health check.
"""

from __future__ import annotations

import argparse
import logging
import resource
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from collector import gc_tuning
from collector.clusters import ClusterSource
from collector.watch import metrics as watch_metrics
from collector.watch.replica import WatchReplica
from common import heap, logs, redis_client
from common.errors import ConfigError
from common.kinds.registry import load_registry
from common.settings import Settings

log = logging.getLogger(__name__)

ARENAS = 2
"""glibc malloc arenas of a replica (common.heap), set before its first thread: its threads
(the event loop, the writers, the mesh and RBAC recomputes) share two. With glibc's default
(up to 16 on 2 cores) the free space the build and the re-opened watches leave is spread over
every arena and comes back into use in more places: under churn the RSS of a replica holding
50 L clusters rose 11.7 MiB in 22 minutes with it, 3.1 MiB with two, for the same build CPU
(docs/operations.md, "The watcher")."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="", help="replica name shown in leases and logs")
    parser.add_argument(
        "--reconcile",
        action="store_true",
        help="also mirror the configured clusters into the registry (when no Celery beat runs)",
    )
    parser.add_argument(
        "--heartbeat-file",
        default="",
        metavar="PATH",
        help="touch PATH after every round (every lease TTL / 4), for liveness checks",
    )


def run(args: argparse.Namespace, settings: Settings | None = None) -> int:
    heap.limit_arenas(ARENAS)  # before any thread of ours asks for an arena
    settings = settings or Settings.from_env()
    logs.configure(settings)
    gc_tuning.tune()
    heap.Trimmer().start()  # a build's and a hand-over's freed pages go back to the kernel
    _raise_open_files()
    heartbeat = _heartbeat(Path(args.heartbeat_file)) if args.heartbeat_file else None
    stop = threading.Event()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    watch_metrics.serve(settings)
    r = redis_client.connect(settings.redis_url)
    source = ClusterSource(settings, r=r)
    replica = WatchReplica(
        settings, r, load_registry(settings.kinds_file), source, args.name, args.reconcile
    )
    if heartbeat:
        replica.after_tick = heartbeat
    log.info("watcher %s started", replica.token)
    try:
        replica.run(stop)
    finally:
        source.close()
        r.close()
    log.info("watcher stopped")
    return 0


def _raise_open_files() -> None:
    """A replica holds ~30 connections per cluster (one per watched resource): raise the soft
    limit on open files to the hard one (often 1,024 soft: ~30 clusters)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("open-files limit stays %d: %s", soft, e)


def _heartbeat(path: Path) -> Callable[[], None]:
    """`path.touch`, tried once now so that an unwritable path stops the start, not the loop."""
    try:
        path.touch()
    except OSError as e:
        raise ConfigError(f"--heartbeat-file {path}: {e.strerror}") from e
    return path.touch
