"""`why_failing`: one object's row, the chain of failing objects upstream that block it (each
row's `blockedBy`, followed to the root cause), its direct relations and, where the server
records history, its last transitions: one answer to "why is this failing", read as the user."""

from __future__ import annotations

from typing import Any

from fleetscope.client.features import OBJECTS, RELATIONS, Features
from fleetscope.mcp import schemas
from fleetscope.mcp.fleet import Fleet, ToolError
from fleetscope.mcp.tools import HISTORY, Tool, checked, object_properties, object_ref

MAX_HOPS = 10
EDGES_SHOWN = 50
TRANSITIONS = 5


def why_failing(fleet: Fleet, features: Features) -> Tool:
    s = schemas.schema(object_properties(fleet, features), ("cluster", "namespace", "kind", "name"))

    async def run(args: dict[str, Any]) -> dict[str, Any]:
        ref = object_ref(args, features)  # validates before any request
        rel = await _relations(fleet, features, args)
        row = rel.get("object") or await _row_by_list(fleet, args)
        chain = await _chain(fleet, features, row)
        out: dict[str, Any] = {"object": row, "blockedBy": chain}
        out["rootCause"] = chain[-1] if chain else (row if row.get("status") != "healthy" else None)
        if rel:
            out["relations"] = {
                d: (rel.get(d) or [])[:EDGES_SHOWN] for d in ("upstream", "downstream")
            }
            out["relations"]["hidden"] = rel.get("hidden", 0)
        if features.offers(HISTORY):
            out["history"] = await _history(fleet, ref)
        out["summary"] = summary(row, chain, rel.get("hidden", 0) if rel else 0)
        return out

    return Tool(
        "why_failing",
        "Why is it failing",
        "Explain why one object fails, in one call: its row (status, reason, message, "
        "failingSince), the chain of failing or missing objects upstream that block it "
        "(blockedBy, followed to the root cause), its direct relations (related objects the "
        "user may not list only counted) and, where the server records history, its last "
        "transitions; with a one-paragraph summary. Start here for 'why is X failing'.",
        s,
        checked(s, run),
    )


async def _relations(fleet: Fleet, features: Features, args: dict[str, Any]) -> dict[str, Any]:
    if features.known and not features.offers(RELATIONS):
        return {}
    return await fleet.aget(object_ref(args, features, "/relations"), [("depth", "1")])


async def _row_by_list(fleet: Fleet, ref: dict[str, Any]) -> dict[str, Any]:
    """The row through the list route (servers without relations): filters, then exact name."""
    ns = ref.get("namespace") or "_"
    query = [
        ("cluster", str(ref["cluster"])),
        ("namespace", str(ns)),
        ("kind", str(ref["kind"])),
        ("name", str(ref["name"])),
        ("limit", "500"),
    ]
    body = await fleet.aget(OBJECTS, query)
    for row in body.get("items") or []:
        if row.get("name") == ref["name"]:
            return dict(row)
    where = f"{ns}/{ref['name']}" if ns != "_" else str(ref["name"])
    raise ToolError("not_found", f"no {ref['kind']} {where} you may list on {ref['cluster']}")


async def _chain(fleet: Fleet, features: Features, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Each blocker's row in turn, from the nearest to the root cause (missing ones as their
    reference with exists false)."""
    chain: list[dict[str, Any]] = []
    seen = {_key(row.get("cluster"), row)}
    blocker, cluster = row.get("blockedBy"), row.get("cluster")
    while isinstance(blocker, dict) and len(chain) < MAX_HOPS:
        cluster = blocker.get("cluster") or cluster
        key = _key(cluster, blocker)
        if key in seen:
            break
        seen.add(key)
        if blocker.get("exists") is False:
            chain.append({**blocker, "cluster": cluster, "exists": False})
            break
        ref = {**blocker, "cluster": cluster}
        try:
            rel = await _relations(fleet, features, ref)
            found = rel.get("object") or await _row_by_list(fleet, ref)
        except ToolError as e:
            if e.code not in ("not_found", "forbidden"):
                raise
            chain.append({**ref, "visible": False})
            break
        chain.append(found)
        blocker = found.get("blockedBy")
    return chain


async def _history(fleet: Fleet, ref: str) -> Any:
    params = {p["name"] for p in fleet.parameters(HISTORY)}
    query = [("limit", str(TRANSITIONS))] if "limit" in params else []
    body = await fleet.aget(ref + "/history", query)
    items = body.get("items")
    if isinstance(items, list):
        body = {**body, "items": items[:TRANSITIONS]}
    return body


def _key(cluster: Any, ref: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(x) for x in (cluster, ref.get("namespace"), ref.get("kind"), ref.get("name")))


def describe(ref: dict[str, Any]) -> str:
    ns = ref.get("namespace")
    where = f"{ns}/{ref.get('name')}" if ns else str(ref.get("name"))
    return f"{ref.get('kind')} {where} on cluster {ref.get('cluster')}"


def _state(row: dict[str, Any]) -> str:
    if row.get("exists") is False:
        return "missing (referenced but not found)"
    if row.get("visible") is False:
        return "not visible to you"
    words = [str(row.get("status") or "unknown")]
    if row.get("suspended"):
        words.append("(suspended)")
    if row.get("failingSince"):
        words.append(f"since {row['failingSince']}")
    detail = ": ".join(str(row[k]) for k in ("reason", "message") if row.get(k))
    return " ".join(words) + (f" - {detail}" if detail else "")


def summary(row: dict[str, Any], chain: list[dict[str, Any]], hidden: int) -> str:
    """A paragraph: the object's state, then each blocker to the root cause."""
    text = f"{describe(row)} is {_state(row)}."
    if row.get("status") == "healthy" and not chain:
        text += " Nothing upstream blocks it."
    for i, b in enumerate(chain):
        lead = "It is blocked by" if i == 0 else "That is blocked by"
        text += f" {lead} {describe(b)}, which is {_state(b)}."
    if chain:
        text += f" Root cause: {describe(chain[-1])}."
    if hidden:
        text += f" {hidden} related object(s) you may not list are not shown."
    return text
