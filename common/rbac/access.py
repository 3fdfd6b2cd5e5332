"""A user's access per cluster, resolved from the compiled grants in Redis and cached.

`AccessResolver.resolve` costs one GET of `fs:version` per call while nothing changed; when the
version moved it re-reads each cluster's grants hash (`#hash`, one pipelined round trip), and
it loads only the subjects (user, groups) it has not parsed for that hash (one more). Parsed
subjects and merged results are cached per (cluster, content hash), so users with the same
groups share the work. The caller hides clusters whose RBAC data is stale (see common.index.syncstatus).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from common.index import keys
from common.index.read.memo import Memo
from common.kinds.registry import KindRegistry
from common.rbac.authorizer import UserInfo
from common.rbac.encoding import (
    ALL_NAMESPACES,
    HASH_FIELD,
    beyond_cluster_wide,
    decode_grants,
    decode_reasons,
)
from common.redis_client import text

_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Access:
    """What one user may list in one cluster. `namespaces` holds, in sorted order, the kinds
    granted in a namespace beyond `cluster_wide` (namespaces with nothing extra are absent)."""

    cluster_wide: frozenset[str] = _NONE
    namespaces: Mapping[str, frozenset[str]] = field(default_factory=dict)
    sorted_namespaces: list[str] = field(default_factory=list)

    @classmethod
    def build(
        cls, cluster_wide: frozenset[str], namespaces: Mapping[str, frozenset[str]]
    ) -> Access:
        out = dict(beyond_cluster_wide(cluster_wide, namespaces))
        return cls(cluster_wide, out, list(out))

    def kinds_in(self, namespace: str) -> frozenset[str]:
        extra = self.namespaces.get(namespace)
        return self.cluster_wide | extra if extra else self.cluster_wide

    def may_list(self, namespace: str, kind: str) -> bool:
        """Whether `kind` in `namespace` is listable (`kinds_in` without building the union)."""
        return kind in self.cluster_wide or kind in self.namespaces.get(namespace, _NONE)

    @property
    def is_empty(self) -> bool:
        return not self.cluster_wide and not self.namespaces


NO_ACCESS = Access()


def merge(accesses: Iterable[Access]) -> Access:
    """The union of several subjects' access (shared sets are unioned once per pair)."""
    parts = [a for a in accesses if not a.is_empty]
    if len(parts) <= 1:
        return parts[0] if parts else NO_ACCESS
    cluster_wide = frozenset().union(*(a.cluster_wide for a in parts))
    namespaces: dict[str, frozenset[str]] = {}
    unions: dict[tuple[int, int], frozenset[str]] = {}
    for a in parts:
        for ns, kinds in a.namespaces.items():
            prev = namespaces.get(ns)
            if prev is None or kinds <= prev:
                namespaces[ns] = prev or kinds
                continue
            pair = (id(prev), id(kinds))
            if pair not in unions:
                unions[pair] = prev | kinds
            namespaces[ns] = unions[pair]
    return Access.build(cluster_wide, namespaces)


