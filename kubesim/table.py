"""`meta.k8s.io/v1` Table answers, which `kubectl get` asks for (`Accept: ...;as=Table`).

Columns follow the printer columns the real CRDs declare: Flux kinds NAME, AGE, READY,
STATUS (the Ready condition); others NAME, AGE; namespaces NAME, STATUS, AGE.
"""

from __future__ import annotations

import calendar
import json
import time
from typing import Any

from kubesim.catalog import NAMESPACES, Resource

Obj = dict[str, Any]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _col(name: str, kind: str = "string", fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": 0}


def age(timestamp: str, now: float | None = None) -> str:
    try:
        created = calendar.timegm(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return "<unknown>"
    secs = max(0, int((time.time() if now is None else now) - created))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size * 2:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _ready(obj: Obj) -> tuple[str, str]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status", "")), str(cond.get("message", ""))
    return "False", "waiting to be reconciled"


def _columns(res: Resource) -> list[dict[str, Any]]:
    name = _col("Name", fmt="name")
    if res is NAMESPACES:
        return [name, _col("Status"), _col("Age", "date")]
    if res.has_status and res.status_rule != "istio":
        return [name, _col("Age", "date"), _col("Ready"), _col("Status")]
    return [name, _col("Age", "date")]


def _cells(res: Resource, obj: Obj) -> list[Any]:
    meta = obj.get("metadata") or {}
    created = age(str(meta.get("creationTimestamp", "")))
    if res is NAMESPACES:
        return [meta.get("name"), (obj.get("status") or {}).get("phase", "Active"), created]
    if res.has_status and res.status_rule != "istio":
        return [meta.get("name"), created, *_ready(obj)]
    return [meta.get("name"), created]


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def render(res: Resource, raws: list[bytes], meta: Obj, include: str = "Metadata") -> bytes:
    """A Table of `raws` (one object or a list page); `meta` is the list metadata."""
    rows = []
    for raw in raws:
        obj = json.loads(raw)
        row: Obj = {"cells": _cells(res, obj)}
        embedded = _row_object(obj, include)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    table = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": _columns(res),
        "rows": rows,
    }
    return json.dumps(table, separators=(",", ":")).encode()


TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"
