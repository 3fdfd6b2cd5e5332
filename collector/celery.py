"""The app `celery -A collector worker|beat` finds (Celery looks up `collector.celery.app`).
Settings come from `FLEETSCOPE_*` variables; creating the app connects to nothing."""

from __future__ import annotations

from collector.app import create_celery
from common.settings import Settings

app = create_celery(Settings.from_env())
