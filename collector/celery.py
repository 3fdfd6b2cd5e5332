"""The app `celery -A collector worker|beat` finds (Celery looks up `collector.celery.app`).
Settings come from `FLEETSCOPE_*` variables; creating the app connects to nothing."""

from __future__ import annotations

import sys

from collector.app import create_celery
from common.errors import ConfigError
from common.settings import Settings

try:
    app = create_celery(Settings.from_env())
except ConfigError as e:  # Celery would print a traceback around the one line that matters
    sys.exit(f"fleetscope collector: configuration error: {e}")