class AccessResolver:
    """Resolves users' access over many clusters from `fs:{c:X}:rbac`; one per process."""

    def __init__(self, r: redis.Redis, registry: KindRegistry, cache_size: int = 50_000) -> None:
        self.r = r
        self.known = frozenset(registry.keys())
        # Parsed and merged access per (cluster, grants hash, subject or subjects): the hash
        # names the grants' content, so an entry never needs checking against a version.
        self.cache: Memo[tuple[Any, ...], Access] = Memo(cache_size, "access.cache")
        # Whole answers per (user's subjects, clusters), at the hashes they were resolved from
        # (valid while those are `_state`'s).
        self.answers: Memo[tuple[Any, ...], dict[str, Access]] = Memo(4096)
        # (fs:version as read, each cluster's grants hash at that version): one tuple replaced
        # as a whole, never mutated, so a reader never pairs one version with another's hashes.
        self._state: tuple[keys.GrantsVersion | None, dict[str, str]] = (None, {})  # None: unread
        self.round_trips = 0  # Redis round trips made (for tests and metrics)
        self.subjects_loaded = 0  # subject fields read from Redis (cache misses)

    @staticmethod
    def _subjects(user: UserInfo) -> tuple[str, tuple[str, ...]]:
        return keys.subject("u", user.name), tuple(
            sorted({keys.subject("g", g) for g in user.groups})
        )

    def cached(
        self, user: UserInfo, clusters: list[str]
    ) -> tuple[dict[str, Access], keys.GrantsVersion] | None:
        """The answer `resolve` gave last time and the `fs:version` value it is valid for, with
        no Redis call; None when there is none. Unchecked: the caller must read `fs:version`
        (in the same round trip as its data) and use the answer only if it still equals it."""
        version, hashes = self._state
        answer = self.answers.get((*self._subjects(user), tuple(clusters)), hashes)
        if answer is None or version is None:
            return None
        return answer, version

    def resolve(self, user: UserInfo, clusters: list[str]) -> dict[str, Access]:
        """Access per cluster (NO_ACCESS where the cluster has no grants stored)."""
        own, groups = self._subjects(user)
        hashes = self._current_hashes(clusters)
        answer_key = (own, groups, tuple(clusters))
        answer = self.answers.get(answer_key, hashes)
        if answer is not None:
            return dict(answer)
        out: dict[str, Access] = {}
        todo: dict[str, str] = {}
        for c in clusters:
            h = hashes.get(c, "")
            cached = self._combined(c, h, own, groups) if h else NO_ACCESS
            if cached is None:
                todo[c] = h
            else:
                out[c] = cached
        for _ in range(3):  # a cluster whose grants change mid-read is read again
            if not todo:
                break
            todo = self._load(todo, own, groups, out)
        for c in todo:
            out[c] = NO_ACCESS  # still changing under us: fail closed for this request
        if not todo:
            self.answers.put(answer_key, out, hashes)
        return dict(out)

    def _current_hashes(self, clusters: list[str]) -> dict[str, str]:
        version = keys.GrantsVersion(self.r.get(keys.VERSION))
        self.round_trips += 1
        known, hashes = self._state
        hashes = hashes if version == known else {}
        need = [c for c in clusters if c not in hashes]
        if not need:
            return hashes
        pipe = self.r.pipeline(transaction=False)
        for c in need:
            pipe.hget(keys.rbac(c), HASH_FIELD)
        fetched = {c: text(h) for c, h in zip(need, pipe.execute(), strict=True)}
        self.round_trips += 1
        hashes = {**hashes, **fetched}
        self._state = (version, hashes)
        return hashes

    def _combined(self, c: str, h: str, own: str, groups: tuple[str, ...]) -> Access | None:
        """The user's merged access from cached parts, or None if a part is not cached."""
        parts = {s: self.cache.get((c, h, s)) for s in (own, *groups)}
        if any(p is None for p in parts.values()):
            return None
        return self._merged(c, h, own, groups, parts)

    def _merged(
        self, c: str, h: str, own: str, groups: tuple[str, ...], parts: dict[str, Access | None]
    ) -> Access:
        """The user's access merged from `parts` (every subject's, in hand: never read back
        from the memo, which may have dropped one since), the merges remembered."""
        key = (c, h, groups)
        shared = self.cache.get(key)
        if shared is None:
            shared = merge(p for g in groups if (p := parts[g]) is not None)
            self.cache.put(key, shared)
        mine = parts[own] or NO_ACCESS
        if mine.is_empty or shared.is_empty:
            return shared if mine.is_empty else mine
        whole = (c, h, own, groups)
        merged = self.cache.get(whole)
        if merged is None:
            merged = merge([mine, shared])
            self.cache.put(whole, merged)
        return merged

    def _load(
        self, todo: dict[str, str], own: str, groups: tuple[str, ...], out: dict[str, Access]
    ) -> dict[str, str]:
        """Fetch the subjects not cached for each cluster's hash; returns clusters to retry."""
        pipe = self.r.pipeline(transaction=False)
        plan = []
        for c, h in todo.items():
            parts = {s: self.cache.get((c, h, s)) for s in (own, *groups)}
            need = [s for s, p in parts.items() if p is None]
            pipe.hmget(keys.rbac(c), [HASH_FIELD, *need])
            plan.append((c, h, parts, need))
            self.subjects_loaded += len(need)
        retry: dict[str, str] = {}
        for (c, h, parts, need), values in zip(plan, pipe.execute(), strict=True):
            got = text(values[0])
            if got != h:
                if got:
                    retry[c] = got
                else:
                    out[c] = NO_ACCESS
                continue
            for subject, raw in zip(need, values[1:], strict=True):
                value = text(raw)
                parsed = Access.build(*decode_grants(value, self.known)) if value else NO_ACCESS
                self.cache.put((c, h, subject), parsed)
                parts[subject] = parsed
            # merged from what is in hand: the memo may have dropped a part meanwhile (a
            # bounded memo, another thread's puts), and a part missing is not no access
            out[c] = self._merged(c, h, own, groups, parts)
        self.round_trips += 1
        return retry

    def explain(self, user: UserInfo, cluster: str) -> list[dict[str, Any]]:
        """The caller's own grants in one cluster and the bindings behind them, for
        `GET /api/v1/access`: [{namespace ("*" = all), kinds, binding, subject}]."""
        subjects = [("User", user.name)] + [("Group", g) for g in sorted(set(user.groups))]
        fields = [keys.subject("u" if kind == "User" else "g", name) for kind, name in subjects]
        out: list[dict[str, Any]] = []
        for (kind, name), raw in zip(
            subjects, self.r.hmget(keys.rbac(cluster), fields), strict=True
        ):
            value = text(raw)
            for ns, kinds, binding in decode_reasons(value) if value else []:
                visible = sorted(kinds & self.known)
                if visible:
                    out.append(
                        {
                            "namespace": ns,
                            "kinds": visible,
                            "binding": binding,
                            "subject": f"{kind} {name}",
                        }
                    )
        out.sort(key=lambda e: (e["namespace"] != ALL_NAMESPACES, e["namespace"], e["binding"]))
        return out
