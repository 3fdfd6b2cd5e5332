"""Scan plans: which lex ranges of a cluster's row zset a caller's page or count must visit.

A plan is the ordered list of identity ranges (namespace prefixes, or the whole key space split
around namespaces with extra grants), each with the kinds allowed in it. It is built from the
caller's access on one cluster and the filters, so rows the caller cannot list are never read
when they can be skipped by range (namespace grants), and filtered server-side otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.index.rows import kind_prefix, namespace_prefix
from common.labels import EVERYTHING, Selector

TOP = b"\xff"  # sorts after every byte a member can hold right after a NUL-terminated prefix


class AccessLike(Protocol):
    """What the reader needs of `common.rbac.grants.Access` (one cluster, one caller)."""

    @property
    def cluster_wide(self) -> frozenset[str]: ...

    @property
    def namespaces(self) -> Mapping[str, frozenset[str]]: ...


@dataclass(frozen=True, eq=False)
class Filters:
    """List/facet filters; empty tuples mean "any". Values are already validated.

    Compared and hashed by a tuple of the fields made once (`_key`): every memo of the read
    side is keyed by the filters with one entry per cluster, so a page under writes looks them
    up hundreds of times, and the generated `__eq__` and `__hash__` built tuples of the fields
    (and the selector's) on each call: a tenth of a group page's CPU after a transition."""

    clusters: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    name: str = ""
    suspended: bool | None = None
    """Only suspended rows (True), only rows not suspended (False), or either (None)."""
    flapping: int = 0
    """Only rows with at least this many transitions in the last 24 hours (0: any)."""
    drift: bool = False
    """Object groups only: only groups whose clusters run two or more revisions
    (common.index.revisions); rows ignore it."""
    labels: Selector = EVERYTHING
    """Only rows whose labels match this selector (`labelSelector`; empty: any)."""
    _key: tuple[Any, ...] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = (
            self.clusters,
            self.namespaces,
            self.kinds,
            self.statuses,
            self.name,
            self.suspended,
            self.flapping,
            self.drift,
            self.labels,
        )
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Filters:
            return NotImplemented
        return self._hash == other._hash and self._key == other._key

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True)
class Range:
    """Identities `lo <= id < hi` (hi None = no upper bound); `kinds` None = any kind."""

    lo: bytes
    hi: bytes | None
    kinds: frozenset[str] | None

    def clip(self, start: bytes) -> Range | None:
        """This range from `start` on, or None when it ends before `start`."""
        if self.hi is not None and self.hi <= start:
            return None
        return self if start <= self.lo else Range(start, self.hi, self.kinds)


ns_prefix = namespace_prefix


def same_access(a: AccessLike | None, b: AccessLike) -> bool:
    """Whether what was counted with access `a` holds for access `b`: the same object, or an
    equal one (a caller's access in a cluster is parsed again, equal, when another subject's
    grants there changed). What a new memo entry may take over from another caller's."""
    return a is b or (a is not None and a == b)


def after(identity: bytes) -> bytes:
    """The first position strictly after every member with this identity."""
    return identity + TOP


def plan(access: AccessLike, filters: Filters, all_kinds: Iterable[str]) -> list[Range]:
    """Ordered, disjoint ranges covering exactly the rows the caller may see under `filters`."""
    universe = frozenset(all_kinds)
    wanted = frozenset(filters.kinds) if filters.kinds else universe
    cw = access.cluster_wide & wanted
    ns_filter = sorted(set(filters.namespaces), key=str.encode) if filters.namespaces else None

    def kinds_at(ns: str) -> frozenset[str]:
        return (cw | access.namespaces.get(ns, frozenset())) & wanted

    def simplify(kinds: frozenset[str]) -> frozenset[str] | None:
        return None if kinds >= universe else kinds

    if ns_filter is not None:
        return _per_namespace(((ns, kinds_at(ns)) for ns in ns_filter), simplify)
    if not cw:
        names = sorted(access.namespaces, key=str.encode)
        return _per_namespace(((ns, kinds_at(ns)) for ns in names), simplify)
    # Cluster-wide kinds: the whole key space, split around namespaces that add more kinds.
    out: list[Range] = []
    start = b""
    for ns in sorted(access.namespaces, key=str.encode):
        extra = kinds_at(ns)
        if extra <= cw:
            continue
        prefix = ns_prefix(ns)
        out.append(Range(start, prefix, simplify(cw)))
        out.append(Range(prefix, prefix + TOP, simplify(extra)))
        start = prefix + TOP
    out.append(Range(start, None, simplify(cw)))
    return [r for r in out if r.hi is None or r.lo < r.hi]


def _per_namespace(
    items: Iterable[tuple[str, frozenset[str]]],
    simplify: Callable[[frozenset[str]], frozenset[str] | None],
) -> list[Range]:
    out: list[Range] = []
    for ns, kinds in items:
        if not kinds:
            continue
        prefix = ns_prefix(ns)
        if len(kinds) <= 4:  # few kinds: one exact range each, nothing to filter server-side
            for kind in sorted(kinds, key=str.encode):
                lo = kind_prefix(ns, kind)
                out.append(Range(lo, lo + TOP, None))
        else:
            out.append(Range(prefix, prefix + TOP, simplify(kinds)))
    return out


def clip_all(ranges: Sequence[Range], start: bytes) -> list[Range]:
    out = []
    for r in ranges:
        c = r.clip(start)
        if c is not None:
            out.append(c)
    return out


def visible_kinds_uniform(access: AccessLike, filters: Filters, all_kinds: Iterable[str]) -> bool:
    """True when the visible kinds are the same in every namespace (counts hash usable)."""
    wanted = frozenset(filters.kinds) if filters.kinds else frozenset(all_kinds)
    cw = access.cluster_wide & wanted
    return bool(cw) and all((k & wanted) <= cw for k in access.namespaces.values())
