"""gunicorn configuration of the query service, from FLEETSCOPE_* settings.

The documented command (what `fleetscope serve` runs):

    gunicorn --config python:query.gunicorn_conf query.wsgi:app

Workers and threads come from FLEETSCOPE_QUERY_WORKERS / _THREADS, the address from
FLEETSCOPE_BIND (a `--bind` on the command line wins), the access log on stdout from
FLEETSCOPE_ACCESS_LOG (off, text or json: query/access_log.py). With FLEETSCOPE_METRICS_DIR set, it is
given a directory of its own under it (`fleetscope-query-<master pid>`, emptied at start),
exported as PROMETHEUS_MULTIPROC_DIR, so /metrics adds up every worker.

The master also starts the stream process (query.stream_server: every watch stream of this
service, handed over by the workers' request threads) once it listens, checks it from its own
loop and starts it again if it dies (query.stream_supervisor), and stops it on exit.

Each worker freezes what its start-up created (modules, the Flask app, the kind registry) out
of the garbage collector once the app is loaded. A full collection otherwise walks all those
objects and stalls every thread of the worker, which showed in every fleet-L p99
(docs/benchmarks.md, History, "Wide-namespace users and facets"). It then starts the
housekeeping every query process runs (query.housekeeping: the malloc arenas capped, the heap
trimmed, the memos' idle entries dropped).
"""

from __future__ import annotations

import gc
import os
from typing import Any

from common import promdir
from common.settings import Settings
from query import housekeeping, stream_supervisor
from query.access_log import TEXT_FORMAT

_settings = Settings.from_env()

bind = [_settings.bind]
workers = _settings.query_workers
threads = _settings.query_threads
worker_class = "query.gunicorn_worker.JsonErrorWorker"  # gthread, its own errors as JSON
# What gunicorn refuses before the app runs (answered 414 / 431 as JSON by the worker class).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
timeout = 60
graceful_timeout = 20
keepalive = 5
accesslog = None if _settings.access_log == "off" else "-"
access_log_format = TEXT_FORMAT
if _settings.access_log == "json":
    logger_class = "query.access_log.JsonAccessLogger"
errorlog = "-"

# this master's own directory: a Celery worker or another query service on the same host may
# keep theirs under the same FLEETSCOPE_METRICS_DIR (common.promdir)
_metrics_dir = promdir.private_dir(_settings.metrics_dir, "query") if _settings.metrics_dir else ""
if _metrics_dir:
    os.environ[promdir.ENV] = _metrics_dir


def on_starting(server: Any) -> None:
    """Start with an empty metrics directory (files of a previous run would be added up)."""
    if _metrics_dir:
        promdir.reset(_metrics_dir)
        # imported now, with PROMETHEUS_MULTIPROC_DIR set: first imported at a worker's exit
        # (`child_exit`), it was a lasting step of ~5 MiB in the master's RSS at that moment
        import prometheus_client.multiprocess  # noqa: F401
    from common import logs

    logs.configure(_settings)


def when_ready(server: Any) -> None:
    """Start the stream process before the first worker is forked (module docstring)."""
    stream_supervisor.install(server, _metrics_dir)


def on_exit(server: Any) -> None:
    """Stop the stream process with the master (its clients reconnect elsewhere)."""
    stream_supervisor.uninstall()


def post_worker_init(worker: Any) -> None:
    """Keep the loaded app out of full collections (module docstring), then start the
    housekeeping (query.housekeeping: arenas, heap trims, the memos' idle sweep)."""
    gc.freeze()
    housekeeping.start(_settings)


def child_exit(server: Any, worker: Any) -> None:
    """Tell prometheus-client a worker is gone (its live gauges stop counting); its module was
    imported at the start (`on_starting`)."""
    if _metrics_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
