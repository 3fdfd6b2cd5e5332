"""The Celery app factory: settings reach Celery's configuration, and nothing connects."""

from __future__ import annotations

from collector.app import QUEUE, beat_schedule, create_celery
from common.settings import Settings


def test_settings_become_celery_configuration() -> None:
    s = Settings(
        redis_url="redis://127.0.0.1:1/0",  # nothing listens there: creating the app connects to nothing
        sync_interval_s=15,
        worker_max_memory_mib=300,
    )
    conf = create_celery(s).conf
    assert conf.broker_url == s.redis_url
    assert conf.task_default_queue == QUEUE
    assert conf.worker_max_memory_per_child == 300 * 1024  # KiB: children stay bounded
    assert conf.task_soft_time_limit == s.sync_soft_time_limit_s
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert beat_schedule(s)["sync-objects"]["schedule"] == 15
