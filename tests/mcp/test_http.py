"""`fleetscope mcp --http ADDR`: the streamable HTTP transport, driven by the SDK's HTTP client
against the real query service; Host headers of other names refused (DNS rebinding) and
addresses off loopback refused at start (the server acts as its user and has no login)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import anyio
import requests
from mcp import ClientSession
from mcp.client import streamable_http

from fleetscope.mcp.untrusted import clean
from tests.support.mcp_stack import Stack, as_flags, call, mcp_env
from tests.support.paths import REPO
from tests.support.waiting import wait_for

# The SDK's client under its current name, or the older one (mcp < 1.24)
CLIENT = (
    getattr(streamable_http, "streamable_http_client", None)
    or streamable_http.streamablehttp_client
)


def test_streamable_http_transport(stack: Stack, home: Path) -> None:
    user = stack.users["dev-team-00"]
    errlog = home / "stderr.log"
    args = [sys.executable, "-m", "fleetscope", "mcp", "--http", "127.0.0.1:0"]
    with open(errlog, "w") as err:
        proc = subprocess.Popen(
            [*args, *as_flags(stack, user)], stderr=err, env=mcp_env(home), cwd=REPO
        )
    try:
        found = wait_for(
            lambda: re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", errlog.read_text()),
            30,
            lambda: errlog.read_text(),
        )
        url = found.group(1)
        _, want = stack.api(user, "/api/v1/objects", status="unhealthy", limit="20")

        async def body() -> None:
            async with CLIENT(url) as (read, write, _), ClientSession(read, write) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                assert {"list_objects", "why_failing", "explain_access"} <= names
                got = await call(s, "list_objects", status=["unhealthy"])
                assert got == (False, clean(want))

        anyio.run(body)
        rebound = requests.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Host": "attacker.example", "Accept": "application/json, text/event-stream"},
            timeout=10,
        )
        assert rebound.status_code == 421
        foreign = requests.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                "Origin": "http://attacker.example",
                "Accept": "application/json, text/event-stream",
            },
            timeout=10,
        )
        assert foreign.status_code == 403
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_http_refuses_addresses_off_loopback(stack: Stack, home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fleetscope", "mcp", "--http", "0.0.0.0:0", "--server", stack.base],
        capture_output=True,
        text=True,
        env=mcp_env(home),
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 2
    assert "only a loopback address" in done.stderr
