"""A cluster's dependency graph as stored: rows' `edges` (upstream) and the `dependents` hash
(downstream), and the `blockedBy` of every row, kept true by the one writer.

A node is failing when its row is `unhealthy` or does not exist (a dangling reference), or, for an
external node (a Service backend), when the edge says it is missing. A row's `blockedBy` is the
nearest failing node upstream: breadth-first over its edges, any depth, each node once (cycles
are data), in spec order within a level; never the row itself.

The full sync computes every `blockedBy` from its snapshot (`with_blockers`) and rebuilds
`dependents` from it (`dependents`). A batch of watch events changes a few rows: `settle` finds
the nodes whose failing state or edges changed, walks `dependents` down from them to every row
whose `blockedBy` may change, reads what those rows' chains need (one pipelined round trip per
level, after the writer's WATCH), and adds the rows whose `blockedBy` changed to the delta. A
batch that changes no failing state and no edge costs no extra read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.index import edges as codec
from common.index import keys, rows
from common.index.buckets import Bucketed
from common.redis_client import text

Lookup = Callable[[str], str | None]
"""identity -> stored member, None when no such row."""


def failing(member: str | None) -> bool:
    return member is None or rows.status_of(member) == "unhealthy"


def upstream(identity: str, member: str) -> list[codec.Edge]:
    """The edges of a row (its identity gives the namespace they are relative to)."""
    return codec.decode(rows.split_identity(identity)[0], rows.edges_of(member))


def target(edge: codec.Edge) -> str:
    return rows.sort_key(edge.namespace, edge.kind, edge.name)


def row_targets(identity: str, member: str | None) -> set[str]:
    """The identities of the rows a row's edges name (external nodes are not rows)."""
    if member is None:
        return set()
    return {target(e) for e in upstream(identity, member) if not e.external}


