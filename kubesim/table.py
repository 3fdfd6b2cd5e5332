"""`meta.k8s.io/v1` Table answers, which `kubectl get` asks for (`Accept: ...;as=Table`).

Columns follow the printer columns the real CRDs and kube-apiserver declare: Flux kinds NAME,
AGE, READY, STATUS (the Ready condition); GatewayClass CONTROLLER, ACCEPTED; Gateway CLASS,
ADDRESS, PROGRAMMED; HTTPRoute/GRPCRoute/TLSRoute HOSTNAMES; Kuadrant policies ACCEPTED and
ENFORCED (priority 2: `-o wide`); Services TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S); namespaces
STATUS; others NAME, AGE.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Callable
from typing import Any

from kubesim.catalog import NAMESPACES, Resource

Obj = dict[str, Any]
Cell = Callable[[Obj], Any]
Columns = list[tuple[dict[str, Any], Cell]]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _col(name: str, kind: str = "string", fmt: str = "", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


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


def _condition(ctype: str, field: str = "status", default: str = "") -> Cell:
    def cell(obj: Obj) -> str:
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") == ctype:
                return str(cond.get(field, ""))
        return default

    return cell


def _spec(*path: str) -> Cell:
    def cell(obj: Obj) -> Any:
        value: Any = obj.get("spec") or {}
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value if value is not None else ""

    return cell


def _address(obj: Obj) -> str:
    addresses = (obj.get("status") or {}).get("addresses") or []
    return str(addresses[0].get("value", "")) if addresses else ""


def _hostnames(obj: Obj) -> str:
    return json.dumps((obj.get("spec") or {}).get("hostnames") or [])


def _external_ip(obj: Obj) -> str:
    if (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return "<none>"
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return ",".join(str(i.get("ip") or i.get("hostname", "")) for i in ingress) or "<pending>"


def _ports(obj: Obj) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


READY: Columns = [
    (_col("Ready"), _condition("Ready", default="False")),
    (_col("Status"), _condition("Ready", "message", "waiting to be reconciled")),
]
HOSTNAMES: Columns = [(_col("Hostnames"), _hostnames)]
POLICY: Columns = [
    (_col("Accepted", priority=2), _condition("Accepted")),
    (_col("Enforced", priority=2), _condition("Enforced")),
]
BY_KIND: dict[str, Columns] = {
    "GatewayClass": [
        (_col("Controller"), _spec("controllerName")),
        (_col("Accepted"), _condition("Accepted")),
    ],
    "Gateway": [
        (_col("Class"), _spec("gatewayClassName")),
        (_col("Address"), _address),
        (_col("Programmed"), _condition("Programmed")),
    ],
    "HTTPRoute": HOSTNAMES,
    "GRPCRoute": HOSTNAMES,
    "TLSRoute": HOSTNAMES,
    "Service": [
        (_col("Type"), _spec("type")),
        (_col("Cluster-IP"), _spec("clusterIP")),
        (_col("External-IP"), _external_ip),
        (_col("Port(s)"), _ports),
    ],
}


def _printer(res: Resource) -> Columns:
    """The columns between NAME and AGE (after AGE for Flux-style READY/STATUS)."""
    if res.kind == "Gateway" and res.status_rule == "istio":
        return []
    if res.kind in BY_KIND and (res.status_rule or res.kind == "Service"):
        return BY_KIND[res.kind]
    if res.status_rule == "policy":
        return POLICY
    if res.has_status and res.status_rule in ("flux", "conditions", ""):
        return READY
    return []


def _columns(res: Resource) -> list[dict[str, Any]]:
    name, created = _col("Name", fmt="name"), _col("Age", "date")
    if res is NAMESPACES:
        return [name, _col("Status"), created]
    extra = [col for col, _ in _printer(res)]
    return [name, created, *extra] if _printer(res) is READY else [name, *extra, created]


def _cells(res: Resource, obj: Obj) -> list[Any]:
    meta = obj.get("metadata") or {}
    created = age(str(meta.get("creationTimestamp", "")))
    if res is NAMESPACES:
        return [meta.get("name"), (obj.get("status") or {}).get("phase", "Active"), created]
    printer = _printer(res)
    extra = [cell(obj) for _, cell in printer]
    return (
        [meta.get("name"), created, *extra]
        if printer is READY
        else [meta.get("name"), *extra, created]
    )


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
