"""`fleetscope mcp` over stdio against the real query service: the tools, their schemas (from
the server's OpenAPI document), resources and the prompt; each tool's answer equal to what the
API gives the same identity (admin, team member, a user bound to nothing); paging through
`continue`; a team member never meeting another team's names; bad input as tool errors."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import McpError

from fleetscope.mcp.untrusted import clean
from tests.support.mcp_stack import PRIVATE, TEAM_NS, Stack, as_flags, call, mcp_session, steady

CHAIN = {"cluster": "cluster-000", "namespace": TEAM_NS, "kind": "Kustomization"}
HISTORY = "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}/history"


def _path(ref: dict[str, str], tail: str = "") -> str:
    return "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}".format(**ref) + tail


def test_tools_resources_and_prompt(stack: Stack, home) -> None:
    _, doc = stack.api(None, "/api/v1/openapi.json")

    async def body() -> None:
        async with mcp_session(as_flags(stack, stack.users["admin-0"]), home) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            expected = {
                "fleet_status",
                "list_objects",
                "get_object",
                "get_relations",
                "list_groups",
                "explain_access",
                "why_failing",
            } | ({"get_history"} if HISTORY in doc["paths"] else set())
            assert set(tools) == expected
            for t in tools.values():
                assert len(t.description or "") > 80, t.name
                assert t.inputSchema["type"] == "object"
                assert t.inputSchema["additionalProperties"] is False
                assert t.annotations and t.annotations.readOnlyHint is True
            for tool, route in (
                ("list_objects", "/api/v1/objects"),
                ("list_groups", "/api/v1/groups"),
            ):
                declared = {p["name"] for p in doc["paths"][route]["get"]["parameters"]}
                assert declared <= set(tools[tool].inputSchema["properties"]), tool
            kinds = doc["paths"][
                _path(
                    {
                        "cluster": "{cluster}",
                        "namespace": "{namespace}",
                        "kind": "{kind}",
                        "name": "{name}",
                    }
                )
            ]
            registered = next(p for p in kinds["get"]["parameters"] if p["name"] == "kind")
            kind = tools["get_object"].inputSchema["properties"]["kind"]
            assert kind["enum"] == registered["schema"]["enum"]
            assert tools["list_objects"].inputSchema["properties"]["limit"]["maximum"] <= 100

            resources = {str(r.uri) for r in (await s.list_resources()).resources}
            assert "fleetscope://kinds" in resources
            assert "fleetscope://kinds/Kustomization" in resources
            read = await s.read_resource("fleetscope://kinds")  # type: ignore[arg-type]
            listed = json.loads(read.contents[0].text)  # type: ignore[union-attr]
            by_kind = {k["kind"]: k for k in listed["kinds"]}
            assert by_kind["Kustomization"]["shortNames"] == ["ks"]
            assert by_kind["HelmRelease"]["plural"] == "helmreleases"
            assert set(by_kind) == set(registered["schema"]["enum"])
            with pytest.raises(McpError):
                await s.read_resource("fleetscope://kinds/Secret")  # type: ignore[arg-type]

            prompts = (await s.list_prompts()).prompts
            assert [p.name for p in prompts] == ["triage_fleet"]
            got = await s.get_prompt("triage_fleet", {"cluster": "cluster-001"})
            text = got.messages[0].content.text  # type: ignore[union-attr]
            for step in ("fleet_status", "list_groups", "why_failing", "cluster-001"):
                assert step in text
            with pytest.raises(McpError):
                await s.get_prompt("triage_fleet", {"cluster": "x; rm -rf /"})
            with pytest.raises(McpError):
                await s.get_prompt("no-such-prompt")

    anyio.run(body)


@pytest.mark.parametrize("who", ["admin-0", "dev-team-00", "nobody"])
def test_answers_equal_the_api(stack: Stack, home, who: str) -> None:
    user = stack.users[who]
    ref = {**CHAIN, "name": "mcp-chain"}

    def api(path: str, **params: str) -> tuple[int, Any]:
        """The API's answer as a tool gives it: control characters escaped (mcp-inject)."""
        code, got = stack.api(user, path, **params)
        return code, clean(got)

    async def body() -> None:
        async with mcp_session(as_flags(stack, user), home) as s:
            _, want = api("/api/v1/objects", status="unhealthy", limit="100")
            assert await call(s, "list_objects", status=["unhealthy"], limit=100) == (False, want)
            _, want = api("/api/v1/groups", status="unhealthy", limit="20")
            assert await call(s, "list_groups", status=["unhealthy"]) == (False, want)
            _, want = api("/api/v1/objects", kind="Kustomization,GitRepository", limit="20")
            got = await call(s, "list_objects", kind="Kustomization,GitRepository")
            assert got == (False, want)
            _, want = api("/api/v1/status")
            error, got = await call(s, "fleet_status")
            assert not error and steady(got) == steady({**want, "continue": None})
            _, want = api("/api/v1/access")
            assert await call(s, "explain_access") == (False, {**want, "continue": None})

            code, want = api(_path(ref, "/relations"), depth="2")
            error, got = await call(s, "get_relations", depth=2, **ref)
            if code == 200:
                assert (error, got) == (False, {**want, "continue": None})
            else:
                assert error and got["message"] == want["message"]

            code, want = api(_path(ref))
            error, got = await call(s, "get_object", **ref)
            assert error is (code != 200)
            assert got == want if code == 200 else got["message"] == want["message"]

            error, got = await call(s, "why_failing", **ref)
            if who == "nobody":
                assert error and got["error"] == "not_found"
                return
            _, rel = api(_path(ref, "/relations"), depth="1")
            _, src = api("/api/v1/objects", name="mcp-chain-src", namespace=TEAM_NS)
            assert got["object"] == rel["object"]
            assert got["blockedBy"] == src["items"] == [got["rootCause"]]
            assert got["relations"]["upstream"] == rel["upstream"]
            assert "mcp-chain-src" in got["summary"] and "auth required" in got["summary"]

    anyio.run(body)


