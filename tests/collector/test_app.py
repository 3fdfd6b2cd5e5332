"""The Celery app factory: settings reach Celery's configuration, and nothing connects."""

from __future__ import annotations

import pytest

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


def test_a_prefork_parent_collects_with_cpythons_thresholds_once_its_pool_runs() -> None:
    """The parent syncs nothing: the raised thresholds (gc_tuning) kept a broker failover's
    garbage in it; a solo or threads pool runs the syncs in the parent and stays tuned."""
    import gc
    from typing import Any

    from celery import signals
    from celery.concurrency import prefork, solo

    from collector import gc_tuning

    class Consumer:  # what Celery sends worker_ready from (hashable, as a sender must be)
        def __init__(self, app: Any, pool: Any) -> None:
            self.app, self.pool = app, pool

    app = create_celery(Settings(redis_url="redis://127.0.0.1:1/0"))
    before = gc.get_threshold()
    try:
        gc_tuning.tune()
        consumer = Consumer(app, object.__new__(solo.TaskPool))
        signals.worker_ready.send(sender=consumer)
        assert gc.get_threshold() == gc_tuning.THRESHOLDS
        other = Consumer(object(), object.__new__(prefork.TaskPool))
        signals.worker_ready.send(sender=other)  # another app's worker: not ours to change
        assert gc.get_threshold() == gc_tuning.THRESHOLDS
        consumer.pool = object.__new__(prefork.TaskPool)
        signals.worker_ready.send(sender=consumer)
        assert gc.get_threshold() == gc_tuning.DEFAULT_THRESHOLDS == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_worker_processes_trim_the_c_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task is followed by a trim of the C heap, a failed one (raised, or returned as
    `FAILED`) by a full collection first; each child and prefork parent also trims once a
    minute, one trimmer per process."""
    from collector import gc_tuning
    from common import heap

    trims: list[int] = []
    collections: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: trims.append(1) or True)
    monkeypatch.setattr(gc_tuning.gc, "collect", lambda: collections.append(1) or 0)
    gc_tuning.after_task(gc_tuning.SUCCESS)
    assert trims == [1] and collections == []
    gc_tuning.after_task("RETRY")
    gc_tuning.after_task("FAILURE")
    gc_tuning.after_task(gc_tuning.SUCCESS, gc_tuning.FAILED)  # a failure the task dealt with
    assert len(trims) == 4 and len(collections) == 3
    started: list[heap.Trimmer] = []
    monkeypatch.setattr(heap.Trimmer, "start", lambda self: started.append(self))
    monkeypatch.setattr(heap.Trimmer, "is_alive", lambda self: self in started)
    monkeypatch.setattr(gc_tuning, "_trimmer", [])
    first = gc_tuning.start_trimmer()
    assert gc_tuning.start_trimmer() is first and started == [first]
    assert first.every_s == heap.TRIM_EVERY_S


def test_a_worker_child_starts_its_trimmer(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import signals

    from collector import gc_tuning

    calls: list[str] = []
    monkeypatch.setattr(gc_tuning, "tune", lambda: calls.append("tune"))
    monkeypatch.setattr(gc_tuning, "start_trimmer", lambda: calls.append("trim"))
    create_celery(Settings(redis_url="redis://127.0.0.1:1/0"))
    signals.worker_process_init.send(sender=None)
    assert "tune" in calls and "trim" in calls


def test_beat_starts_its_trimmer(monkeypatch: pytest.MonkeyPatch) -> None:
    from celery import signals

    from collector import alerts, gc_tuning

    calls: list[str] = []
    monkeypatch.setattr(gc_tuning, "start_trimmer", lambda: calls.append("trim"))
    monkeypatch.setattr(alerts, "check_rules", lambda settings: None)
    app = create_celery(Settings(redis_url="redis://127.0.0.1:1/0"))
    monkeypatch.setattr(app, "send_task", lambda name, *a, **k: calls.append(name))
    signals.beat_init.send(sender=_Beat(object()))  # another app's beat
    assert calls == []
    signals.beat_init.send(sender=_Beat(app))
    assert calls[0] == "trim" and len(calls) == 4


class _Beat:
    """A beat service as the signal sends it (hashable: celery caches receivers by sender)."""

    def __init__(self, app: object) -> None:
        self.app = app
