"""Every Redis key fleetscope uses is built here, and only here.

All keys of one leaf cluster share the hash tag `{c:<cluster>}`, so per-cluster multi-key work
(MULTI/EXEC, Lua) runs on one shard of a Redis Cluster.

| pattern                        | type | TTL  | written by                 | read by                  |
|--------------------------------|------|------|----------------------------|--------------------------|
| fs:{c:<cluster>}:rows          | zset | -    | collector, watcher         | query (pages), collector |
| fs:{c:<cluster>}:st:<status>   | zset | -    | collector, watcher         | query (status filter)    |
| fs:{c:<cluster>}:st:suspended  | zset | -    | collector, watcher         | query (suspended filter) |
| fs:{c:<cluster>}:st:flapping   | zset | -    | collector, watcher         | query (flapping filter)  |
| fs:{c:<cluster>}:counts        | hash | -    | collector, watcher         | query (facets)           |
| fs:{c:<cluster>}:names         | hash | -    | collector, watcher         | query (name filter)      |
| fs:{c:<cluster>}:nsc:<0..63>   | hash | -    | collector, watcher         | query (facets, plans)    |
| fs:{c:<cluster>}:dep:<0..63>   | hash | -    | collector, watcher         | query (relations), writer|
| fs:{c:<cluster>}:dep:long      | hash | -    | collector, watcher         | query (relations), writer|
| fs:{c:<cluster>}:tt            | hash | -    | collector, watcher         | query (time order)       |
| fs:{c:<cluster>}:tt:<window>   | zset | -    | collector, watcher         | query (time order)       |
| fs:{c:<cluster>}:h:<identity>  | str  | days | collector, watcher         | query (history)          |
| fs:{c:<cluster>}:hk            | hash | -    | collector, watcher         | collector, watcher       |
| fs:{c:<cluster>}:gen           | int  | -    | collector, watcher (INCR)  | collector (WATCH fence)  |
| fs:{c:<cluster>}:sgen          | int  | -    | collector, watcher (INCR)  | query (groups, facets)   |
| fs:{c:<cluster>}:feed          | stream| -   | collector, watcher         | query (watch streams)    |
| fs:{c:<cluster>}:sync          | hash | -    | collector, watcher         | query (status, freshness)|
| fs:{c:<cluster>}:rbac          | hash | -    | collector (RBAC sync)      | query (access)           |
| fs:{c:<cluster>}:lock:<work>   | str  | lock | collector                  | collector                |
| fs:{c:<cluster>}:lease         | str  | lease| watcher                    | watcher                  |
| fs:{c:<cluster>}:wrv           | hash | -    | watcher                    | watcher (taking over)    |
| <lease or lock key>:owner      | str  | -    | its holder (common.index.lease)  | writers (fence, WATCH)   |
| fs:clusters                    | hash | -    | collector (registry)       | everyone                 |
| fs:registry-problems           | str  | -    | collector (registry)       | query (status)           |
| fs:version                     | int  | -    | collector (INCR on RBAC or registry change) | query (cache epoch) |
| fs:fleetgen                    | int  | -    | collector, watcher (INCR, Redis Cluster) | query (generations) |
| fs:token-key                   | str  | -    | query (SET NX once)        | query                    |
| fs:{alerts}:lease              | str  | lease| alert evaluator            | alert evaluator          |
| fs:{alerts}:meta               | hash | -    | alert evaluator            | evaluator, query (alerts)|
| fs:{alerts}:gens               | hash | -    | alert evaluator            | alert evaluator          |
| fs:{alerts}:cand:<cluster>     | hash | -    | alert evaluator            | alert evaluator          |
| fs:{alerts}:due                | zset | -    | alert evaluator            | alert evaluator          |
| fs:{alerts}:ripe               | hash | -    | alert evaluator            | alert evaluator          |
| fs:{alerts}:firing             | hash | -    | alert evaluator            | delivery, query (alerts) |
| fs:{alerts}:resolved           | hash | -    | evaluator, delivery (HDEL) | delivery                 |
| fs:{alerts}:log                | list | -    | alert evaluator            | tests, operators         |

`clusters` fields are cluster names, values their registry record and `registry-problems` a JSON
list of what could not be registered (both: common.index.registry_record, never credentials).
`rows` and `st:<status>` members are encoded rows (common.index.rows); every status except `healthy`
has an `st:` index, and `st:suspended` holds the suspended rows whatever their health;
`st:flapping` the rows that had at least the flapping threshold's transitions in the 24 hours
before they were written (readers keep those still flapping when read: common.index.history). `counts`
fields are `<kind> NUL <status>`, with `NUL suspended` appended for suspended rows. `names` fields are object names,
values the `<namespace> NUL <kind> NUL` of every row of that name (common.index.write.name_index).
`nsc:<b>` fields are namespaces, values their rows counted by kind and status (common.index.nscounts,
which also says which of the 64 hashes holds a namespace).
`dep:<b>` fields are the nodes (rows, existing or not) that some row's edges name, values
those rows, both in common.index.graph's compact form; one logical hash spread over 64
(common.index.buckets), values over 64 bytes in `dep:long`. `fs:{c:<cluster>}:dependents`, the single hash it was before, is deleted
by the next full sync. `tt` and `tt:<window>` are the time index (common.index.timeline: the
windows in use with their versions, and each window's entries scored by transition time).
`wrv` fields are the watched kinds, values the resourceVersion up to which the stored rows
hold that kind's watch events (written with the rows, in the same transaction): a replica taking
the cluster over watches from there instead of listing (collector.watch.cluster).
`feed` is the cluster's change feed (common.index.feed): one entry per row change, its id
`<generation>-<n>` (the write's new generation, the change's place in it), capped at
`FLEETSCOPE_WATCH_FEED_MAX` entries; it and `gen` outlive the cluster leaving the registry (its
rows' DELETED entries are the feed's last), so a position in it stays comparable.
`sgen` (the status generation) is INCRed with `gen` by the writes that change what groups and
counts depend on (rows appearing or leaving, a status, reason, revision, transition time, labels
or transitions: `rows.status_part`), not by those that change only a row's text (its message,
warnings, edges, `blockedBy`): readers whose answers depend only on those key their memos on it
(common.index.read.tally.status_generations); it stays with `gen` when the cluster leaves.
`fleetgen` (Redis Cluster only) moves after any cluster's `gen`: a reader of hundreds of
clusters' generations reads it alone while it stands still (common.index.read.tally).
`h:<identity>` is one object's transition history (common.index.history: its identity is the
row's sort key, NUL-separated; it expires `FLEETSCOPE_HISTORY_DAYS` after its newest entry, so
it outlives a deleted row for that window) and `hk` the kinds (fields; values `1`) whose rows'
appearing is recorded
(a kind's first rows in a cluster are not: they were found, not seen appearing). `rbac`
fields are subjects (`subject()`), values the compiled grants of common.rbac.grants (format:
common.rbac.encoding), plus `#hash` = their content hash. Celery's broker keys are Celery's own.
The `{alerts}` keys share one hash tag (one slot: the evaluator writes them in one transaction);
their fields and values are common.alerts.state's.
"""

