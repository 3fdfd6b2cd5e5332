"""Celery beat's scheduler, as `celery -A collector beat` runs it (`beat_scheduler`).

Celery's own `apply_entry` logs a send that failed with `traceback.format_stack()` beside the
exception: beat's own loop, the same every time, in every failed send's log line. Reading it
once kept every file on beat's stack in `linecache` for the life of the process (beat's RSS
stepped 75.5 -> 77.3 MiB at the thirty-sixth soak's failover, docs/operations.md);
`common.logs.read_source_uncached` now keeps no source whoever formats a traceback, and this
scheduler logs the exception alone. The schedule and what it sends are Celery's.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import beat

log = logging.getLogger("celery.beat")  # where beat's own lines go, so filters keep working


class Scheduler(beat.PersistentScheduler):  # type: ignore[misc]  # celery has no types
    def apply_entry(self, entry: beat.ScheduleEntry, producer: Any = None) -> None:
        log.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
        try:
            self.apply_async(entry, producer=producer, advance=False)
        except Exception as exc:  # a broker away: logged, and the next tick sends again
            log.error("Message Error: %s", exc, exc_info=True)
