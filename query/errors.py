"""Errors become HTTP here, and only here: JSON `{"error": code, "message": ...}`.

Views raise common.errors types; this maps them (RequestError subclasses by their own status,
Redis trouble to 503, unknown routes to 404, anything unexpected to a bare 500 without details).
"""

from __future__ import annotations

import logging
import traceback

import redis
from flask import Flask, Response, jsonify
from redis.exceptions import RedisClusterException
from werkzeug.exceptions import HTTPException

from common.errors import RedisUnavailable, RequestError
from query import metrics

log = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str) -> Response:
    resp = jsonify({"error": code, "message": message})
    resp.status_code = status
    if status == 401:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="fleetscope"'
    return resp


def forget(e: BaseException) -> None:
    """Let go of what a handled exception holds: the locals of every frame its traceback went
    through, and the traceback itself, along its chain (`__cause__`, `__context__`). A raised
    exception sits in a reference cycle with its frames (a frame that caught it keeps it in a
    local, and its traceback keeps that frame), so without this the frames and everything
    their locals held (a request's partial answer: megabytes for a count over the fleet) stay
    until the next full collection. A request lives through several young collections, so
    they are in the oldest generation by then, and a failover answers thousands of 503s
    (docs/operations.md, "An error's frames": the soaks have not shown yet how much of a
    worker's RSS this was). Frames still running (the handler's callers) are left alone."""
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        if x.__traceback__ is not None:
            traceback.clear_frames(x.__traceback__)
            x.__traceback__ = None
        x = x.__cause__ or x.__context__


def register(app: Flask) -> None:
    """Install the handlers on `app`. Each lets go of the exception's frames once it has made
    the answer (`forget`)."""

    @app.errorhandler(RequestError)
    def _request_error(e: RequestError) -> Response:
        forget(e)
        return error_response(e.status, e.code, e.message)

    @app.errorhandler(RedisUnavailable)
    def _redis_down(e: RedisUnavailable) -> Response:
        metrics.REDIS_ERRORS.inc()
        forget(e)
        return error_response(503, "unavailable", str(e))

    @app.errorhandler(redis.RedisError)
    @app.errorhandler(RedisClusterException)  # a slot no node serves, mid-failover
    def _redis_error(e: Exception) -> Response:
        metrics.REDIS_ERRORS.inc()
        log.warning("redis error: %s", type(e).__name__)
        forget(e)
        return error_response(503, "unavailable", "the index (Redis) is not answering; retry")

    @app.errorhandler(HTTPException)
    def _http(e: HTTPException) -> Response:
        forget(e)
        code = (e.name or "error").lower().replace(" ", "_")
        status = e.code or 500
        if status == 404:
            return error_response(404, "not_found", "no such route; see /api/v1/openapi.json")
        if status == 405:
            return error_response(405, "method_not_allowed", "only GET is served here")
        return error_response(status, code, e.description or code)

    @app.errorhandler(Exception)
    def _unexpected(e: Exception) -> Response:
        log.exception("unexpected error")
        forget(e)
        return error_response(500, "internal", "internal error; the server log has details")
