"""The tools: what each asks the API, its input schema and its description. Every tool is a
GET of a read route as the caller, so none can change anything or see past the user's RBAC.
Which tools and arguments there are follows the server's OpenAPI document (history, drift)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fleetscope.client.features import DETAIL, GROUPS, OBJECTS, RELATIONS, Features
from fleetscope.mcp import schemas
from fleetscope.mcp.fleet import Fleet, bad_input, object_path
from fleetscope.mcp.paging import offset_page, shrink
from fleetscope.mcp.schemas import BASIC_FILTERS, BASIC_PATH, S

HISTORY = DETAIL + "/history"
EDGES_PER_PAGE = 100
NEVER = frozenset({"secret", "secrets"})
"""Kinds no tool reads, whatever a kinds file registers: credentials are not the fleet's view."""
Run = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: S
    run: Run


def _params(fleet: Fleet, path: str, basics: list[S]) -> list[S]:
    return fleet.parameters(path) or basics


def object_properties(fleet: Fleet, features: Features) -> S:
    props = schemas.path_properties(_params(fleet, DETAIL, BASIC_PATH))
    kind = props.get("kind", {})
    if "enum" in kind:
        kind["enum"] = [k for k in kind["enum"] if str(k).lower() not in NEVER]
    return props


def object_ref(args: dict[str, Any], features: Features, tail: str = "") -> str:
    kind = args.get("kind")
    if isinstance(kind, str) and kind.lower() in NEVER:
        raise bad_input("kind: Secrets are never read through fleetscope")
    if features.kinds and kind not in features.kinds:
        raise bad_input(f"kind {str(kind)[:80]!r}: one of {', '.join(features.kinds)}")
    return object_path(args.get("cluster"), args.get("namespace"), kind, args.get("name"), tail)


def checked(input_schema: S, body: Run) -> Run:
    """`body`, run only on arguments its schema accepts (else a bad_input ToolError)."""

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        schemas.check(args, input_schema)
        return await body(args)

    return run


def _paged_route(fleet: Fleet, path: str, props: S) -> Run:
    async def run(args: dict[str, Any]) -> dict[str, Any]:
        query = schemas.to_query(args, props)
        if "limit" in props and "limit" not in args:
            query.append(("limit", str(schemas.DEFAULT_PAGE)))
        return await fleet.aget(path, query)

    return run


def list_objects(fleet: Fleet) -> Tool:
    props = schemas.query_properties(_params(fleet, OBJECTS, BASIC_FILTERS))
    s = schemas.schema(props)
    return Tool(
        "list_objects",
        "List fleet objects",
        "List the Flux, Istio, Gateway API and Kuadrant objects of every cluster the user may "
        "see, one page at a time, filtered by "
        + ", ".join(p for p in props if p not in ("limit", "continue"))
        + ". Each row has status (healthy | unhealthy | progressing | unknown), reason, "
        "message, lastTransitionTime and, when something upstream fails, blockedBy. The answer "
        "has items, continue (pass it back, with the same filters, for the next page; null on "
        "the last) and freshness (whether the index is complete right now). Use it for "
        "'what is failing', 'show me the HelmReleases in cluster X'.",
        s,
        checked(s, _paged_route(fleet, OBJECTS, props)),
    )


def get_object(fleet: Fleet, features: Features) -> Tool:
    s = schemas.schema(object_properties(fleet, features), ("cluster", "namespace", "kind", "name"))

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        body = await fleet.aget(object_ref(args, features))
        obj = body.get("object")
        if not isinstance(obj, dict):
            return body
        if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
            raise bad_input("kind: Secrets are never read through fleetscope")
        shown, dropped = shrink(obj)
        return {**body, "object": shown, **({"truncated": dropped} if dropped else {})}

    return Tool(
        "get_object",
        "Read one live object",
        "Read one object live from its cluster (spec, status, conditions, events of its "
        "controllers), through fleetscope's proxy as the user: the cluster's own RBAC decides. "
        "Only the kinds fleetscope indexes, never Secrets. Use it after list_objects to see "
        "why a row says what it says. Very large objects lose their largest parts (listed in "
        "`truncated`).",
        s,
        checked(s, run),
    )


