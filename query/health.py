"""Unauthenticated operational routes: `/healthz`, `/readyz`, `/metrics`, and the OpenAPI
document at `/api/v1/openapi.json`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from common import redis_client
from common.buildinfo import BuildInfoCollector
from common.errors import RedisUnavailable
from query import metrics, openapi
from query.fleet_metrics import FleetCollector, ObjectCounts
from query.state import state

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> dict[str, Any]:
    try:
        state().r.ping()
    except redis_client.ERRORS as e:
        raise RedisUnavailable("Redis is not reachable") from e
    return {"status": "ready"}


@bp.get("/metrics")
def metrics_route() -> Response:
    st = state()
    counts = st.extensions.get("object_counts")
    if counts is None:
        counts = st.extensions["object_counts"] = ObjectCounts(st.r)
    fleet = FleetCollector(st.r, st.settings, counts)
    body, content_type = metrics.render(
        [BuildInfoCollector(), fleet], st.settings.metrics_cluster_labels
    )
    return Response(body, content_type=content_type)


@bp.get("/api/v1/openapi.json")
def openapi_route() -> dict[str, Any]:
    return openapi.document(state().registry)
