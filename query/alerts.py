"""`GET /api/v1/alerts`: the firing fleet alerts on objects the caller may list (RBAC as for
rows: common.alerts.read), with the state of the rules (a refused rules file says why)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request

from common.alerts.read import AlertsView, visible
from query import params
from query.scope import iso
from query.state import caller, state

bp = Blueprint("alerts", __name__, url_prefix="/api/v1")


@bp.get("/alerts")
def list_alerts() -> Response:
    st, user = state(), caller()
    params.check_known(request.args, ())
    view: AlertsView | None = st.extensions.get("alerts")
    if view is None:
        view = st.extensions["alerts"] = AlertsView(st.r)
    alerts, meta = view.read()
    scope = st.scope(user)
    items = visible(alerts, scope.visible)
    evaluated = meta.get("evaluatedAt")
    rules: dict[str, Any] = {
        "count": int(meta.get("ruleCount", "0")),
        "lastEvaluation": iso(float(evaluated)) if evaluated else None,
        "error": meta.get("error"),
    }
    return jsonify({"items": items, "rules": rules, "freshness": scope.freshness(st.settings)})