def test_paging_walks_every_row_once(stack: Stack, home) -> None:
    user = stack.users["admin-0"]
    _, whole = stack.api(user, "/api/v1/objects", limit="500")
    assert whole["continue"] is None and len(whole["items"]) > 20

    async def body() -> None:
        async with mcp_session(as_flags(stack, user), home) as s:
            rows: list[dict[str, Any]] = []
            token = None
            for _ in range(100):
                args: dict[str, Any] = {"limit": 7, **({"continue": token} if token else {})}
                error, page = await call(s, "list_objects", **args)
                assert not error and len(page["items"]) <= 7
                rows += page["items"]
                token = page["continue"]
                if not token:
                    break
            assert rows == clean(whole["items"])

            clusters, token = [], None
            while True:
                error, page = await call(
                    s, "fleet_status", limit=1, **({"continue": token} if token else {})
                )
                assert not error and len(page["clusters"]) <= 1
                clusters += [c["cluster"] for c in page["clusters"]]
                token = page["continue"]
                if not token:
                    break
            assert clusters == ["cluster-000", "cluster-001", "cluster-002"]
            error, got = await call(s, "fleet_status", **{"continue": "1.notthisone"})
            assert error and got["error"] == "bad_input" and "continue" in got["message"]

    anyio.run(body)


def _pairs(value: Any, out: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Every (cluster, namespace) an answer names."""
    if isinstance(value, dict):
        if isinstance(value.get("cluster"), str) and isinstance(value.get("namespace"), str):
            out.add((value["cluster"], value["namespace"]))
        for v in value.values():
            _pairs(v, out)
    elif isinstance(value, list):
        for v in value:
            _pairs(v, out)
    return out


def test_a_team_member_never_sees_another_teams_names(stack: Stack, home) -> None:
    cross = {**CHAIN, "name": "mcp-cross"}

    async def answers(who: str) -> list[Any]:
        out: list[Any] = []
        async with mcp_session(as_flags(stack, stack.users[who]), home) as s:
            for tool in ("list_objects", "list_groups"):
                token = None
                while True:
                    error, page = await call(
                        s, tool, limit=100, **({"continue": token} if token else {})
                    )
                    assert not error
                    out.append(page)
                    token = page["continue"]
                    if not token:
                        break
            for tool in ("fleet_status", "explain_access"):
                out.append((await call(s, tool))[1])
            # (not get_object: the live object is the user's own, read as them; its spec may
            # name what it points at, as kubectl would show it)
            for tool in ("get_relations", "why_failing"):
                error, got = await call(s, tool, **cross)
                assert not error, got
                out.append(got)
            error, got = await call(s, "get_relations", **cross, depth=5)
            out.append(got)
            if who == "dev-team-00":
                assert got["hidden"] >= 1  # the private source: counted, never named
                assert got["upstream"] == []
        return out

    team = anyio.run(answers, "dev-team-00")
    admin = anyio.run(answers, "admin-0")
    assert PRIVATE in json.dumps(admin)  # the name is there to leak
    leaks = [a for a in team if PRIVATE in json.dumps(a)]
    assert not leaks
    _, access = stack.api(stack.users["dev-team-00"], "/api/v1/access")
    allowed = {(c["cluster"], ns) for c in access["clusters"] for ns in c["namespaces"]}
    assert _pairs(team, set()) <= allowed
    assert not _pairs(admin, set()) <= allowed


def test_bad_input_is_a_tool_error_with_the_reason(stack: Stack, home) -> None:
    user = stack.users["admin-0"]
    _, api_error = stack.api(user, "/api/v1/objects", **{"continue": "garbage"})

    async def body() -> None:
        async with mcp_session(as_flags(stack, user), home) as s:
            cases = [
                ("list_objects", {"status": ["broken"]}, "status"),
                ("list_objects", {"nonsense": 1}, "nonsense"),
                ("list_objects", {"limit": 101}, "limit"),
                ("get_object", {**CHAIN, "name": "mcp-chain", "namespace": "../../x"}, "namespace"),
                ("get_object", {**CHAIN, "kind": "Secret", "name": "x"}, "kind"),
                ("get_relations", {**CHAIN, "name": "mcp-chain", "depth": 99}, "depth"),
                ("why_failing", {**CHAIN}, "name"),
                ("no_such_tool", {}, "no_such_tool"),
            ]
            for tool, args, named in cases:
                error, got = await call(s, tool, **args)
                assert error, (tool, args)
                assert set(got) == {"error", "message"} and named in got["message"], got
            error, got = await call(s, "list_objects", **{"continue": "garbage"})
            assert error and got == {"error": "bad_input", "message": api_error["message"]}
            error, got = await call(s, "get_object", **{**CHAIN, "name": "does-not-exist"})
            code, want = stack.api(user, _path({**CHAIN, "name": "does-not-exist"}))
            assert (
                error and code == 404 and got == {"error": "not_found", "message": want["message"]}
            )

    anyio.run(body)
