"""The read side of relations: what one row depends on (upstream, its edges' targets) and what
depends on it (downstream, from the `dependents` hash), level by level up to a depth.

Pure reading, no RBAC of its own: the caller passes `visible(namespace, kind)`. A related row it
rejects is never named, only counted once in `hidden`, and not followed further; so is a missing
row (a dangling reference) it rejects, so that `hidden` never tells which refs resolve. External
nodes (Service backends: not rows) are named, as their referrer's spec names them, and never
followed; nor are missing rows. Each direction visits a node once (the object included): cycles
are data. Cost: one pipelined round trip for the object, then one per level for both directions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common import redis_client
from common.index import graph, keys, rows
from common.index.edges import Edge
from common.redis_client import text

Visible = Callable[[str, str], bool]
"""(namespace, kind key) -> whether the caller may list such rows."""


@dataclass(frozen=True)
class Related:
    """One edge of the answer: the node it reaches, how, and at which level."""

    relation: str
    namespace: str
    kind: str
    name: str
    section: str
    exists: bool
    status: str | None
    depth: int


@dataclass
class Relations:
    member: str
    """The object's stored member."""
    upstream: list[Related] = field(default_factory=list)
    downstream: list[Related] = field(default_factory=list)
    hidden: int = 0
    round_trips: int = 0
    version: keys.GrantsVersion | None = None
    """The grants version read with the object when `read` was asked to confirm it."""


@dataclass
class _Level:
    """What one level asks of Redis: members of rows, `dependents` of the downstream ones."""

    members: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


@dataclass
class _Found:
    """What one level read: members (None: no such row) and `dependents` values."""

    members: dict[str, str | None]
    sources: dict[str, set[str]]


def read(
    r: Any,
    cluster: str,
    identity: str,
    depth: int,
    visible: Visible,
    expect: keys.GrantsVersion | None = None,
) -> Relations | None:
    """The relations of the row `identity` (rows.sort_key) up to `depth` levels each way;
    None when there is no such row. With `expect` (the version of the grants `visible` came
    from, not yet confirmed), the grants version (`fs:version`) is read in the first round trip
    and returned in `version`; when it is not `expect`, nothing more is read: the caller must
    ask again under current grants (as a list page does)."""
    batch = _Batch()
    _queue_member(batch, cluster, identity)
    node = graph.field(identity)
    groups = graph.DEPENDENTS.queue_hmget(batch, cluster, [node])
    if expect is not None:
        batch.append(("GET", keys.VERSION))
    found, *replies = redis_client.pipelined(r, batch)
    version = keys.GrantsVersion(replies.pop()) if expect is not None else None
    if not found or not rows.is_member(found[0]):
        return None
    out = Relations(text(found[0]), round_trips=1, version=version)
    if version != expect:
        return out  # read under grants that are no longer current: the caller asks again
    sources = graph.DEPENDENTS.collect(groups, replies).get(node)
    walk = _Walk(identity, out.member, graph.split(identity, sources), visible)
    for level in range(1, depth + 1):
        ask = walk.plan()
        if ask.members:
            found = _fetch(r, cluster, ask, with_sources=level < depth)
            out.round_trips += 1
        else:
            found = _Found({}, {})
        walk.settle(level, found, out)
        if not walk.up_frontier and not walk.down_frontier:
            break
    out.hidden = len(walk.hidden)
    return out


