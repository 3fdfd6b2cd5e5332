"""The Celery app factory: Redis broker, beat schedule from settings, worker set-up (logging,
metrics). `create_celery(settings)` connects to nothing; `collector.celery.app` is the app that
`celery -A collector worker|beat` finds."""

from __future__ import annotations

from typing import Any

from celery import Celery, signals
from kombu import Queue  # type: ignore[attr-defined]

from collector import alerts, broker, gc_tuning, metrics, tasks
from common import logs
from common.settings import Settings

QUEUE = "fleetscope-collector"


def create_celery(settings: Settings) -> Celery:
    app = Celery("fleetscope-collector", set_as_current=False)
    broker.install()  # a lost broker connection's channels are freed (collector.broker)
    hard_limit_s = settings.sync_soft_time_limit_s + 30
    broker_url, transport = settings.broker()
    app.conf.update(
        broker_url=broker_url,
        broker_connection_retry_on_startup=True,
        # A killed worker's tasks come back after this long (ETA retries wait less than it).
        broker_transport_options={"visibility_timeout": int(hard_limit_s * 2), **transport},
        task_default_queue=QUEUE,
        # Alert tasks have a queue of their own (collector.alerts); a worker started without
        # `-Q` consumes both.
        task_queues=[Queue(QUEUE), Queue(alerts.QUEUE)],  # type: ignore[no-untyped-call]
        task_routes={
            alerts.EVALUATE: {"queue": alerts.QUEUE},
            alerts.DELIVER: {"queue": alerts.QUEUE},
        },
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # Broker and index are the same Redis: a sync running when it goes away cannot store
        # anything, and acking it afterwards crashes the worker (kombu's redis transport), so
        # cancel it; the next round syncs again.
        worker_cancel_long_running_tasks_on_connection_loss=True,
        # Memory stays bounded whatever a leaf or a library does: a child past the limit is
        # replaced between tasks (the soak saw one child grow while a cluster flapped).
        worker_max_memory_per_child=settings.worker_max_memory_mib * 1024,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        task_soft_time_limit=settings.sync_soft_time_limit_s,
        task_time_limit=hard_limit_s,
        timezone="UTC",
        beat_schedule=beat_schedule(settings),
        beat_scheduler="collector.beat:Scheduler",
    )
    tasks.register(app, settings)
    alerts.register(app, settings)
    _connect_signals(app, settings)
    return app


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """One entry per kind of work; each fans out one task per registered cluster (and, with a
    rules file, the fleet's alert evaluation)."""
    schedule = {
        "reconcile-registry": {
            "task": tasks.RECONCILE,
            "schedule": settings.registry_interval_s,
            "options": {"expires": settings.registry_interval_s},
        },
        "sync-objects": {
            "task": tasks.FAN_OUT_OBJECTS,
            "schedule": settings.sync_interval_s,
            "options": {"expires": settings.sync_interval_s},
        },
        "sync-rbac": {
            "task": tasks.FAN_OUT_RBAC,
            "schedule": settings.rbac_sync_interval_s,
            "options": {"expires": settings.rbac_sync_interval_s},
        },
    }
    if settings.alert_rules_file:
        schedule["evaluate-alerts"] = {
            "task": alerts.EVALUATE,
            "schedule": settings.alert_interval_s,
            "options": {"expires": settings.alert_interval_s},
        }
    return schedule


def _connect_signals(app: Celery, settings: Settings) -> None:
    celery_app = app

    def setup_logging(**_: Any) -> None:
        logs.configure(settings)

    def worker_init(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not app:
            return
        metrics.prepare_worker(settings)
        metrics.serve(settings)
        alerts.check_rules(settings)
        gc_tuning.tune()  # before the pool forks: children inherit it

    def worker_process_init(**_: Any) -> None:
        gc_tuning.tune()
        gc_tuning.start_trimmer()

    def worker_ready(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is app:
            gc_tuning.pool_parent_ready(getattr(sender, "pool", None))

    def task_postrun(
        sender: Any = None, state: str | None = None, retval: Any = None, **_: Any
    ) -> None:
        if getattr(sender, "app", None) is app:
            gc_tuning.after_task(state, retval)

    def beat_init(sender: Any = None, **_: Any) -> None:
        # Start collecting at once instead of one interval after beat starts.
        if getattr(sender, "app", None) is not app:
            return
        # beat's heap kept what a Redis failover's failed sends freed (+4 MiB, eleventh soak)
        gc_tuning.start_trimmer()
        alerts.check_rules(settings)
        for name in (tasks.RECONCILE, tasks.FAN_OUT_RBAC, tasks.FAN_OUT_OBJECTS):
            celery_app.send_task(name)

    signals.setup_logging.connect(setup_logging, weak=False)
    signals.worker_init.connect(worker_init, weak=False)
    signals.worker_process_init.connect(worker_process_init, weak=False)
    signals.worker_ready.connect(worker_ready, weak=False)
    signals.task_postrun.connect(task_postrun, weak=False)
    signals.beat_init.connect(beat_init, weak=False)
