"""Per-namespace row counts: what a namespace-scoped caller's facets and plans are summed from.

A cluster's rows are counted per namespace by (kind, status code) in `fs:{c:<cluster>}:nsc:<b>`
hashes: field = namespace (empty for cluster-scoped rows), value = that namespace's counts in a
compact form. The namespaces are spread over `BUCKETS` hashes by CRC32 so each stays a small
listpack (~30 bytes a namespace; one big hash costs ~90). The one writer (common.index.write.writer)
keeps them in the same MULTI/EXEC as the rows; `READY` in the sync hash says they are complete
(set by the first full sync that wrote them), so a reader never sums a partial set.

The value is a run of entries `<kind><code>[<n>]`, sorted: `<kind>` is the one-letter code of a
built-in kind (common.index.codes) or `(<kind key>)`, `<code>` the row's status code
(common.index.rows: lower-case health, upper-case when suspended), `<n>` the count when not 1.
A namespace of a healthy Kustomization, a healthy GitRepository and two unhealthy HelmReleases
is `GhHu2Kh`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from common.index import keys, rows
from common.index.buckets import Bucketed, Groups
from common.index.codes import KIND_CODES, KIND_OF
from common.redis_client import text

BUCKETS = keys.NSCOUNTS_BUCKETS
READY = "nscounts"
"""The sync-hash field set once the cluster's per-namespace counts are complete."""
READY_VALUE = "1"

Key = tuple[str, str]
"""(kind key, status code)."""
Counts = dict[Key, int]

_LEGACY = {rows.LEGACY_SUSPENDED: rows.STATUS_CODES["unknown"].upper()}


HASHES = Bucketed(keys.nscounts, BUCKETS)


def bucket(namespace: str) -> int:
    return HASHES.bucket(namespace)


def key(cluster: str, namespace: str) -> str:
    return HASHES.key_of(cluster, namespace)


def code_of(status: str, suspended: bool) -> str:
    code = rows.STATUS_CODES[status]
    return code.upper() if suspended else code


def member_key(member: str) -> tuple[str, Key]:
    """(namespace, (kind, status code)) of an encoded member."""
    ns, kind, _name, code, _ = rows.head(member)
    return ns, (kind, _LEGACY.get(code, code))


def encode(counts: Mapping[Key, int]) -> str:
    out = []
    for (kind, code), n in sorted(counts.items()):
        if n <= 0:
            continue
        letter = KIND_CODES.get(kind)
        out.append(f"{letter or '(' + kind + ')'}{code}{n if n != 1 else ''}")
    return "".join(out)


def decode(value: str | bytes | None) -> Counts:
    if not value:
        return {}
    s = text(value)
    out: Counts = {}
    i, end = 0, len(s)
    while i < end:
        if s[i] == "(":
            close = s.index(")", i)
            kind, i = s[i + 1 : close], close + 1
        else:
            kind, i = KIND_OF[s[i]], i + 1
        code = s[i]
        i += 1
        j = i
        while j < end and s[j].isdigit():
            j += 1
        out[(kind, code)] = int(s[i:j]) if j > i else 1
        i = j
    return out


def of_members(members: Iterable[str]) -> dict[str, Counts]:
    """Every namespace's counts in a set of members."""
    out: dict[str, Counter[Key]] = {}
    for m in members:
        ns, k = member_key(m)
        c = out.get(ns)
        if c is None:
            c = out[ns] = Counter()
        c[k] += 1
    return {ns: dict(c) for ns, c in out.items()}


def net_change(removed: Iterable[str], added: Iterable[str]) -> dict[str, Counter[Key]]:
    """Per namespace, how the counts move (namespaces whose counts do not move are left out)."""
    out: dict[str, Counter[Key]] = {}
    for sign, members in ((-1, removed), (1, added)):
        for m in members:
            ns, k = member_key(m)
            out.setdefault(ns, Counter())[k] += sign
    return {ns: c for ns, c in out.items() if any(c.values())}


def queue_read(pipe: Any, cluster: str, namespaces: Iterable[str]) -> Groups:
    """Queue one HMGET per bucket; pass the replies to `collect`."""
    return HASHES.queue_hmget(pipe, cluster, namespaces)


collect = Bucketed.collect


def queue_read_all(pipe: Any, cluster: str) -> int:
    """Queue HGETALL of every bucket; returns how many replies to pass to `collect_all`."""
    return HASHES.queue_hgetall(pipe, cluster)


collect_all = Bucketed.collect_all


def diff(stored: Mapping[str, str], wanted: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """What to HSET and HDEL to turn `stored` into `wanted` (values encoded)."""
    changed = {ns: v for ns, v in wanted.items() if stored.get(ns) != v}
    return changed, [ns for ns in stored if ns not in wanted]


def apply(stored: Mapping[str, str], change: Mapping[str, Counter[Key]]) -> dict[str, str]:
    """The new value of every namespace in `change` ("" when it has no rows left)."""
    out: dict[str, str] = {}
    for ns, moved in change.items():
        counts = Counter(decode(stored.get(ns)))
        counts.update(moved)
        out[ns] = encode(counts)
    return out


def queue_write(tx: Any, cluster: str, changed: Mapping[str, str], gone: Iterable[str]) -> None:
    """HSET the changed values and HDEL the namespaces gone (or whose value is empty)."""
    HASHES.queue_write(tx, cluster, changed, gone)
