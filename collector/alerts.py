"""Alert tasks: evaluation (beat, every FLEETSCOPE_ALERT_INTERVAL_S) and delivery to
Alertmanager, thin shells around common.alerts, on a queue of their own (`fleetscope-alerts`)
so a slow Alertmanager never holds a sync back (run a worker with `-Q fleetscope-alerts` to
give them their own processes; a worker started without `-Q` takes both queues).

One evaluation at a time, fleet-wide: the evaluator's lease (common.index.lease). It is held for
most of an interval and not released at the end, so the tasks of a second beat (two
schedulers by mistake, or a hand-over) find it taken and skip: evaluations never overlap nor
follow each other closer than that. Delivery failures are retried with exponential backoff
(at most half an interval apart) and counted; the next evaluation re-sends everything anyway.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.exceptions import MaxRetriesExceededError

from common import promdir, redis_client
from common.alerts import deliver
from common.alerts.evaluate import Evaluator, Outcome
from common.alerts.source import RulesSource
from common.errors import LockBusy
from common.index import keys, lease
from common.kinds.registry import load_registry
from common.settings import Settings

log = logging.getLogger(__name__)
EVALUATE = "collector.evaluate_alerts"
DELIVER = "collector.deliver_alerts"
QUEUE = "fleetscope-alerts"
HOLD = 0.8  # of an interval: how long the lease spaces evaluations
DELIVERY_RETRIES = 4


def _factories() -> dict[str, Callable[[], Any]]:
    from prometheus_client import Counter, Gauge, Histogram

    return {
        "evaluations": lambda: Counter(
            "fleetscope_alert_evaluations",
            "Alert evaluations by result: ok, skipped (another evaluator holds the lease), failed.",
            ["result"],
        ),
        "cpu": lambda: Histogram(
            "fleetscope_alert_evaluation_cpu_seconds",
            "CPU time of one alert evaluation.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        ),
        "firing": lambda: Gauge(
            "fleetscope_alerts_firing",
            "Firing fleet alerts after the last evaluation.",
            multiprocess_mode="mostrecent",
        ),
        "rules_ok": lambda: Gauge(
            "fleetscope_alert_rules_valid",
            "1 when the rules file was loaded; 0 when it is refused (previous rules run).",
            multiprocess_mode="mostrecent",
        ),
        "sent": lambda: Counter(
            "fleetscope_alertmanager_alerts_sent",
            "Alerts accepted by an Alertmanager (firing re-sends included).",
            ["alertmanager"],
        ),
        "errors": lambda: Counter(
            "fleetscope_alertmanager_errors",
            "Failed deliveries to an Alertmanager (each attempt).",
            ["alertmanager"],
        ),
    }


_metrics = promdir.Lazy(_factories)


def metrics() -> dict[str, Any]:
    """The alert metrics, created on first use (after collector.metrics.prepare_worker)."""
    return _metrics.get()


@dataclass
class AlertRuntime:
    """This process's evaluator and rules (built on first use, after a prefork)."""

    settings: Settings

    def __post_init__(self) -> None:
        self.r = redis_client.connect(self.settings.redis_url)
        registry = load_registry(self.settings.kinds_file)
        base = self.settings.external_url or f"http://{self.settings.bind}"
        self.evaluator = Evaluator(self.r, registry.keys(), base)
        self.source = RulesSource(
            self.settings.alert_rules_file, registry, self.settings.flapping_threshold
        )

    def evaluate(self) -> Outcome | None:
        """One evaluation, or None when another evaluator holds the lease."""
        hold_s = max(1.0, self.settings.alert_interval_s * HOLD)
        held = lease.Lease(self.r, keys.ALERT_LEASE, lease.new_token("eval"), lease.ttl_ms(hold_s))
        m = metrics()
        if not held.acquire():
            m["evaluations"].labels("skipped").inc()
            return None
        started = time.process_time()
        try:
            rules = self.source.current(self.r)
            m["rules_ok"].set(0 if self.source.error else 1)
            outcome = self.evaluator.run(rules, held.fence)
        except (LockBusy, redis_client.ERRORS[0], redis_client.ERRORS[1]) as e:
            m["evaluations"].labels("failed").inc()
            log.warning("alert evaluation failed: %s", e)
            return None
        m["cpu"].observe(time.process_time() - started)
        m["evaluations"].labels("ok").inc()
        m["firing"].set(outcome.firing)
        log.info(
            "alerts evaluated: %d firing, %d fired, %d resolved, %d of %d clusters re-read, "
            "%d left to the next evaluation",
            outcome.firing,
            outcome.fired,
            outcome.resolved,
            outcome.changed,
            outcome.clusters,
            outcome.deferred,
        )
        return outcome

    def deliver(self, only: list[int] | None) -> deliver.Delivery:
        result = deliver.deliver(self.r, self.settings, only)
        m = metrics()
        urls = self.settings.alertmanager_url
        for i in range(len(urls)) if only is None else only:
            if i in result.failed:
                m["errors"].labels(deliver.target(urls[i])).inc()
            elif i < len(urls):
                m["sent"].labels(deliver.target(urls[i])).inc(result.sent)
        return result


def check_rules(settings: Settings) -> None:
    """At start-up: say now (in the log) whether the rules file is usable."""
    if settings.alert_rules_file:
        RulesSource(
            settings.alert_rules_file,
            load_registry(settings.kinds_file),
            settings.flapping_threshold,
        ).check()


def register(app: Celery, settings: Settings) -> None:
    runtime = functools.cache(lambda: AlertRuntime(settings))
    interval = settings.alert_interval_s

    @app.task(shared=False, name=DELIVER, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def deliver_alerts(task: Any, only: list[int] | None = None) -> None:
        result = runtime().deliver(only)
        if not result.failed:
            return
        delay = min(2.0**task.request.retries, interval / 2)
        try:
            task.retry(args=(list(result.failed),), countdown=delay, max_retries=DELIVERY_RETRIES)
        except MaxRetriesExceededError:
            log.warning("alert delivery given up until the next evaluation")

    @app.task(shared=False, name=EVALUATE, ignore_result=True)  # type: ignore[untyped-decorator]
    def evaluate_alerts() -> None:
        if runtime().evaluate() is not None and settings.alertmanager_url:
            deliver_alerts.apply_async(expires=interval)