from __future__ import annotations

import functools
import re

from common.errors import InvalidInput

PREFIX = "fs"
CLUSTERS = f"{PREFIX}:clusters"
REGISTRY_PROBLEMS = f"{PREFIX}:registry-problems"
VERSION = f"{PREFIX}:version"
FLEET_GENERATION = f"{PREFIX}:fleetgen"
"""On Redis Cluster, INCRed after every write that INCRs a cluster's generation (it cannot be in
that write's transaction: another slot). Readers of many clusters' generations read it first
and reuse the generations they last read while it has not moved
(common.index.read.tally.generations): one command instead of one per cluster."""
FLEET_GENERATION_MAX_AGE_S = 2.0
"""How long a reader reuses generations it read while `FLEET_GENERATION` stood still: the bound
on a stale answer when a writer died between its write and that INCR, or a Redis failover kept
the write but lost the INCR."""
WATCHERS = f"{PREFIX}:watchers"
"""Live watcher replicas: a sorted set of their tokens, scored by when their presence expires."""
TOKEN_KEY = f"{PREFIX}:token-key"
_ALERTS = f"{PREFIX}:{{alerts}}"
ALERT_LEASE = f"{_ALERTS}:lease"
"""The alert evaluator's lease (common.index.lease): one evaluation at a time, fleet-wide."""
ALERT_META = f"{_ALERTS}:meta"
"""The rules in force (last good file text, its hash), the last rules-file error, counters."""
ALERT_GENS = f"{_ALERTS}:gens"
"""Per cluster, the generation (`generation`) the alert state was last computed at."""
ALERT_DUE = f"{_ALERTS}:due"
"""Matching rows whose `for` has not elapsed yet, scored by when it does."""
ALERT_RIPE = f"{_ALERTS}:ripe"
"""Cross-cluster (`minClusters`) rules: per object, the clusters whose row matched long enough."""
ALERT_FIRING = f"{_ALERTS}:firing"
"""Firing alerts by id: what Alertmanager is sent each evaluation and /api/v1/alerts lists."""
ALERT_RESOLVED = f"{_ALERTS}:resolved"
"""Resolved alerts not yet delivered to every Alertmanager."""
ALERT_LOG = f"{_ALERTS}:log"
"""The last evaluations (who, when), newest first, capped."""


