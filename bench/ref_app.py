"""The reference endpoint of the query benchmark: a tiny Flask app doing one Redis GET per
request, served by gunicorn with the query service's own config (`query.gunicorn_conf`).

    gunicorn --config python:query.gunicorn_conf bench.ref_app:app
"""

from __future__ import annotations

import redis
from flask import Flask

from common.settings import Settings

KEY = "fs:bench:ref"

app = Flask("ref")
_r = redis.Redis.from_url(Settings.from_env().redis_url)


@app.get("/ref")
def ref() -> dict[str, object]:
    return {"value": (_r.get(KEY) or b"").decode()}
