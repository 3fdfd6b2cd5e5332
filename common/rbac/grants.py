"""Compiled grants: per subject, which kinds it may `list` cluster-wide and in which namespaces.

The collector compiles one cluster's RBAC objects (`compile_grants`) and stores the result in
the cluster's `rbac` hash (`store_grants`, one field per subject, see common.rbac.encoding); the
query service reads it through `AccessResolver` (common.rbac.access, re-exported here). Only
the registered kinds are compiled, and only the verb `list` on the whole resource counts.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from common.errors import RedisUnavailable
from common.index import keys, lease, syncstatus
from common.index.lease import Fence
from common.kinds.registry import KindRegistry
from common.rbac.access import Access, AccessResolver
from common.rbac.authorizer import MASTERS, Authorizer, Binding, RbacObjects, Rule
from common.rbac.encoding import (
    ALL_NAMESPACES,
    BUILTIN,
    HASH_FIELD,
    BindingRef,
    Reason,
    encode_subject,
)
from common.redis_client import WATCH_RETRIES, text

__all__ = [
    "Access",
    "AccessResolver",
    "CompiledGrants",
    "SubjectGrants",
    "compile_grants",
    "grants_generation",
    "store_grants",
]
log = logging.getLogger(__name__)

MASTERS_REF = (BUILTIN, MASTERS, "", "")
_FORMAT = b"fleetscope-grants-v1"
VERSION_STEP_MAX = 2**31


@dataclass
class SubjectGrants:
    """What one subject may list, and the bindings that say so."""

    cluster_wide: frozenset[str] = frozenset()
    namespaces: dict[str, frozenset[str]] = field(default_factory=dict)
    reasons: list[Reason] = field(default_factory=list)

    def add(self, namespace: str, kinds: frozenset[str], reason: BindingRef) -> None:
        # Kind sets are shared frozensets (one per role), so 10,000 namespaces hold one set.
        if namespace == ALL_NAMESPACES:
            self.cluster_wide |= kinds
        else:
            prev = self.namespaces.get(namespace)
            self.namespaces[namespace] = kinds if prev is None or prev == kinds else prev | kinds
        self.reasons.append((namespace, kinds, reason))

    def encode(self) -> str:
        return encode_subject(self.cluster_wide, self.namespaces, self.reasons)


@dataclass(frozen=True)
class CompiledGrants:
    """One cluster's grants: `fields` are the `rbac` hash (subject -> encoded value)."""

    subjects: dict[str, SubjectGrants]
    fields: dict[str, str]
    content_hash: str


class _KindMatcher:
    """Kind keys that rules let one `list`, memoized by rule content (namespaces repeat roles)."""

    def __init__(self, registry: KindRegistry) -> None:
        self.kinds = [(k.key, k.group, k.plural) for k in registry]
        self.by_rule: dict[Rule, frozenset[str]] = {}
        self.by_rules: dict[tuple[Rule, ...], frozenset[str]] = {}

    def listable(self, rules: tuple[Rule, ...]) -> frozenset[str]:
        found = self.by_rules.get(rules)
        if found is None:
            found = self.by_rules[rules] = frozenset().union(*map(self._rule, rules))
        return found

    def _rule(self, rule: Rule) -> frozenset[str]:
        found = self.by_rule.get(rule)
        if found is None:
            found = self.by_rule[rule] = frozenset(
                key
                for key, group, plural in self.kinds
                if rule.allows("list", group, plural, "", "")
            )
        return found