def blocker(identity: str, lookup: Lookup) -> str:
    """The `blockedBy` field of a row: the nearest failing node upstream, "" for none."""
    seen = {identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for node in frontier:
            member = lookup(node)
            if member is None:
                continue
            for e in upstream(node, member):
                if e.external:
                    if e.missing:
                        return codec.encode_blocker(e.kind, e.namespace, e.name, False)
                    continue
                t = target(e)
                if t in seen:
                    continue
                seen.add(t)
                found = lookup(t)
                if found is None or rows.status_of(found) == "unhealthy":
                    return codec.encode_blocker(e.kind, e.namespace, e.name, found is not None)
                nxt.append(t)
        frontier = nxt
    return ""


class Snapshot:
    """A whole cluster's rows, parsed once: every row's `blockedBy` and the `dependents` hash.
    Only rows downstream of a failing node are walked (a reverse walk from the failing nodes
    finds them), a small share of a fleet's rows."""

    def __init__(self, members: Iterable[str]) -> None:
        self.by_identity: dict[str, str] = {}
        parsed = []
        sep, unhealthy = rows.SEP, rows.STATUS_CODES
        failing_codes = {unhealthy["unhealthy"], unhealthy["unhealthy"].upper()}
        failing_rows = set()
        self._stored: dict[str, tuple[str, str, str]] = {}  # identity -> (ns, kind, name)
        us, code = codec.US, codec.kind_code
        whole = len(rows.FIELDS) - 1  # separators in a member with every field
        after_edges = len(rows.FIELDS) - rows.FIELDS.index("edges")  # fields from edges on
        by_identity, stored, edges_at = self.by_identity, self._stored, rows.edges_of
        for m in members:
            ns, kind, name, status, _ = m.split(sep, 4)
            identity = f"{ns}{sep}{kind}{sep}{name}{sep}"
            by_identity[identity] = m
            stored[identity] = (ns, kind, name)
            if status in failing_codes:
                failing_rows.add(identity)
            edges = m.rsplit(sep, after_edges)[1] if m.count(sep) == whole else edges_at(m)
            if edges:
                parsed.append((identity, ns, edges))
        self.sources: dict[str, set[str]] = {}
        self._fields: dict[str, tuple[str, str]] = {}  # target -> (namespace, stored field)
        bad: set[str] = set()  # rows with a failing node one edge up
        sources, fields = self.sources, self._fields
        for identity, namespace, field in parsed:
            for kind, ns, name, missing in codec.targets(namespace, field):
                if kind in codec.EXTERNAL_KINDS:
                    if missing:
                        bad.add(identity)
                    continue
                t = f"{ns}{sep}{kind}{sep}{name}{sep}"
                if t in sources:
                    sources[t].add(identity)
                else:
                    sources[t] = {identity}
                    fields[t] = (ns, f"{ns}{us}{code(kind)}{us}{name}")
                if t in failing_rows or t not in by_identity:
                    bad.add(identity)
        self.affected = set(bad)  # rows with a failing node somewhere upstream
        frontier = bad
        while frontier:
            nxt = set()
            for node in frontier:
                nxt |= self.sources.get(node, set())
            frontier = nxt - self.affected
            self.affected |= frontier

    def members(self) -> set[str]:
        """Every member with its `blockedBy` computed."""
        lookup = self.by_identity.get
        out = set()
        affected, sep = self.affected, rows.SEP
        whole = len(rows.FIELDS) - 1
        for identity, member in self.by_identity.items():
            blocked = blocker(identity, lookup) if identity in affected else ""
            # blockedBy is the third field from the end of a whole member (no full split)
            now = member.rsplit(sep, 3)[1] if member.count(sep) == whole else None
            if (now if now is not None else rows.blocked_of(member)) != blocked:
                member = rows.with_blocked(member, blocked)
            out.add(member)
        return out

    def dependents(self) -> dict[str, str]:
        """The whole `dependents` hash (fields and values as stored, as `field` and `join`
        write them)."""
        out = {}
        stored, same, rs, us = self._stored, codec.SAME_NAMESPACE, codec.RS, codec.US
        code = codec.kind_code
        for t, sources in self.sources.items():
            target_ns, target_field = self._fields[t]
            entries = []
            for source in sources:
                ns, kind, name = stored[source]
                ns = same if ns == target_ns and ns else ns
                entries.append(f"{ns}{us}{code(kind)}{us}{name}")
            entries.sort()
            out[target_field] = rs.join(entries)
        return out


def with_blockers(members: Iterable[str]) -> set[str]:
    """A whole cluster's members with every `blockedBy` computed from them."""
    return Snapshot(members).members()


def dependents(members: Iterable[str]) -> dict[str, str]:
    """The whole `dependents` hash of a snapshot (fields and values as stored)."""
    return Snapshot(members).dependents()


# `dependents` is stored compactly (it holds about one entry per row): a field is a target as
# `<namespace> US <kind> US <name>`, a value its dependents as RS-joined `<namespace> US <kind> US
# <name>`, the namespace `=` when it is the target's and kinds as common.index.edges stores them.


DEPENDENTS = Bucketed(keys.dependents, keys.DEPENDENTS_BUCKETS, keys.dependents_overflow)
"""The `dependents` hash, spread over small hashes (common.index.buckets)."""


def field(identity: str) -> str:
    """The `dependents` field of a node (its identity, compacted)."""
    ns, kind, name = rows.split_identity(identity)
    return codec.US.join((ns, codec.kind_code(kind), name))


def unfield(stored: str | bytes) -> str:
    ns, kind, name = text(stored).split(codec.US)
    return rows.sort_key(ns, codec.kind_of(kind), name)


def join(target_identity: str, sources: Iterable[str]) -> str:
    """A `dependents` value: the sources of one target."""
    target_ns = rows.split_identity(target_identity)[0]
    out = []
    for source in sources:
        ns, kind, name = rows.split_identity(source)
        ns = codec.SAME_NAMESPACE if ns == target_ns and ns else ns
        out.append(codec.US.join((ns, codec.kind_code(kind), name)))
    return codec.RS.join(sorted(out))


def split(target_identity: str, value: str | bytes | None) -> set[str]:
    """The identities of the rows whose edges name a target, from its `dependents` value."""
    value = text(value) if value is not None else ""
    if not value:
        return set()
    target_ns = rows.split_identity(target_identity)[0]
    out = set()
    for entry in value.split(codec.RS):
        ns, kind, name = entry.split(codec.US)
        ns = target_ns if ns == codec.SAME_NAMESPACE else ns
        out.add(rows.sort_key(ns, codec.kind_of(kind), name))
    return out


def diff(stored: Mapping[str, str], wanted: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(fields to set, fields to delete) to turn `stored` into `wanted`."""
    changed = {k: v for k, v in wanted.items() if stored.get(k) != v}
    return changed, [k for k in stored if k not in wanted]


@dataclass
class Settled:
    """A delta with `blockedBy` filled in, and the `dependents` fields it changes."""

    removed: list[str]
    added: list[str]
    dependents_set: dict[str, str]
    dependents_gone: list[str]
    reads: int = 0
    """Extra read round trips made (count guards in the tests)."""


class _Reader:
    """Stored members and `dependents` values, read in batches after the writer's WATCH and
    cached; `members` starts with the batch's own new state (None for deleted rows)."""

    def __init__(self, r: Any, cluster: str, members: dict[str, str | None]) -> None:
        self.r, self.cluster = r, cluster
        self.members = members
        self.sources: dict[str, set[str]] = {}
        self.reads = 0

    def fetch(self, members: Iterable[str] = (), sources: Iterable[str] = ()) -> None:
        want_m = [i for i in dict.fromkeys(members) if i not in self.members]
        want_s = [i for i in dict.fromkeys(sources) if i not in self.sources]
        if not want_m and not want_s:
            return
        pipe = self.r.pipeline(transaction=False)
        for identity in want_m:
            prefix = identity.encode()
            pipe.zrangebylex(keys.rows(self.cluster), b"[" + prefix, b"[" + prefix + b"\xff")
        groups = DEPENDENTS.queue_hmget(pipe, self.cluster, (field(i) for i in want_s))
        replies = pipe.execute()
        self.reads += 1
        for identity, found in zip(want_m, replies, strict=False):
            self.members[identity] = text(found[0]) if found else None
        if want_s:
            values = DEPENDENTS.collect(groups, replies[len(want_m) :])
            for identity in want_s:
                self.sources[identity] = split(identity, values.get(field(identity)))

    def lookup(self, identity: str) -> str | None:
        return self.members.get(identity)


def settle(r: Any, cluster: str, removed: Collection[str], added: Collection[str]) -> Settled:
    """Fill in `blockedBy` for a batch's delta (rows `removed` and `added`, the added ones with no
    `blockedBy` yet), add the stored rows whose `blockedBy` it changes, and say how `dependents`
    changes. Reads (after the caller's WATCH) only when a failing state or an edge changed."""
    old = {rows.identity(m): m for m in removed}
    new: dict[str, str | None] = {rows.identity(m): m for m in added}
    for identity in old.keys() - new.keys():
        new[identity] = None  # deleted
    dirty = set()
    for identity, member in new.items():
        before = old.get(identity)
        if (
            before is None
            or member is None
            or failing(before) != failing(member)
            or rows.edges_of(before) != rows.edges_of(member)
        ):
            dirty.add(identity)
    if not dirty:  # only statuses among the non-failing changed: each row keeps its blockedBy
        kept = [rows.with_blocked(m, rows.blocked_of(old[rows.identity(m)])) for m in added]
        return Settled(list(removed), kept, {}, [])

    gone_pairs = {(t, i) for i, m in old.items() for t in row_targets(i, m)}
    new_pairs = {(t, i) for i, m in new.items() for t in row_targets(i, m)}
    touched = {t for t, _ in gone_pairs ^ new_pairs}
    reader = _Reader(r, cluster, dict(new))
    reader.fetch(sources=touched | dirty)
    before_sources = {t: set(reader.sources[t]) for t in touched}
    for t, i in gone_pairs - new_pairs:
        reader.sources[t].discard(i)
    for t, i in new_pairs - gone_pairs:
        reader.sources[t].add(i)

    # Every row downstream of a dirty node (and the dirty rows themselves) may change.
    affected = set(dirty)
    frontier = set(dirty)
    while frontier:
        reader.fetch(sources=frontier)
        nxt = set().union(*(reader.sources[n] for n in frontier)) - affected
        affected |= nxt
        frontier = nxt
    # Read what their chains need, level by level.
    frontier = affected
    seen: set[str] = set()
    while frontier:
        reader.fetch(members=frontier)
        seen |= frontier
        frontier = set().union(*(row_targets(n, reader.lookup(n)) for n in frontier)) - seen
    out_removed, out_added = list(removed), []
    for identity, member in new.items():
        if member is None:
            continue
        if identity in affected:
            out_added.append(rows.with_blocked(member, blocker(identity, reader.lookup)))
        else:
            out_added.append(rows.with_blocked(member, rows.blocked_of(old[identity])))
    for identity in affected - new.keys():
        stored = reader.lookup(identity)
        if stored is None:
            continue  # a missing node: no row to mark
        blocked = blocker(identity, reader.lookup)
        if blocked != rows.blocked_of(stored):
            out_removed.append(stored)
            out_added.append(rows.with_blocked(stored, blocked))
    moved = [t for t in touched if reader.sources[t] != before_sources[t]]
    deps_set = {field(t): join(t, reader.sources[t]) for t in moved if reader.sources[t]}
    gone = [field(t) for t in moved if not reader.sources[t]]
    return Settled(out_removed, out_added, deps_set, gone, reader.reads)