class GrantsVersion:
    """The value of `VERSION` as read (None when the key is missing): cached grants are valid
    while it is unchanged. Typed so it is never confused with other values read beside it."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes | str | None) -> None:
        self.raw = raw.encode() if isinstance(raw, str) else raw

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GrantsVersion) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"GrantsVersion({self.raw!r})"


INDEXED_STATUSES = ("unhealthy", "progressing", "unknown")

# Cluster names become file names, URL segments and hash tags: keep them plain.
CLUSTER_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


def valid_cluster_name(name: str) -> bool:
    return bool(CLUSTER_NAME_RE.fullmatch(name))


def check_cluster_name(name: str) -> str:
    if not valid_cluster_name(name):
        raise InvalidInput(
            "cluster", f"{name[:80]!r} is not a cluster name (lower-case letters, digits, '.-_')"
        )
    return name


@functools.lru_cache(maxsize=16384)  # a request builds a key per cluster: 200 regex checks
def _tag(cluster: str) -> str:
    return f"{PREFIX}:{{c:{check_cluster_name(cluster)}}}"


def rows(cluster: str) -> str:
    return f"{_tag(cluster)}:rows"


def by_status(cluster: str, status: str) -> str:
    if status not in INDEXED_STATUSES:
        raise ValueError(f"status {status!r} has no index")
    return f"{_tag(cluster)}:st:{status}"


def suspended(cluster: str) -> str:
    """The suspended rows (any health): small, walked for `suspended=true`."""
    return f"{_tag(cluster)}:st:suspended"


def flapping(cluster: str) -> str:
    """The rows that were flapping when written (small; walked for `flapping=true`)."""
    return f"{_tag(cluster)}:st:flapping"


def counts(cluster: str) -> str:
    return f"{_tag(cluster)}:counts"


def names(cluster: str) -> str:
    return f"{_tag(cluster)}:names"


NSCOUNTS_BUCKETS = 64


def _bucket(cluster: str, name: str, bucket: int, count: int) -> str:
    """One of the `count` hashes a logical hash is spread over (common.index.buckets)."""
    if not 0 <= bucket < count:
        raise ValueError(f"bucket {bucket} out of range")
    return f"{_tag(cluster)}:{name}:{bucket}"


def nscounts(cluster: str, bucket: int) -> str:
    """One of the cluster's per-namespace count hashes (common.index.nscounts picks which)."""
    return _bucket(cluster, "nsc", bucket, NSCOUNTS_BUCKETS)


DEPENDENTS_BUCKETS = 64


def dependents(cluster: str, bucket: int) -> str:
    """One of the hashes of the reverse of the rows' edges: who depends on each node
    (common.index.graph picks which)."""
    return _bucket(cluster, "dep", bucket, DEPENDENTS_BUCKETS)


def dependents_overflow(cluster: str) -> str:
    """The `dependents` values too long for a bucket's listpack (common.index.buckets)."""
    return f"{_tag(cluster)}:dep:long"


def dependents_unbucketed(cluster: str) -> str:
    """Where `dependents` was one hash (before it was spread over buckets)."""
    return f"{_tag(cluster)}:dependents"


def timeline(cluster: str) -> str:
    """The time index's directory: the windows holding entries (common.index.timeline)."""
    return f"{_tag(cluster)}:tt"


def timeline_window(cluster: str, suffix: str) -> str:
    """One window of the time index (its suffix: the window number, or `-<hex>` for rows
    without a transition time)."""
    return f"{_tag(cluster)}:tt:{suffix}"


def feed(cluster: str) -> str:
    """The cluster's change feed (a stream; common.index.feed)."""
    return f"{_tag(cluster)}:feed"


