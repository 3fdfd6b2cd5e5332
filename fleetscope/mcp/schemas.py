"""Tool input schemas from the server's own OpenAPI document: every query parameter a route
declares (its name, description, enum and pattern) becomes a tool argument, so a filter the
server adds (a label selector, drift) reaches the assistant without a change here. Before the
document could be read, the basics are assumed.

Arguments go back to the API as it takes them: lists comma-separated, booleans `true`/`false`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema

from fleetscope.mcp.fleet import bad_input

S = dict[str, Any]
MAX_PAGE, DEFAULT_PAGE = 100, 20
"""Rows (groups, entries) per tool answer: a page an assistant can read, not the API's 500."""

_LIST = {"type": "array", "items": {"type": "string"}}  # as an OpenAPI document declares it
BASIC_FILTERS: list[S] = [
    {"name": "cluster", "description": "only these clusters", "schema": _LIST},
    {"name": "namespace", "description": "only these namespaces", "schema": _LIST},
    {"name": "kind", "description": "only these kinds", "schema": _LIST},
    {"name": "status", "description": "only these statuses", "schema": _LIST},
    {"name": "name", "description": "object name contains this", "schema": {"type": "string"}},
    {"name": "limit", "description": "rows per page", "schema": {"type": "integer"}},
    {"name": "continue", "description": "the previous page's `continue`", "schema": {}},
]
"""What every server's list routes take, for when its document could not be read."""
BASIC_PATH: list[S] = [
    {"name": n, "in": "path", "description": d, "schema": {"type": "string"}}
    for n, d in (
        ("cluster", "cluster name"),
        ("namespace", "namespace; `_` for a cluster-scoped kind"),
        ("kind", "kind key, e.g. Kustomization"),
        ("name", "object name"),
    )
]
CONTINUE: S = {
    "type": "string",
    "description": "the `continue` of the previous answer, with the same other arguments, "
    "for the next page",
}


def argument(p: Mapping[str, Any]) -> S:
    """One OpenAPI parameter as a JSON-schema property an assistant fills in."""
    schema = dict(p.get("schema") or {})
    desc = str(p.get("description") or "").replace(" (repeatable or comma-separated)", "")
    schema.pop("nullable", None)
    if schema.get("enum") == ["true", "false"]:
        schema = {"type": "boolean"}
    elif schema.get("type") == "array":
        # a list, or the API's own comma-separated form (the items' rules apply to lists)
        items = dict(schema.get("items") or {"type": "string"})
        schema = {"type": ["array", "string"], "items": items}
        desc += " (a list, or one comma-separated string)"
    elif not schema.get("type") and not schema.get("enum"):
        schema["type"] = "string"
    return {**schema, "description": desc}


def query_properties(params: Iterable[Mapping[str, Any]], skip: Iterable[str] = ()) -> S:
    """The query parameters of a route as properties; `limit` capped to a readable page."""
    out: S = {}
    skipped = set(skip)
    for p in params:
        name = str(p["name"])
        if p.get("in", "query") != "query" or name in skipped:
            continue
        if name == "limit":
            out[name] = page_limit(str(p.get("description") or "entries per page"))
        elif name == "continue":
            out[name] = CONTINUE
        else:
            out[name] = argument(p)
    return out


def page_limit(description: str, default: int = DEFAULT_PAGE, high: int = MAX_PAGE) -> S:
    lead = description.split(",")[0]
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": high,
        "default": default,
        "description": f"{lead}, 1..{high} (default {default})",
    }


def path_properties(params: Iterable[Mapping[str, Any]]) -> S:
    """An object's path segments (cluster, namespace, kind, name) as properties."""
    out: S = {}
    for p in params:
        if p.get("in") == "path":
            out[str(p["name"])] = argument(p)
    if "namespace" in out:
        ns = out["namespace"]
        if "pattern" in ns:
            ns["pattern"] = "^$|" + ns["pattern"]
        ns["description"] = (
            "namespace; `_` (or empty) for a cluster-scoped kind such as GatewayClass"
        )
    return out


def schema(properties: S, required: Iterable[str] = ()) -> S:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def check(arguments: Mapping[str, Any], input_schema: S) -> None:
    """Bad arguments as a ToolError naming the argument (before any request)."""
    try:
        jsonschema.validate(dict(arguments), input_schema)
    except jsonschema.ValidationError as e:
        where = ".".join(str(p) for p in e.absolute_path) or "arguments"
        raise bad_input(f"{where}: {e.message[:300]}") from None


def to_query(arguments: Mapping[str, Any], properties: S) -> list[tuple[str, str]]:
    """The arguments that are query parameters, as the API takes them."""
    out: list[tuple[str, str]] = []
    for name, value in arguments.items():
        if name not in properties or value is None or value == [] or value == "":
            continue
        if isinstance(value, bool):
            out.append((name, "true" if value else "false"))
        elif isinstance(value, list):
            out.append((name, ",".join(str(v) for v in value)))
        else:
            out.append((name, str(value)))
    return out
