"""Fixtures for `fleetscope mcp`: the stack of tests.support.mcp_stack, one per package (the
`home` the MCP server runs in is tests/conftest.py's)."""

from __future__ import annotations

from tests.support import mcp_stack

stack = mcp_stack.stack
