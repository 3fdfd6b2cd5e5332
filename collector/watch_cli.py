"""`fleetscope watch`: the long-running watcher (near-real-time updates), separate from Celery.

Run any number of replicas against the same Redis; they share the registered clusters through
leases. SIGINT/SIGTERM stop it cleanly (leases released, so another replica takes over at once).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType

from collector.clusters import ClusterSource
from collector.watch_replica import WatchReplica
from common import logs, redis_client
from common.kinds.registry import load_registry
from common.settings import Settings

log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="", help="replica name shown in leases and logs")
    parser.add_argument(
        "--reconcile",
        action="store_true",
        help="also mirror the configured clusters into the registry (when no Celery beat runs)",
    )


def run(args: argparse.Namespace, settings: Settings | None = None) -> int:
    settings = settings or Settings.from_env()
    logs.configure(settings)
    stop = threading.Event()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    r = redis_client.connect(settings.redis_url)
    source = ClusterSource(settings, r=r)
    replica = WatchReplica(
        settings, r, load_registry(settings.kinds_file), source, args.name, args.reconcile
    )
    log.info("watcher %s started", replica.token)
    try:
        replica.run(stop)
    finally:
        source.close()
        r.close()
    log.info("watcher stopped")
    return 0