def compile_grants(objects: RbacObjects, registry: KindRegistry) -> CompiledGrants:
    """Per subject (`u:<user>`, `g:<group>`), the kinds it may list and where."""
    auth = Authorizer(objects)
    matcher = _KindMatcher(registry)
    subjects: dict[str, SubjectGrants] = {}
    all_bindings: Iterable[Binding] = auth.bindings_for(None)
    rolebindings = (b for bs in auth.bindings_by_ns.values() for b in bs)
    for binding in (*all_bindings, *rolebindings):
        kinds = matcher.listable(auth.binding_rules(binding))
        if not kinds:
            continue
        where = ALL_NAMESPACES if binding.namespace is None else binding.namespace
        for kind, name in dict.fromkeys(binding.subject_keys()):
            grants = subjects.setdefault(keys.subject(kind, name), SubjectGrants())
            grants.add(where, kinds, binding.ref)
    all_kinds = frozenset(registry.keys())
    subjects.setdefault(keys.subject("g", MASTERS), SubjectGrants()).add(
        ALL_NAMESPACES, all_kinds, MASTERS_REF
    )
    fields = {s: g.encode() for s, g in sorted(subjects.items())}
    return CompiledGrants(subjects, fields, _content_hash(fields))


def _content_hash(fields: dict[str, str]) -> str:
    h = hashlib.sha256(_FORMAT)
    for subject, value in fields.items():
        h.update(b"\x00" + subject.encode() + b"\x00" + value.encode())
    return h.hexdigest()[:32]


def grants_generation(r: redis.Redis, cluster: str) -> int:
    """The cluster's grants generation (`keys.grants_generation`): read it before listing the
    RBAC objects, and pass it to `store_grants` as `since_generation`."""
    return int(r.get(keys.grants_generation(cluster)) or 0)


def store_grants(
    r: redis.Redis,
    cluster: str,
    compiled: CompiledGrants,
    synced_at: float,
    *,
    since_generation: int | None = None,
    fence: Fence | None = None,
    listed: bool = False,
) -> bool:
    """Replace the cluster's `rbac` hash atomically (skipped when unchanged), record the sync,
    and raise `fs:version` (INCRBY) when the grants changed. Returns True when they changed.

    Every store raises the cluster's grants generation, in the same transaction.
    `since_generation` (a full RBAC sync: the generation read before its lists) stores nothing
    when another store came since: a watcher compiled grants from a newer state meanwhile (a
    RoleBinding deleted during the sync's lists), and the sync's older snapshot written over
    them would give the revoked access back until the next sync. `fence` (a watcher): store
    only while its lease is ours (LockBusy otherwise). `listed` (a full RBAC sync by the
    collector) also records `rbac_listed_at` (common.index.syncstatus.watched)."""
    rbac_key, gen_key = keys.rbac(cluster), keys.grants_generation(cluster)
    status = syncstatus.encode(
        rbac_hash=compiled.content_hash, rbac_synced_at=synced_at, rbac_error=""
    )
    if listed:
        status.update(syncstatus.encode(rbac_listed_at=synced_at))
    tx: Any
    for _ in range(WATCH_RETRIES):
        with r.pipeline(transaction=True) as tx:
            try:
                tx.watch(gen_key)
                lease.check(tx, fence, f"cluster {cluster}")
                gen = int(tx.get(gen_key) or 0)
                if since_generation is not None and gen != since_generation:
                    log.info(
                        "grants not stored: newer grants were stored during the RBAC lists",
                        extra={"cluster": cluster},
                    )
                    return False
                changed = text(tx.hget(rbac_key, HASH_FIELD)) != compiled.content_hash
                tx.multi()
                if changed:
                    tx.delete(rbac_key)
                    items = list(compiled.fields.items())
                    for i in range(0, len(items), 1000):
                        tx.hset(rbac_key, mapping=dict(items[i : i + 1000]))
                    tx.hset(rbac_key, HASH_FIELD, compiled.content_hash)
                tx.hset(keys.sync(cluster), mapping=status)
                tx.incr(gen_key)
                tx.execute()
                break
            except redis.WatchError:
                continue  # another store (or the fence) moved under us: read again
    else:
        raise RedisUnavailable(f"cluster {cluster}: grants kept changing under the store; retry")
    if changed:
        # Another slot than the cluster's keys, so not in the MULTI; readers re-check hashes
        # after seeing the new version, so writing it last loses nothing. A random step, not 1:
        # after Redis is flushed and rebuilt, the version must not come back to a value a
        # resolver cached before the flush (it would keep serving the old grants).
        r.incrby(keys.VERSION, 1 + secrets.randbelow(VERSION_STEP_MAX))
    return changed
