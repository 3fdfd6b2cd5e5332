"""The WSGI entry point gunicorn loads: `query.wsgi:app`, built from the environment."""

from __future__ import annotations

from common.settings import Settings
from query.app import create_app

app = create_app(Settings.from_env())
