"""The compact encoding of one subject's compiled grants, as stored in a cluster's `rbac` hash.

A value is two JSON lines: what the subject may `list`, then why (for `GET /api/v1/access`):

    {"s":[["HelmRelease","Kustomization"]],"c":-1,"n":[[0,["team-a","team-b"]]]}
    {"s":[[...]],"b":[["RoleBinding","view","ClusterRole","view"]],"r":[["team-a",0,0]]}

`s` lists kind sets once; `c` is the set listable in all namespaces (-1: none); `n` groups
namespaces by set, so a subject bound in 10,000 namespaces to one role stores one set and the
names; `b` lists bindings without their namespace, so one binding name repeated across
namespaces is stored once. Readers that resolve access parse only the first line. The field `#hash` holds the
content hash of the whole hash (not a subject: subjects start with `u:` or `g:`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping

HASH_FIELD = "#hash"
ALL_NAMESPACES = "*"

BUILTIN = "built-in"
BindingRef = tuple[str, str, str, str]  # (binding kind, binding name, role kind, role name)
Reason = tuple[str, frozenset[str], BindingRef]  # (namespace or "*", kinds, binding)


def describe(namespace: str, ref: BindingRef) -> str:
    """`RoleBinding team-a/view -> ClusterRole view`, for explaining a grant."""
    kind, name, role_kind, role_name = ref
    if kind == "RoleBinding":
        return f"RoleBinding {namespace}/{name} -> {role_kind} {role_name}"
    if kind == BUILTIN:
        return f"built-in: group {name} may do everything"
    return f"{kind} {name} -> {role_kind} {role_name}"


# One encoder, built once: json.dumps with options builds a new one per call (a third of the
# compile time of a 2,000-namespace cluster).
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode


class _SetTable:
    """Assigns ids to kind sets in order of first use (deterministic for sorted input)."""

    def __init__(self) -> None:
        self.ids: dict[frozenset[str], int] = {}

    def id(self, kinds: frozenset[str]) -> int:
        if kinds not in self.ids:
            self.ids[kinds] = len(self.ids)
        return self.ids[kinds]

    def dump(self) -> list[list[str]]:
        return [sorted(s) for s in self.ids]


def beyond_cluster_wide(
    cluster_wide: frozenset[str], namespaces: Mapping[str, frozenset[str]]
) -> Iterator[tuple[str, frozenset[str]]]:
    """(namespace, kinds) in namespace order, less the kinds granted cluster-wide; namespaces left
    with none are skipped. The difference is computed once per distinct (shared) kind set."""
    reduced: dict[int, frozenset[str]] = {}
    for ns in sorted(namespaces):
        kinds = namespaces[ns]
        extra = reduced.get(id(kinds))
        if extra is None:
            extra = reduced[id(kinds)] = kinds - cluster_wide
        if extra:
            yield ns, extra


def encode_subject(
    cluster_wide: frozenset[str],
    namespaces: Mapping[str, frozenset[str]],
    reasons: Iterable[Reason],
) -> str:
    """One `rbac` hash value. `namespaces` may overlap `cluster_wide`; the overlap is dropped."""
    sets = _SetTable()
    grouped: dict[int, list[str]] = {}
    for ns, extra in beyond_cluster_wide(cluster_wide, namespaces):
        grouped.setdefault(sets.id(extra), []).append(ns)
    cw = sets.id(cluster_wide) if cluster_wide else -1
    grants = {"s": sets.dump(), "c": cw, "n": [[sid, nss] for sid, nss in grouped.items()]}
    why_sets, bindings = _SetTable(), dict[BindingRef, int]()
    rows = []
    for ns, kinds, binding in sorted(reasons, key=lambda r: (r[0], r[2])):
        bid = bindings.setdefault(binding, len(bindings))
        rows.append([ns, why_sets.id(kinds), bid])
    why = {"s": why_sets.dump(), "b": list(bindings), "r": rows}
    return _dumps(grants) + "\n" + _dumps(why)


def decode_grants(
    value: str, known: frozenset[str] | None = None
) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """(cluster-wide kinds, kinds per namespace) from a value; kinds outside `known` dropped.
    A value that does not parse grants nothing (fail closed)."""
    try:
        doc = json.loads(value.partition("\n")[0])
        sets = [frozenset(s) for s in doc["s"]]
        if known is not None:
            sets = [s & known for s in sets]
        cluster_wide = sets[doc["c"]] if doc["c"] >= 0 else frozenset()
        namespaces: dict[str, frozenset[str]] = {}
        for sid, nss in doc["n"]:
            kinds = sets[sid]
            if kinds:
                namespaces.update(dict.fromkeys(nss, kinds))
        return cluster_wide, namespaces
    except (ValueError, KeyError, IndexError, TypeError):
        return frozenset(), {}


def decode_reasons(value: str) -> list[tuple[str, frozenset[str], str]]:
    """The why-line of a value: (namespace or "*", kinds, binding description) triples."""
    try:
        doc = json.loads(value.partition("\n")[2])
        sets = [frozenset(s) for s in doc["s"]]
        refs = [(str(k), str(n), str(rk), str(rn)) for k, n, rk, rn in doc["b"]]
        return [(str(ns), sets[sid], describe(str(ns), refs[bid])) for ns, sid, bid in doc["r"]]
    except (ValueError, KeyError, IndexError, TypeError):
        return []
