"""`fleetscope mcp` with the CLI's credentials against the OIDC-mode query service: a token
file, an exec credential plugin (which must not get the protocol's stdin), an expired token
as a tool error with the API's message (and obtained again from its file once it is renewed),
an unreachable server; no token ever in the server's stderr, even at `-v 8`."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import anyio

from fleetscope.mcp.untrusted import clean
from tests.support.mcp_stack import Stack, call, mcp_session, steady


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_tool_error(home: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"

    async def body() -> None:
        async with mcp_session(["--server", url], home) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"list_objects", "fleet_status", "why_failing"} <= names
            for tool in ("list_objects", "fleet_status"):
                error, got = await call(s, tool)
                assert error and got["error"] == "unreachable"
                assert got["message"] == f"cannot reach {url}: connection refused"

    anyio.run(body)


def test_token_file_expired_then_renewed_and_never_logged(stack: Stack, home: Path) -> None:
    valid = stack.issuer.token(sub="dev-team-00", groups=["team-00"])
    expired = stack.issuer.token(sub="dev-team-00", groups=["team-00"], exp=int(time.time()) - 3600)
    token_file = home / "token"
    token_file.write_text(expired + "\n")
    code, refused = stack.api(None, "/api/v1/objects", token=expired)
    assert code == 401
    _, want = stack.api(None, "/api/v1/objects", token=valid, status="unhealthy", limit="20")
    config = home / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "current-context": "oidc",
                "contexts": [
                    {"name": "oidc", "server": stack.oidc_base, "token-file": str(token_file)}
                ],
            }
        )
    )
    errlog = home / "stderr.log"

    async def body() -> None:
        args = ["--config", str(config), "-v", "8"]
        async with mcp_session(args, home, errlog=errlog) as s:
            error, got = await call(s, "list_objects", status=["unhealthy"])
            assert error and got == {"error": "unauthenticated", "message": refused["message"]}
            token_file.write_text(valid)  # renewed, as a token helper would
            error, got = await call(s, "list_objects", status=["unhealthy"])
            assert (error, got) == (False, clean(want))

    anyio.run(body)
    logged = errlog.read_text()
    assert "GET " + stack.oidc_base in logged  # -v 8 did log requests
    assert "Bearer <masked>" in logged
    for secret in (valid, expired, valid.split(".")[2], expired.split(".")[2]):
        assert secret not in logged


def test_exec_plugin_gets_no_stdin(stack: Stack, home: Path) -> None:
    token = stack.issuer.token(sub="admin-0", groups=["fleet-admins"])
    plugin = home / "plugin.py"
    # Reads stdin to its end first: a plugin that inherited the protocol's stdin would wait
    # for the client's messages (and take them) instead of printing a credential.
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(
        f"import json, sys\nassert sys.stdin.read() == ''\nprint(json.dumps({credential!r}))\n"
    )
    config = home / "config.yaml"
    exec_block = {"command": sys.executable, "args": [str(plugin)]}
    config.write_text(
        json.dumps(
            {
                "current-context": "x",
                "contexts": [{"name": "x", "server": stack.oidc_base, "exec": exec_block}],
            }
        )
    )
    _, want = stack.api(None, "/api/v1/status", token=token)
    errlog = home / "stderr.log"

    async def body() -> None:
        with anyio.fail_after(60):
            async with mcp_session(["--config", str(config)], home, errlog=errlog) as s:
                error, got = await call(s, "fleet_status")
                assert not error
                assert steady(got) == steady({**clean(want), "continue": None})

    anyio.run(body)
    assert token not in errlog.read_text()


def test_invalid_token_is_a_tool_error_with_the_apis_message(stack: Stack, home: Path) -> None:
    bogus = "not-a-jwt-but-a-secret-all-the-same"
    code, refused = stack.api(None, "/api/v1/status", token=bogus)
    assert code == 401
    errlog = home / "stderr.log"

    async def body() -> None:
        env = {"FLEETSCOPE_TOKEN": bogus}
        args = ["--server", stack.oidc_base, "-v", "8"]
        async with mcp_session(args, home, env=env, errlog=errlog) as s:
            for tool in ("fleet_status", "explain_access"):
                error, got = await call(s, tool)
                assert error and got == {"error": "unauthenticated", "message": refused["message"]}

    anyio.run(body)
    assert "Bearer <masked>" in errlog.read_text()
    assert bogus not in errlog.read_text()
