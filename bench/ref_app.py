"""The reference endpoint of the query benchmark: a tiny Flask app doing one Redis GET per
request, served by gunicorn with the query service's own config (`query.gunicorn_conf`).

    gunicorn --config python:query.gunicorn_conf bench.ref_app:app
"""

from __future__ import annotations

import redis
from flask import Flask

from common.redis_client import connect
from common.redis_urls import check
from common.settings import Settings

KEY = "fs:bench:ref"

app = Flask("ref")
_url = Settings.from_env().redis_url
# A cluster is read through fleetscope's own client; one server as before (redis-py's defaults).
_r = connect(_url) if check(_url) == "cluster" else redis.Redis.from_url(_url)


@app.get("/ref")
def ref() -> dict[str, object]:
    return {"value": (_r.get(KEY) or b"").decode()}
