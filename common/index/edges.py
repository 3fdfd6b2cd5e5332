"""The stored form of a row's edges (what it depends on) and of its root cause (`blockedBy`).

Both are fields of the row's member (common.index.rows), so a row and its edges are written,
read and replaced together and can never disagree.

`edges`: the object's references (common.kinds.relations.Ref), in spec order, joined by RS
(`\\x1e`); each is `<relation code><kind> US <namespace> US <name> [US <sectionName> [US <exists>]]`
(US = `\\x1f`), where the kind is `~` + its code when built in (common.index.codes), the
namespace is `=` when it is the object's own (the commonest case: it saves the namespace's bytes
on most edges) and `exists` is `0` for an external node (a Service backend: not a row) known
to be missing. Whether a row target exists is read from the rows.

`blockedBy`: `<kind> US <namespace> US <name> US <exists: 1|0>` of the nearest failing node
upstream (common.index.graph), empty when there is none.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TypedDict

from common.index import codes
from common.kinds.relations import RELATIONS, Ref

RS, US = "\x1e", "\x1f"
SAME_NAMESPACE = "="  # never a namespace name (DNS labels), so it cannot be confused
EXTERNAL_KINDS = frozenset({"Service"})
"""Kinds a ref can name that are not rows: their existence is stored in the edge when known."""
RELATION_CODES = dict(zip(RELATIONS, "sdcipmgrPCbt", strict=True))
"""Stored one-character codes of the relations (common.kinds.relations.RELATIONS)."""
RELATION_OF = {v: k for k, v in RELATION_CODES.items()}
KIND_MARK = "~"
"""Before the code of a built-in kind (common.index.codes), as edges and `dependents` store it."""


def kind_code(kind: str) -> str:
    """A kind as stored: `~` + its code when built in, else its key."""
    return codes.marked(kind, KIND_MARK)


_STORED_KINDS = {k: kind_code(k) for k in codes.KIND_CODES}
"""`kind_code` of the built-in kinds (any other kind is stored as its key)."""


def kind_of(stored: str) -> str:
    return codes.unmarked(stored, KIND_MARK)


@dataclass(frozen=True)
class Edge:
    """One stored outgoing edge, its namespace resolved."""

    relation: str
    kind: str
    namespace: str
    name: str
    section: str = ""
    missing: bool = False
    """True only for an external node known not to exist (rows: look the row up)."""

    @property
    def external(self) -> bool:
        return self.kind in EXTERNAL_KINDS


class Blocker(TypedDict):
    """A row's `blockedBy` as the API returns it (the row's cluster is the node's)."""

    cluster: str
    namespace: str
    kind: str
    name: str
    exists: bool


def encode(
    namespace: str, refs: Iterable[Ref], services: Collection[tuple[str, str]] | None = None
) -> str:
    """The `edges` field of an object in `namespace`. `services`: the cluster's Services as
    (namespace, name), when known: a backend naming none of them is stored as missing."""
    out = []
    for ref in refs:
        relation, kind, ref_ns, name, section = ref
        if not (name.isprintable() and ref_ns.isprintable() and section.isprintable()):
            continue  # control characters would break the format (no valid name has any)
        ns = SAME_NAMESPACE if ref_ns == namespace and namespace else ref_ns
        entry = f"{RELATION_CODES[relation]}{_STORED_KINDS.get(kind, kind)}{US}{ns}{US}{name}"
        missing = kind in EXTERNAL_KINDS and services is not None and (ref_ns, name) not in services
        if missing:
            entry += f"{US}{section}{US}0"
        elif section:
            entry += f"{US}{section}"
        out.append(entry)
    return RS.join(out)


def decode(namespace: str, field: str) -> list[Edge]:
    """The edges of an `edges` field written for an object in `namespace`."""
    if not field:
        return []
    out = []
    for entry in field.split(RS):
        head, ns, name, *rest = entry.split(US)
        section = rest[0] if rest else ""
        missing = len(rest) > 1 and rest[1] == "0"
        ns = namespace if ns == SAME_NAMESPACE else ns
        out.append(Edge(RELATION_OF[head[0]], kind_of(head[1:]), ns, name, section, missing))
    return out


def targets(namespace: str, field: str) -> list[tuple[str, str, str, bool]]:
    """(kind, namespace, name, missing) of each edge: `decode` without the objects, for whole
    snapshots."""
    out = []
    for entry in field.split(RS):
        head, ns, name, *rest = entry.split(US)
        kind = codes.KIND_OF[head[2]] if head[1] == KIND_MARK else head[1:]
        out.append(
            (
                kind,
                namespace if ns == SAME_NAMESPACE else ns,
                name,
                len(rest) > 1 and rest[1] == "0",
            )
        )
    return out


def encode_blocker(kind: str, namespace: str, name: str, exists: bool) -> str:
    return US.join((kind, namespace, name, "1" if exists else "0"))


def decode_blocker(cluster: str, field: str) -> Blocker | None:
    if not field:
        return None
    kind, namespace, name, exists = field.split(US)
    return Blocker(cluster=cluster, namespace=namespace, kind=kind, name=name, exists=exists == "1")
