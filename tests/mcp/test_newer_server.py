"""`fleetscope mcp` follows the server's OpenAPI document: against a server that declares more
(object history, a `drift` filter on groups, a `labelSelector` on lists) the tools and their
arguments appear and reach the API as declared; against one that declares none of it, they do
not (tests/mcp/test_tools.py). The newer server is a stand-in (tests/cli/fakeapi.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio

from common.kinds.registry import builtin_registry
from query.openapi import document
from tests.support.fakeapi import FakeApi
from tests.support.mcp_stack import call, mcp_session

DETAIL = "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}"
OBJECT = "/api/v1/objects/c1/ns/Kustomization/app"
ROW = {"cluster": "c1", "namespace": "ns", "kind": "Kustomization", "name": "app"}
FRESH = {"degraded": False, "state": "ready", "message": "1 of 1 clusters collected"}


def _newer_document() -> dict[str, Any]:
    doc = document(builtin_registry())
    paths = doc["paths"]
    detail = paths[DETAIL]["get"]["parameters"]
    limit = {"name": "limit", "in": "query", "description": "transitions per page, 1..500"}
    paths[DETAIL + "/history"] = {
        "get": {
            "parameters": [
                *copy.deepcopy(detail),
                {**limit, "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
                {"name": "continue", "in": "query", "schema": {"type": "string"}},
            ]
        }
    }
    group_params = paths["/api/v1/groups"]["get"]["parameters"]
    group_params[:] = [p for p in group_params if p["name"] != "drift"]  # declared as below
    group_params.append(
        {
            "name": "drift",
            "in": "query",
            "description": "only groups whose clusters disagree on revision or status",
            "schema": {"type": "string", "enum": ["true", "false"]},
        }
    )
    paths["/api/v1/objects"]["get"]["parameters"].append(
        {
            "name": "labelSelector",
            "in": "query",
            "description": "a Kubernetes label selector",
            "schema": {"type": "string"},
        }
    )
    return doc


def test_tools_follow_what_the_server_declares(home: Path) -> None:
    transitions = [{"at": f"2026-11-0{i}T00:00:00Z", "status": "unhealthy"} for i in range(1, 9)]
    empty = (200, {"items": [], "continue": None, "freshness": FRESH})
    api = FakeApi(
        {
            "/api/v1/openapi.json": (200, _newer_document()),
            "/api/v1/objects": empty,
            "/api/v1/groups": empty,
            OBJECT + "/history": (200, {"items": transitions, "continue": None}),
            OBJECT + "/relations": (
                200,
                {
                    "object": {**ROW, "status": "unhealthy"},
                    "upstream": [],
                    "downstream": [],
                    "hidden": 0,
                },
            ),
        }
    )

    async def body() -> None:
        async with mcp_session(["--server", api.url], home) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert "get_history" in tools
            assert tools["list_groups"].inputSchema["properties"]["drift"]["type"] == "boolean"
            assert "drift" in (tools["list_groups"].description or "")
            assert "labelSelector" in tools["list_objects"].inputSchema["properties"]
            assert (await call(s, "list_objects", labelSelector="app=web,tier!=db"))[0] is False
            assert (await call(s, "list_groups", drift=True))[0] is False
            error, got = await call(s, "get_history", **ROW, limit=3)
            assert (error, got) == (False, {"items": transitions, "continue": None})
            error, got = await call(s, "why_failing", **ROW)
            assert not error and got["history"]["items"] == transitions[:5]

    try:
        anyio.run(body)
    finally:
        api.server.shutdown()
        api.server.server_close()
    asked = {
        (path, tuple(sorted((k, tuple(v)) for k, v in q.items()))) for path, q, _ in api.requests
    }
    assert (
        "/api/v1/objects",
        (("labelSelector", ("app=web,tier!=db",)), ("limit", ("20",))),
    ) in asked
    assert ("/api/v1/groups", (("drift", ("true",)), ("limit", ("20",)))) in asked
    assert (OBJECT + "/history", (("limit", ("3",)),)) in asked
    assert (OBJECT + "/history", (("limit", ("5",)),)) in asked
