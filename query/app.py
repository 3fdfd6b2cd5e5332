"""The Flask app factory of the query service: `create_app(settings)`.

Wires state, error handling, request metrics and blueprints. Later blueprints (the web view,
`query/ui.py`) are added in `register_blueprints`, the one place routes are mounted.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

from flask import Flask, Response, g, request

from common.index.read import memo
from common.settings import Settings
from query import (
    access_log,
    alerts,
    api,
    detail,
    edges,
    errors,
    groups,
    health,
    history,
    info,
    metrics,
    relations,
    watch,
)
from query.state import QueryState


def register_blueprints(app: Flask) -> None:
    for bp in (
        health.bp,
        api.bp,
        groups.bp,
        info.bp,
        detail.bp,
        relations.bp,
        alerts.bp,
        history.bp,
        watch.bp,
    ):
        app.register_blueprint(bp)
    if importlib.util.find_spec("query.ui") is not None:  # the web view, when present
        from query import ui  # type: ignore[attr-defined,unused-ignore]

        ui.register(app)


def _observe(app: Flask) -> None:
    series: dict[tuple[str, int], Any] = {}  # (route, status) -> its histogram child

    @app.before_request
    def _start() -> None:
        g.started = time.perf_counter()
        g.cpu = time.thread_time()

    @app.after_request
    def _done(resp: Response) -> Response:
        rule = request.url_rule.rule if request.url_rule is not None else "unmatched"
        started = g.get("started", time.perf_counter())
        # the request's own CPU (its thread's), for the JSON access log (query.access_log): a
        # slow answer with little of it waited (for the GIL, a lock, Redis), not computed
        request.environ[access_log.CPU_KEY] = time.thread_time() - g.get("cpu", time.thread_time())
        child = series.get((rule, resp.status_code))
        if child is None:
            child = metrics.REQUEST_LATENCY.labels(rule, str(resp.status_code))
            series[(rule, resp.status_code)] = child
        child.observe(time.perf_counter() - started)
        return resp


def create_app(settings: Settings) -> Flask:
    app = Flask("query")
    app.json.sort_keys = False  # type: ignore[attr-defined]
    memo.set_budget(settings.query_memo_mib)
    app.extensions["fleetscope"] = QueryState.build(settings)
    errors.register(app)
    edges.install(app, settings)
    _observe(app)
    register_blueprints(app)
    return app