class _Walk:
    """Breadth-first state of both directions (visited sets are per direction: a node in a
    dependsOn cycle is both upstream and downstream of the object)."""

    def __init__(self, identity: str, member: str, sources: set[str], visible: Visible) -> None:
        self.visible = visible
        self.hidden: set[str] = set()
        self.up_seen, self.down_seen = {identity}, {identity}
        self.up_frontier = [(identity, member)]
        self.down_frontier = [(identity, sources)]
        self.up_pending: list[tuple[str, list[Edge]]] = []  # (target, edges to it)
        self.down_pending: list[tuple[str, str]] = []  # (source, the node it names)

    def plan(self) -> _Level:
        """The nodes first reached at the next level, sorted into named, hidden and to read."""
        self.up_pending, self.down_pending = [], []
        ask = _Level()
        for node, member in self.up_frontier:
            by_target: dict[str, list[Edge]] = {}
            for e in graph.upstream(node, member):
                t = graph.target(e)
                if t in self.up_seen and t not in by_target:
                    continue  # reached before, or by an earlier node of this level
                self.up_seen.add(t)
                by_target.setdefault(t, []).append(e)
            for t, edges in by_target.items():
                if edges[0].external:
                    self.up_pending.append((t, edges))
                elif self.visible(edges[0].namespace, edges[0].kind):
                    self.up_pending.append((t, edges))
                    ask.members.append(t)
                else:
                    self.hidden.add(t)
        for node, sources in self.down_frontier:
            for s in sorted(sources - self.down_seen):
                self.down_seen.add(s)
                ns, kind, _ = rows.split_identity(s)
                if self.visible(ns, kind):
                    self.down_pending.append((s, node))
                    ask.members.append(s)
                    ask.sources.append(s)
                else:
                    self.hidden.add(s)
        ask.members = list(dict.fromkeys(ask.members))
        return ask

    def settle(self, level: int, found: _Found, out: Relations) -> None:
        """Record the level's edges from what was read, and set the next frontiers."""
        self.up_frontier, self.down_frontier = [], []
        for t, edges in self.up_pending:
            if edges[0].external:  # not a row: its edge says whether it exists
                out.upstream.extend(_related(e, not e.missing, None, level) for e in edges)
                continue
            member = found.members.get(t)
            status = rows.status_of(member) if member is not None else None
            out.upstream.extend(_related(e, member is not None, status, level) for e in edges)
            if member is not None:
                self.up_frontier.append((t, member))
        for s, node in self.down_pending:
            member = found.members.get(s)
            if member is None:
                continue  # deleted since `dependents` was read: nothing depends on it now
            ns, kind, name = rows.split_identity(s)
            status = rows.status_of(member)
            ways = {
                (e.relation, e.section): None
                for e in graph.upstream(s, member)
                if not e.external and graph.target(e) == node
            }
            for relation, section in ways:
                out.downstream.append(
                    Related(relation, ns, kind, name, section, True, status, level)
                )
            if ways:  # else `dependents` was ahead of the row: it no longer names the node
                self.down_frontier.append((s, found.sources.get(s, set())))


class _Batch(list[tuple[Any, ...]]):
    """Commands for one `pipelined` round trip, queued as on a pipeline (raw replies: bytes)."""

    def hmget(self, key: str, fields: list[str]) -> None:
        self.append(("HMGET", key, *fields))


def _queue_member(batch: _Batch, cluster: str, identity: str) -> None:
    prefix = identity.encode()
    batch.append(
        ("ZRANGEBYLEX", keys.rows(cluster), b"[" + prefix, b"[" + prefix + b"\xff", "LIMIT", 0, 1)
    )


def _fetch(r: Any, cluster: str, ask: _Level, with_sources: bool) -> _Found:
    """One round trip: the members of `ask.members`, and (when a next level will need them)
    the `dependents` of `ask.sources`."""
    wanted = ask.members
    sources = ask.sources if with_sources else []
    batch = _Batch()
    for identity in wanted:
        _queue_member(batch, cluster, identity)
    groups = graph.DEPENDENTS.queue_hmget(batch, cluster, (graph.field(s) for s in sources))
    replies = redis_client.pipelined(r, batch)
    members: dict[str, str | None] = {}
    for identity, got in zip(wanted, replies, strict=False):
        members[identity] = text(got[0]) if got and rows.is_member(got[0]) else None
    found = _Found(members, {})
    if sources:
        values = graph.DEPENDENTS.collect(groups, replies[len(wanted) :])
        found.sources = {s: graph.split(s, values.get(graph.field(s))) for s in sources}
    return found


def _related(e: Edge, exists: bool, status: str | None, level: int) -> Related:
    return Related(e.relation, e.namespace, e.kind, e.name, e.section, exists, status, level)
