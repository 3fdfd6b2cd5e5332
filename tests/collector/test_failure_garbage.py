"""A worker's failed syncs leave nothing behind (docs/operations.md, "Soak"): the reference
cycles a failed or retried Celery task leaves (its exception's traceback frames, urllib3's
chained errors) are collected after the task, at the worker children's garbage-collector
thresholds, where they had piled up ~5 MiB per flap cycle; and a retried sync has Celery build no
copy of its traceback (collector.tasks)."""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Iterator
from pathlib import Path

import celery.app.trace
import pytest
import redis
from billiard.einfo import ExceptionInfo
from celery.app.trace import build_tracer

from collector import gc_tuning, tasks
from collector.app import QUEUE, create_celery
from collector.gc_tuning import THRESHOLDS
from common.errors import ClusterUnreachable
from common.index import keys
from kubesim.gen.fleet import generate_fleet
from tests.support import sims

FAILURES = 30


@pytest.fixture
def child_thresholds() -> Iterator[None]:
    """This process collects as a worker child does (collector.gc_tuning), then as before."""
    before = gc.get_threshold()
    gc.collect()
    gc.set_threshold(*THRESHOLDS)
    yield
    gc.set_threshold(*before)


def alive(kind: type) -> int:
    """Objects of `kind` still in memory (counted without collecting)."""
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_failing_syncs_of_a_down_cluster_leave_no_exceptions_behind(
    redis_url: str,
    broker_url: str,
    r: redis.Redis,
    tmp_path: Path,
    child_thresholds: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copies: list[int] = []  # Celery's copies of a traceback (its Retry path built one a retry)

    class CountedInfo(ExceptionInfo):  # type: ignore[misc]
        def __init__(self, *args: object, **kwargs: object) -> None:
            copies.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(celery.app.trace, "ExceptionInfo", CountedInfo)
    broker = redis.Redis.from_url(broker_url)
    broker.delete(QUEUE)
    with sims.start(generate_fleet(1, 3), tmp_path) as sim:
        settings = sims.settings_for(tmp_path, redis_url)
        # A retry is queued on the broker, as a worker's is.
        app = create_celery(dataclasses.replace(settings, broker_url=broker_url))
        app.tasks[tasks.RECONCILE].apply()  # registers the cluster
        sim.set_fault("cluster-000", down=True)
        task = app.tasks[tasks.SYNC_OBJECTS]
        run = build_tracer(task.name, task, app=app)  # as a worker child runs a task
        broker.delete(QUEUE)  # the reconcile's syncs
        for i in range(FAILURES):
            retval, info, _, _ = run(
                f"t{i}", ("cluster-000",), {}, {"id": f"t{i}", "retries": i % 3}
            )
            assert retval == gc_tuning.FAILED and info is None  # failed, dealt with by the task
        left = alive(ClusterUnreachable)
        garbage = gc.collect()  # what was left for the cycle collector: freed now
    error = r.hget(keys.sync("cluster-000"), "last_error")
    assert error == "cluster cluster-000: connection failed"
    # Each failure was queued again, as the same task one retry further on, after a delay.
    queued = [json.loads(m) for m in broker.lrange(QUEUE, 0, -1)]
    assert len(queued) == FAILURES
    assert {m["headers"]["task"] for m in queued} == {tasks.SYNC_OBJECTS}
    assert sorted(m["headers"]["retries"] for m in queued) == sorted(
        i % 3 + 1 for i in range(FAILURES)
    )
    assert all(m["headers"]["eta"] for m in queued)
    assert copies == []
    # The last failure's, held by its task's frames when the collection ran (without it: 15
    # exceptions and ~14,000 objects of garbage after 40 failures, growing with them).
    assert left <= 2
    assert garbage < 1_000