def get_relations(fleet: Fleet, features: Features) -> Tool:
    props = {
        **object_properties(fleet, features),
        **schemas.query_properties(fleet.parameters(RELATIONS)),
        "continue": schemas.CONTINUE,
    }
    s = schemas.schema(props, ("cluster", "namespace", "kind", "name"))

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        query = schemas.to_query({k: v for k, v in args.items() if k == "depth"}, props)
        body = await fleet.aget(object_ref(args, features, "/relations"), query)
        edges = [(d, e) for d in ("upstream", "downstream") for e in body.get(d) or []]
        key = {k: v for k, v in args.items() if k != "continue"}
        page, after = offset_page(edges, ["relations", key], args.get("continue"), EDGES_PER_PAGE)
        for d in ("upstream", "downstream"):
            body[d] = [e for where, e in page if where == d]
        return {**body, "continue": after}

    return Tool(
        "get_relations",
        "Object relations",
        "What one object depends on (upstream: its source, dependsOn, parent Gateway, policy "
        "target, the Kustomization or HelmRelease that applied it) and what depends on it "
        "(downstream), up to `depth` hops, from fleetscope's index. Each edge has relation, "
        "status and exists (false: a dangling reference). Objects the user may not list are "
        "never named, only counted in `hidden`.",
        s,
        checked(s, run),
    )


def list_groups(fleet: Fleet, features: Features) -> Tool:
    props = schemas.query_properties(_params(fleet, GROUPS, BASIC_FILTERS))
    s = schemas.schema(props)
    drift = " and drift between clusters" if "drift" in props else ""
    return Tool(
        "list_groups",
        "Objects across clusters",
        "The same object (namespace, kind, name), or a whole namespace with by=namespace, "
        "grouped across the user's clusters: how many clusters report each status"
        f"{drift}, most unhealthy first, then the worst clusters. Use it to find fleet-wide "
        "problems and to answer 'where else does this fail'. Takes the list filters of "
        "list_objects; pages with continue.",
        s,
        checked(s, _paged_route(fleet, GROUPS, props)),
    )


def get_history(fleet: Fleet, features: Features) -> Tool:
    query_props = schemas.query_properties(fleet.parameters(HISTORY))
    props = {**object_properties(fleet, features), **query_props}
    s = schemas.schema(props, ("cluster", "namespace", "kind", "name"))

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        query = schemas.to_query(args, query_props)
        if "limit" in query_props and "limit" not in args:
            query.append(("limit", str(schemas.DEFAULT_PAGE)))
        return await fleet.aget(object_ref(args, features, "/history"), query)

    return Tool(
        "get_history",
        "Object history",
        "The recorded transitions of one object: status, reason, message, revision and "
        "suspension changes, appearing and disappearing, with their times. Use it for 'when "
        "did this start failing' and 'what changed'.",
        s,
        checked(s, run),
    )


def fleet_status(fleet: Fleet) -> Tool:
    props = {
        "limit": schemas.page_limit("clusters per answer", 100, 100),
        "continue": schemas.CONTINUE,
    }
    s = schemas.schema(props)

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        body = await fleet.aget("/api/v1/status")
        return _sliced(body, "clusters", args, ["status"], 100)

    return Tool(
        "fleet_status",
        "Fleet status",
        "Whether fleetscope's index is complete and fresh: the overall state (ready | "
        "rebuilding | degraded) and message, clusters collected out of total, and per cluster "
        "the user may see its sync state, last successful sync, last error, object count and "
        "whether its RBAC data is fresh. Check it first: while degraded, lists may be "
        "incomplete or stale.",
        s,
        checked(s, run),
    )


def explain_access(fleet: Fleet) -> Tool:
    props = {
        "cluster": {"type": "array", "items": {"type": "string"}, "description": "only these"},
        "limit": schemas.page_limit("clusters per answer", 20, 100),
        "continue": schemas.CONTINUE,
    }
    s = schemas.schema(props)

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        body = await fleet.aget("/api/v1/access")
        wanted = set(args.get("cluster") or [])
        if wanted:
            body["clusters"] = [c for c in body.get("clusters") or [] if c.get("cluster") in wanted]
        return _sliced(body, "clusters", args, ["access"], 20)

    return Tool(
        "explain_access",
        "Explain access",
        "Who fleetscope thinks the user is (name and groups) and, per cluster, which "
        "namespaces and kinds they may list and the RoleBindings or ClusterRoleBindings that "
        "grant it; rbacFresh false means the cluster is hidden until its RBAC data is fresh. "
        "Use it to explain why an object or cluster is not visible.",
        s,
        checked(s, run),
    )


def _sliced(
    body: dict[str, Any], field: str, args: dict[str, Any], key: list[Any], default: int
) -> S:
    """One page of a list the API answers whole (`field` of `body`)."""
    items = body.get(field) or []
    limit = int(args.get("limit") or default)
    rest = {k: v for k, v in args.items() if k != "continue"}
    page, after = offset_page(items, [*key, rest], args.get("continue"), limit)
    return {**body, field: page, "continue": after}
