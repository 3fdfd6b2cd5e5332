"""Celery tasks: thin shells around collector.jobs. Beat runs the fan-out tasks, which enqueue
one sync per registered cluster; any number of workers share them, coordinated only by the
per-cluster lock in Redis (a busy lock means another worker is on it: skip). Whether and when a
failed sync is retried is decided by collector.jobs.retry_delay.

A failed sync is dealt with here, not raised to Celery: its failure is already recorded (sync
status, metrics, the worker log), the retry is sent with `Task.retry(throw=False)` (the same
message, `retries` one higher, after the delay) and the task returns `gc_tuning.FAILED`, after
which the child collects the failure's reference cycles as it does a raised one's. Raising
Celery's `Retry` instead had the tracer build and pickle a copy of the traceback for the pool's
parent: ~400 KiB at the peak of every retried task in a worker child against ~40 KiB for the
failed sync itself, and a child's RSS stepped up the first times a leaf was down (0.7-0.9 MiB
at fleet S, 1.7 MiB at L in the soak's run 48; docs/operations.md, "Soak")."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery import Celery

from collector import gc_tuning
from collector.clusters import ClusterSource
from collector.jobs import MAX_RETRIES, Collector, retry_delay
from collector.sync import Work
from common import redis_client
from common.errors import FleetscopeError, LockBusy
from common.kinds.registry import load_registry
from common.settings import Settings

log = logging.getLogger(__name__)
RECONCILE = "collector.reconcile_registry"
FAN_OUT_OBJECTS = "collector.schedule_object_syncs"
FAN_OUT_RBAC = "collector.schedule_rbac_syncs"
SYNC_OBJECTS = "collector.sync_objects"
SYNC_RBAC = "collector.sync_rbac"


def runtime_factory(settings: Settings) -> Callable[[], Collector]:
    """This process's Collector, built on first use (nothing connects at import time, and a
    prefork child builds its own after the fork)."""

    @functools.cache
    def runtime() -> Collector:
        r = redis_client.connect(settings.redis_url)
        return Collector(
            settings,
            r,
            load_registry(settings.kinds_file),
            ClusterSource(settings, r=r),
        )

    return runtime


def register(app: Celery, settings: Settings) -> Callable[[], Collector]:
    """Register the tasks on `app`; returns the process's Collector getter."""
    runtime = runtime_factory(settings)

    @app.task(shared=False, name=SYNC_OBJECTS, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def sync_objects(task: Any, cluster: str) -> str | None:
        return _sync(task, runtime(), Work.OBJECTS, cluster)

    @app.task(shared=False, name=SYNC_RBAC, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def sync_rbac(task: Any, cluster: str) -> str | None:
        return _sync(task, runtime(), Work.RBAC, cluster)

    @app.task(shared=False, name=FAN_OUT_OBJECTS, ignore_result=True)  # type: ignore[untyped-decorator]
    def schedule_object_syncs() -> int:
        return _fan_out(sync_objects, runtime(), Work.OBJECTS, settings.sync_interval_s)

    @app.task(shared=False, name=FAN_OUT_RBAC, ignore_result=True)  # type: ignore[untyped-decorator]
    def schedule_rbac_syncs() -> int:
        return _fan_out(sync_rbac, runtime(), Work.RBAC, settings.rbac_sync_interval_s)

    @app.task(shared=False, name=RECONCILE, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def reconcile_registry(task: Any) -> str | None:
        try:
            result = runtime().reconcile()
        except FleetscopeError as e:
            _retry_or_log(task, e, "registry reconcile failed")
            return gc_tuning.FAILED
        # New clusters, rotated credentials and clusters that became ready are collected now,
        # not an interval later.
        for name in result.to_sync:
            sync_rbac.delay(name)
            sync_objects.delay(name)
        return None

    return runtime


def _sync(task: Any, collector: Collector, work: Work, cluster: str) -> str | None:
    """One sync; None when it ran (or another worker has it), `gc_tuning.FAILED` when it
    failed (recorded, and retried when `retry_delay` says so)."""
    try:
        collector.run(work, cluster)
    except LockBusy:
        log.info("skipped: another worker is syncing this cluster", extra={"cluster": cluster})
    except FleetscopeError as e:  # already recorded in the sync status
        _retry_or_log(task, e, f"{work} sync failed", cluster, recorded=True)
        return gc_tuning.FAILED
    return None


def _retry_or_log(
    task: Any, e: FleetscopeError, what: str, cluster: str = "", recorded: bool = False
) -> None:
    """Send `task` again after `retry_delay`, or log why it is not (the last retry used, a
    permanent error) unless the failure is already in the log (`recorded`: a sync's)."""
    extra = {"cluster": cluster} if cluster else None
    delay = retry_delay(e, task.request.retries)
    if delay is None:
        log.log(logging.INFO if recorded else logging.WARNING, "%s: %s", what, e, extra=extra)
        return
    retry = task.request.retries + 1
    log.info("%s: retry %d of %d in %.1f s", what, retry, MAX_RETRIES, delay, extra=extra)
    # throw=False: the retry is sent and nothing is raised to Celery's tracer (module doc)
    task.retry(exc=e, countdown=delay, max_retries=None, throw=False)


def _fan_out(task: Any, collector: Collector, work: Work, interval_s: float) -> int:
    """Enqueue one sync per ready registered cluster that is due (`Collector.due`: a watched
    cluster only every `sync_watched_interval_s`); unrun ones expire at the next round."""
    clusters = collector.due(work, collector.syncable(), interval_s)
    for name in clusters:
        task.apply_async((name,), expires=interval_s)
    return len(clusters)
