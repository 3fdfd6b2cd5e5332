"""beat's failed sends are logged without reading its stack's source into linecache
(collector.beat: a Redis failover stepped beat's RSS by the files it cached).

Each send runs in a fresh interpreter with fleetscope's logging alone: pytest's own log
capture formats records the standard way, which reads sources into the cache itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from celery import beat

from collector import beat as our_beat
from collector.app import create_celery
from common.settings import Settings

ROOT = Path(__file__).resolve().parents[2]

SEND = """
import json, linecache, logging, sys, tempfile
from celery import beat
from collector import beat as our_beat
from collector.app import create_celery
from common import logs
from common.settings import Settings

settings = Settings(redis_url="redis://127.0.0.1:1/0", log_format="json")
if sys.argv[2] == "fleetscope":
    logs.configure(settings, sys.stdout)
else:  # the standard handler: Celery's lines as a plain set-up would print them
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
app = create_celery(settings)
cls = our_beat.Scheduler if sys.argv[1] == "ours" else beat.PersistentScheduler
scheduler = cls(app, schedule_filename=tempfile.mkdtemp() + "/schedule", lazy=True)

def apply_async(*_, **__):
    raise beat.SchedulingError("Couldn't apply scheduled task x: broker away")

scheduler.apply_async = apply_async
linecache.clearcache()
scheduler.apply_entry(beat.ScheduleEntry(name="x", task="fleetscope.t", schedule=10, app=app))
# files whose text the cache holds (a traceback formatted without reading lines leaves lazy
# entries: a loader to call, no text)
print(json.dumps(sorted(k for k, v in linecache.cache.items() if len(v) > 1)))
"""


def _send(which: str, logging_: str = "fleetscope") -> tuple[list[str], str]:
    """(files cached, what was logged) of one failed send by scheduler `which`."""
    out = subprocess.run(
        [sys.executable, "-c", SEND, which, logging_],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    *lines, cached = out.stdout.strip().splitlines()
    return json.loads(cached), "\n".join(lines) + out.stderr


def test_the_app_runs_our_scheduler() -> None:
    app = create_celery(Settings())
    assert app.conf.beat_scheduler == "collector.beat:Scheduler"
    assert issubclass(our_beat.Scheduler, beat.PersistentScheduler)


def test_a_failed_send_is_logged_and_caches_no_source() -> None:
    cached, logged = _send("ours")
    errors = [json.loads(x) for x in logged.splitlines() if '"ERROR"' in x]
    assert [x["message"] for x in errors] == [
        "Message Error: Couldn't apply scheduled task x: broker away"
    ]
    assert "SchedulingError" in errors[0]["exc"]  # the traceback is still logged
    assert cached == []


def test_celerys_own_scheduler_for_contrast_caches_its_stack() -> None:
    cached, logged = _send("celery", "standard")
    assert "Message Error" in logged
    assert beat.__file__ in cached  # format_stack read beat's own source


def test_fleetscope_logging_keeps_even_celerys_stack_dump_out_of_the_cache() -> None:
    """The second guard (common.logs.read_source_uncached): Celery's own scheduler in a
    process with fleetscope's logging still prints its stack, and caches nothing of it."""
    cached, logged = _send("celery")
    assert "Message Error" in logged and "apply_entry" in logged
    assert cached == []
