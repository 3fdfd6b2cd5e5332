"""The MCP server's pure parts: control characters escaped, answers cut into pages with tokens
bound to their arguments, large objects shrunk within budget keeping their identity, OpenAPI
parameters as tool arguments, and `--http` addresses (loopback only)."""

from __future__ import annotations

import pytest

from fleetscope.client.errors import BadInput
from fleetscope.mcp.fleet import ToolError, object_path
from fleetscope.mcp.paging import offset_page, shrink, size
from fleetscope.mcp.schemas import argument, to_query
from fleetscope.mcp.transports import allowed, parse_addr
from fleetscope.mcp.untrusted import clean


def test_clean_escapes_controls_and_keeps_layout() -> None:
    got = clean({"m\x1b": ["a\x1b[31mb\tc\nd\u202ee\x00", 3, None]})
    assert got == {"m\\u001b": ["a\\u001b[31mb\tc\nd\\u202ee\\u0000", 3, None]}
    assert clean("ünïcode ✓ 日本") == "ünïcode ✓ 日本"


def test_offset_pages_are_bound_to_their_arguments() -> None:
    items = list(range(7))
    page, token = offset_page(items, {"a": 1}, None, 3)
    assert page == [0, 1, 2] and token
    page, token = offset_page(items, {"a": 1}, token, 3)
    assert page == [3, 4, 5]
    page, last = offset_page(items, {"a": 1}, token, 3)
    assert page == [6] and last is None
    with pytest.raises(ToolError, match="continue"):
        offset_page(items, {"a": 2}, token, 3)
    with pytest.raises(ToolError, match="continue"):
        offset_page(items, {"a": 1}, "x.y", 3)


def test_shrink_keeps_identity_within_budget() -> None:
    last = "kubectl.kubernetes.io/last-applied-configuration"
    obj = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "big", "namespace": "ns", "annotations": {last: "x" * 5000}},
        "spec": {"values": {"blob": "y" * 50_000}, "chart": {"spec": {"chart": "podinfo"}}},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }
    small, dropped = shrink(obj, 10_000)
    assert size(small) <= 10_000
    assert dropped[0] == f"metadata.annotations.{last}" and "spec.values" in dropped
    assert small["metadata"]["name"] == "big" and small["status"] == obj["status"]
    assert small["spec"]["chart"] == obj["spec"]["chart"]
    assert shrink(small, 10_000) == (small, [])


def test_openapi_parameters_become_arguments() -> None:
    assert (
        argument({"name": "suspended", "schema": {"type": "string", "enum": ["true", "false"]}})[
            "type"
        ]
        == "boolean"
    )
    listed = argument(
        {
            "name": "kind",
            "description": "only these kinds (repeatable or comma-separated)",
            "schema": {"type": "array", "items": {"type": "string", "enum": ["A", "B"]}},
        }
    )
    assert listed == {
        "type": ["array", "string"],
        "items": {"type": "string", "enum": ["A", "B"]},
        "description": "only these kinds (a list, or one comma-separated string)",
    }
    props = {"kind": listed, "suspended": {}, "limit": {}}
    args = {"kind": ["A", "B"], "suspended": False, "limit": 5, "other": "x", "name": ""}
    assert to_query(args, props) == [("kind", "A,B"), ("suspended", "false"), ("limit", "5")]


def test_object_paths_take_names_only() -> None:
    assert object_path("c1", "", "GatewayClass", "gc") == "/api/v1/objects/c1/_/GatewayClass/gc"
    for bad in ("..", "a/b", "%2e", "a b", "", "x\x1b", "é"):
        with pytest.raises(ToolError):
            object_path("c1", "ns", "Kustomization", bad)


def test_http_addresses_are_loopback_only() -> None:
    assert parse_addr(":0") == ("127.0.0.1", 0)
    assert parse_addr("8765") == ("127.0.0.1", 8765)
    assert parse_addr("[::1]:8765") == ("::1", 8765)
    assert parse_addr("localhost:1") == ("localhost", 1)
    for bad in ("0.0.0.0:1", "10.0.0.1:80", "example.com:80", "127.0.0.1:x", ":70000"):
        with pytest.raises(BadInput):
            parse_addr(bad)
    hosts, origins = allowed("127.0.0.1", 8765)
    assert "127.0.0.1:8765" in hosts and "http://localhost:8765" in origins
