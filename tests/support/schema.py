"""A small validator for the JSON Schema subset our OpenAPI document uses ($ref, type,
nullable, enum, properties, required, items, additionalProperties), and a helper that checks a
real response against the document's declared response for its route and status."""

from __future__ import annotations

import re
from typing import Any

from common.kinds.registry import builtin_registry
from query.openapi import document

DOC = document(builtin_registry())
TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": (int, float),
}


def validate(value: Any, schema: dict, path: str = "$") -> None:
    if "$ref" in schema:
        schema = DOC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if value is None:
        assert schema.get("nullable"), f"{path}: null not allowed"
        return
    t = schema.get("type")
    if t:
        ok = isinstance(value, TYPES[t]) and not (
            t in ("integer", "number") and isinstance(value, bool)
        )
        assert ok, f"{path}: {value!r} is not {t}"
    if "enum" in schema:
        assert value in schema["enum"], f"{path}: {value!r} not in {schema['enum']}"
    if t == "object":
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            assert name in value, f"{path}: missing {name}"
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if k in props:
                validate(v, props[k], f"{path}.{k}")
            elif isinstance(extra, dict):
                validate(v, extra, f"{path}.{k}")
            elif props:
                raise AssertionError(f"{path}: undocumented field {k}")
    if t == "array":
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{i}]")


def route_of(path: str) -> str:
    for template in DOC["paths"]:
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path):
            return template
    raise AssertionError(f"{path} is not in the OpenAPI document")


def check_response(path: str, status: int, body: Any) -> None:
    """`body` (parsed JSON) must match what the document declares for `path` and `status`."""
    responses = DOC["paths"][route_of(path)]["get"]["responses"]
    assert str(status) in responses, f"{path}: status {status} is not documented"
    schema = responses[str(status)].get("content", {}).get("application/json", {}).get("schema")
    if schema is not None:
        validate(body, schema)
