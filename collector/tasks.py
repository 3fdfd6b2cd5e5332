"""Celery tasks: thin shells around collector.jobs. Beat runs the fan-out tasks, which enqueue
one sync per registered cluster; any number of workers share them, coordinated only by the
per-cluster lock in Redis (a busy lock means another worker is on it: skip)."""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import Celery
from celery.utils.time import get_exponential_backoff_interval

from collector.clusters import ClusterSource
from collector.jobs import Collector
from common.errors import LockBusy, PermanentError, TemporaryError
from common.kinds.registry import load_registry
from common.settings import Settings

log = logging.getLogger(__name__)
RECONCILE = "collector.reconcile_registry"
FAN_OUT_OBJECTS = "collector.schedule_object_syncs"
FAN_OUT_RBAC = "collector.schedule_rbac_syncs"
SYNC_OBJECTS = "collector.sync_objects"
SYNC_RBAC = "collector.sync_rbac"
RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S = 5, 60
_runtime: dict[int, Collector] = {}


def runtime(settings: Settings) -> Collector:
    """This process's Collector (built on first use, so nothing connects at import time)."""
    key = id(settings)
    if key not in _runtime:
        _runtime[key] = Collector(
            settings,
            redis.Redis.from_url(settings.redis_url, health_check_interval=30),
            load_registry(settings.kinds_file),
            ClusterSource(settings),
        )
    return _runtime[key]


def register(app: Celery, settings: Settings) -> None:
    retry: dict[str, Any] = {
        "autoretry_for": (TemporaryError,),
        "dont_autoretry_for": (LockBusy,),
        "retry_backoff": RETRY_BACKOFF_S,
        "retry_backoff_max": RETRY_BACKOFF_MAX_S,
        "retry_jitter": True,
        "max_retries": 3,
        "ignore_result": True,
    }

    @app.task(name=SYNC_OBJECTS, bind=True, **retry)  # type: ignore[untyped-decorator]
    def sync_objects(task: Any, cluster: str) -> None:
        _locked(task, lambda: runtime(settings).sync_objects(cluster), cluster)

    @app.task(name=SYNC_RBAC, bind=True, **retry)  # type: ignore[untyped-decorator]
    def sync_rbac(task: Any, cluster: str) -> None:
        _locked(task, lambda: runtime(settings).sync_rbac(cluster), cluster)

    @app.task(name=FAN_OUT_OBJECTS, ignore_result=True)  # type: ignore[untyped-decorator]
    def schedule_object_syncs() -> int:
        return _fan_out(sync_objects, settings, settings.sync_interval_s)

    @app.task(name=FAN_OUT_RBAC, ignore_result=True)  # type: ignore[untyped-decorator]
    def schedule_rbac_syncs() -> int:
        return _fan_out(sync_rbac, settings, settings.rbac_sync_interval_s)

    @app.task(name=RECONCILE, ignore_result=True, **{k: retry[k] for k in ("autoretry_for",)})  # type: ignore[untyped-decorator]
    def reconcile_registry() -> None:
        result = runtime(settings).reconcile()
        for name in result.added:  # new clusters are collected now, not an interval later
            sync_rbac.delay(name)
            sync_objects.delay(name)


def _locked(task: Any, job: Any, cluster: str) -> None:
    try:
        job()
    except LockBusy:
        log.info("skipped: another worker is syncing this cluster", extra={"cluster": cluster})
    except PermanentError as e:  # recorded in the sync status; retrying will not help
        log.warning("sync failed: %s", e, extra={"cluster": cluster})
    except TemporaryError as e:
        # Retry with backoff, but never sooner than the error asks (a leaf's 429 Retry-After).
        backoff = get_exponential_backoff_interval(
            RETRY_BACKOFF_S, task.request.retries, RETRY_BACKOFF_MAX_S, full_jitter=True
        )
        raise task.retry(exc=e, countdown=max(backoff, e.delay_s)) from e


def _fan_out(task: Any, settings: Settings, interval_s: float) -> int:
    """Enqueue one sync per registered cluster; unrun ones expire at the next round."""
    clusters = runtime(settings).registered()
    for name in clusters:
        task.apply_async((name,), expires=interval_s)
    return len(clusters)
