"""Facets beyond the count tables: rows per namespace, and per value of asked label keys.

`namespaces` comes from the per-namespace counts (common.index.nscounts) the writer keeps, over
the kinds the caller may list in each namespace and the filters: those the caller's count table
was summed from, or (a caller with cluster-wide kinds) every namespace's, read once per cluster
generation (one round trip for the clusters written since). What the tables cannot
count (a label selector, `labelKeys`, a name substring) is counted from the rows themselves:
each cluster's visible rows read as a list page reads them (common.index.read.reader's streams), the
selector tested on each, remembered per cluster generation, so an unchanged fleet costs one
`MGET` of generations and a write re-reads only its cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from common.index import nscounts, rows
from common.index.read import tally
from common.index.read.plan import AccessLike, Filters

if TYPE_CHECKING:
    from common.index.read.reader import Facets, Reader

LABEL_VALUES_TOP = 20
"""Values shown per asked label key (most rows first); the rest are counted in `labelsOmitted`."""
LABEL_KEYS_MAX = 10
"""Label keys one facets request may ask for (`labelKeys`)."""
MEMO_MAX = 65536  # remembered (cluster, access, filters) parts per process


@dataclass
class Part:
    """One cluster's share of a scanned facets answer."""

    total: int = 0
    kinds: dict[tuple[str, str], int] = field(default_factory=dict)
    """Rows by (kind, status code)."""
    namespaces: dict[str, int] = field(default_factory=dict)
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    scanned: int = 0


class Extras:
    """Per-process memos of namespace counts and scanned parts, by cluster generation."""

    def __init__(self, r: Any) -> None:
        self.r = r
        self._ns: dict[tuple[str, int, Filters], tuple[AccessLike, int, dict[str, int]]] = {}
        self._parts: dict[tuple[Any, ...], tuple[AccessLike, int, Part]] = {}
        self._raw: dict[str, tuple[int, dict[str, str]]] = {}
        """Every namespace's counts of a cluster (encoded), by generation: for wide callers."""
        self._lock = threading.Lock()
        self.reads = 0
        """Clusters whose rows or counts were read (not answered from memory): for tests."""

    # -- namespaces from the per-namespace counts --------------------------------------------

    def namespaces(
        self,
        access: Mapping[str, AccessLike],
        filters: Filters,
        clusters: Sequence[str],
        gens: Sequence[Any],
        tallies: tally.Tallies,
    ) -> dict[str, int]:
        """Visible rows per namespace ("" for cluster-scoped rows) under `filters` (no name,
        selector or flapping filter: those are counted from rows). A caller who sees only some
        namespaces is summed from the per-namespace counts its count table was read from (no
        read of its own); one with cluster-wide kinds from every namespace's counts, read once
        per cluster generation and shared by every such caller."""
        out: dict[str, int] = {}
        ns_key = tuple(sorted(set(filters.namespaces)))
        todo: list[tuple[str, int]] = []
        for c, g in zip(clusters, gens, strict=True):
            gen, a = int(g or 0), access[c]
            hit = self._ns.get((c, id(a), filters))
            if hit is not None and hit[0] is a and hit[1] == gen:
                _add_all(out, hit[2])
                continue
            entry = None if tally.view(a, ns_key).cluster_wide else tallies.entry(c, a, ns_key, gen)
            raw = self._raw.get(c)
            if entry is not None:
                values: Mapping[str, str] = entry.per_ns
            elif raw is not None and raw[0] == gen:
                values = raw[1]
            else:
                todo.append((c, gen))
                continue
            mine = _namespace_rows(a, filters, values)
            self._remember(self._ns, (c, id(a), filters), (a, gen, mine))
            _add_all(out, mine)
        if not todo:
            return out
        p = self.r.pipeline(transaction=False)
        spans = [nscounts.queue_read_all(p, c) for c, _g in todo]
        replies = p.execute()
        self.reads += len(todo)
        pos = 0
        for (c, gen), n in zip(todo, spans, strict=True):
            values = nscounts.collect_all(replies[pos : pos + n])
            pos += n
            self._remember(self._raw, c, (gen, values))
            mine = _namespace_rows(access[c], filters, values)
            self._remember(self._ns, (c, id(access[c]), filters), (access[c], gen, mine))
            _add_all(out, mine)
        return out

    # -- counted from rows ---------------------------------------------------------------------

    def scanned(
        self,
        reader: Reader,
        access: Mapping[str, AccessLike],
        filters: Filters,
        clusters: Sequence[str],
        gens: Sequence[Any],
        label_keys: tuple[str, ...],
        out: Facets,
    ) -> None:
        """Count every visible row passing `filters` into `out` (with `namespaces` and the
        values of `label_keys`), from the rows; clusters not written since are remembered."""
        parts: dict[str, Part] = {}
        todo = []
        for c, g in zip(clusters, gens, strict=True):
            hit = self._parts.get((c, id(access[c]), filters, label_keys))
            if hit is not None and hit[0] is access[c] and hit[1] == int(g or 0):
                parts[c] = hit[2]
            else:
                todo.append((c, int(g or 0)))
        streams = []
        for c, _g in todo:
            parts[c] = Part()
            s = reader.stream(c, access[c], filters)
            if s is not None:
                streams.append(s)
        self.reads += len(todo)
        while streams:
            left = []
            for s, chunk in zip(streams, reader.more(streams, filters, 1024), strict=True):
                _count(parts[s.cluster], chunk.members, label_keys)
                parts[s.cluster].scanned += chunk.scanned
                if not chunk.done:
                    left.append(s)
            streams = left
        for c, g in todo:  # gens were read before the scans: a later write moves them
            memo_key = (c, id(access[c]), filters, label_keys)
            self._remember(self._parts, memo_key, (access[c], g, parts[c]))
        read_now = {c for c, _g in todo}
        for c in clusters:
            _add_part(out, c, parts[c], label_keys)
            out.scanned += parts[c].scanned if c in read_now else 0

    def _remember(self, memo: dict[Any, Any], key: Any, value: Any) -> None:
        with self._lock:
            if len(memo) >= MEMO_MAX:
                memo.clear()
            memo[key] = value