def history(cluster: str, identity: str) -> str:
    """One object's transition history (common.index.history); `identity` is the row's sort
    key (`namespace NUL kind NUL name NUL`, common.index.rows.sort_key)."""
    return f"{_tag(cluster)}:h:{identity}"


def history_pattern(cluster: str) -> str:
    """A SCAN MATCH pattern for every history key of a cluster (deleting the cluster)."""
    return f"{_tag(cluster)}:h:*"


def history_kinds(cluster: str) -> str:
    """The kinds whose rows' appearing is recorded as `created` (common.index.history)."""
    return f"{_tag(cluster)}:hk"


def generation(cluster: str) -> str:
    return f"{_tag(cluster)}:gen"


def status_generation(cluster: str) -> str:
    """Raised with `generation` by the writes that change a row's `rows.status_part` (or the
    rows present); not by a write that changes only rows' text (see the table)."""
    return f"{_tag(cluster)}:sgen"


def sync(cluster: str) -> str:
    return f"{_tag(cluster)}:sync"


def rbac(cluster: str) -> str:
    return f"{_tag(cluster)}:rbac"


def grants_generation(cluster: str) -> str:
    """Raised by every store of the cluster's grants (`rbac`): a full RBAC sync reads it before
    it lists and stores nothing when it moved meanwhile (a watcher stored newer grants)."""
    return f"{_tag(cluster)}:rgen"


LOCK_WORK = ("objects", "rbac")


def lock(cluster: str, work: str = "objects") -> str:
    """The sync lock of one kind of work: object and RBAC syncs of a cluster run side by side."""
    if work not in LOCK_WORK:
        raise ValueError(f"lock work is one of {LOCK_WORK}")
    return f"{_tag(cluster)}:lock:{work}"


def lease(cluster: str) -> str:
    return f"{_tag(cluster)}:lease"


def resume(cluster: str) -> str:
    """The watcher's resume points: kind key -> resourceVersion its stored rows are at."""
    return f"{_tag(cluster)}:wrv"


def owner(lease_key: str) -> str:
    """The fence of a lease (common.index.lease): its holder's token, set when the lease is taken and
    deleted when it is released, never touched by renewals (so writers WATCHing it are not
    aborted by them); same hash slot as the lease."""
    return f"{lease_key}:owner"


def handover(cluster: str) -> str:
    """A watcher replica's claim on a cluster another replica holds (collector.watch.replica):
    the claimant's token, then `<token> ready` once it has listed and watches the cluster."""
    return f"{_tag(cluster)}:handover"


def alert_candidates(cluster: str) -> str:
    """One cluster's rows matching an alert rule now (under the `{alerts}` tag, not the
    cluster's: the evaluator writes every cluster's with the rest of its state at once)."""
    return f"{_ALERTS}:cand:{check_cluster_name(cluster)}"


def cluster_keys(cluster: str) -> list[str]:
    """Every key holding data of one cluster (deleted when the cluster leaves the registry),
    but the time index's windows (named in its directory, `timeline`), the histories
    (found with `history_pattern`), and the generations and change feed (they stay: `feed`; the
    grants generation too, so a sync listing across a removal cannot store stale grants)."""
    fixed = [rows(cluster), counts(cluster), names(cluster), dependents_unbucketed(cluster)]
    fixed += [sync(cluster), timeline(cluster), history_kinds(cluster), resume(cluster)]
    indexes = [by_status(cluster, s) for s in INDEXED_STATUSES] + [suspended(cluster)]
    indexes.append(flapping(cluster))
    per_ns = [nscounts(cluster, b) for b in range(NSCOUNTS_BUCKETS)]
    deps = [dependents(cluster, b) for b in range(DEPENDENTS_BUCKETS)]
    deps.append(dependents_overflow(cluster))
    return [*fixed, rbac(cluster), *indexes, *per_ns, *deps]


def subject(kind: str, name: str) -> str:
    """A field of the `rbac` hash: `u:<user>` or `g:<group>` (service accounts are users)."""
    if kind not in ("u", "g"):
        raise ValueError("subject kind is 'u' (user) or 'g' (group)")
    return f"{kind}:{name}"


def counts_field(kind: str, status: str, suspended: bool = False) -> str:
    """A `counts` field: `kind NUL status`, plus `NUL suspended` for suspended rows."""
    return f"{kind}\x00{status}\x00suspended" if suspended else f"{kind}\x00{status}"