def _namespace_rows(
    access: AccessLike, filters: Filters, values: Mapping[str, str]
) -> dict[str, int]:
    kinds = frozenset(filters.kinds)
    statuses = frozenset(filters.statuses)
    wanted = frozenset(filters.namespaces)
    out: dict[str, int] = {}
    for ns, value in values.items():
        if wanted and ns not in wanted:
            continue
        own = access.cluster_wide | access.namespaces.get(ns, frozenset())
        n = 0
        for (kind, code), count in nscounts.decode(value).items():
            if kind not in own or (kinds and kind not in kinds):
                continue
            status, susp = tally.code_status(code)
            if statuses and status not in statuses:
                continue
            if filters.suspended is None or susp is filters.suspended:
                n += count
        if n:
            out[ns] = n
    return out


def _count(part: Part, members: list[bytes], label_keys: tuple[str, ...]) -> None:
    for m in members:
        ns, kind, _name, code, _ = m.split(b"\x00", 4)
        key = (kind.decode(), code.decode())
        part.total += 1
        part.kinds[key] = part.kinds.get(key, 0) + 1
        space = ns.decode()
        part.namespaces[space] = part.namespaces.get(space, 0) + 1
        if label_keys:
            labels = rows.labels_of(m)
            for k in label_keys:
                v = labels.get(k)
                if v is not None:
                    values = part.labels.setdefault(k, {})
                    values[v] = values.get(v, 0) + 1


def _add_all(out: dict[str, int], more: Mapping[str, int]) -> None:
    for k, n in more.items():
        out[k] = out.get(k, 0) + n


def _add_part(out: Facets, cluster: str, part: Part, label_keys: tuple[str, ...]) -> None:
    for (kind, code), n in part.kinds.items():
        status, susp = tally.code_status(code)
        out.total += n
        out.clusters[cluster] = out.clusters.get(cluster, 0) + n
        out.kinds[kind] = out.kinds.get(kind, 0) + n
        out.statuses[status] = out.statuses.get(status, 0) + n
        flag = "true" if susp else "false"
        out.suspended[flag] = out.suspended.get(flag, 0) + n
    _add_all(out.namespaces, part.namespaces)
    for k in label_keys:
        _add_all(out.labels.setdefault(k, {}), part.labels.get(k, {}))


def top_values(
    values: Mapping[str, int], n: int = LABEL_VALUES_TOP
) -> tuple[dict[str, int], int, int]:
    """The `n` values with most rows (ties by value), and how many values and rows were left."""
    ranked = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    rest = ranked[n:]
    return dict(ranked[:n]), len(rest), sum(c for _v, c in rest)


def group_counts(
    reader: Reader,
    access: Mapping[str, AccessLike],
    filters: Filters,
    by: str,
    clusters: Sequence[str],
    rows_max: int,
) -> Facets:
    """Facets of groups (`by` object or namespace) under a label selector, from the matching
    rows (the group counts' compact arrays know no labels): as common.index.read.group_facets
    counts them. More than `rows_max` matching rows is an InvalidInput."""
    from common.errors import InvalidInput
    from common.index.read.reader import Facets

    sets: dict[str, dict[str, set[bytes]]] = {
        "clusters": {},
        "kinds": {},
        "statuses": {},
        "suspended": {},
    }
    every: set[bytes] = set()
    streams = [s for c in clusters if (s := reader.stream(c, access[c], filters)) is not None]
    seen = 0
    scanned = 0
    while streams:
        left = []
        for s, chunk in zip(streams, reader.more(streams, filters, 1024), strict=True):
            scanned += chunk.scanned
            seen += len(chunk.members)
            for m in chunk.members:
                ident = rows.identity_bytes(m)
                ns, kind, _ = ident.split(b"\x00", 2)
                key = ident if by == "object" else ns + b"\x00"
                status, susp = tally.code_status(m[len(ident) : len(ident) + 1].decode())
                every.add(key)
                for field_name, value in (
                    ("clusters", s.cluster),
                    ("kinds", kind.decode()),
                    ("statuses", status),
                    ("suspended", "true" if susp else "false"),
                ):
                    sets[field_name].setdefault(value, set()).add(key)
            if not chunk.done:
                left.append(s)
        streams = left
        if seen > rows_max:
            raise InvalidInput(
                "labelSelector",
                f"matches more than {rows_max} objects: too many to count groups of; "
                "narrow the selector or add filters",
            )
    out = Facets(total=len(every), scanned=scanned)
    out.clusters = {k: len(v) for k, v in sets["clusters"].items()}
    out.kinds = {k: len(v) for k, v in sets["kinds"].items()}
    out.statuses = {k: len(v) for k, v in sets["statuses"].items()}
    out.suspended = {k: len(v) for k, v in sets["suspended"].items()}
    return out
