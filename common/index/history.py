"""Each object's transition history: what the one writer (common.index.write.writer) records, in the
same MULTI/EXEC as the rows, when a row's status, reason, suspension or revision changes, or a
row appears or disappears; and how a stored history reads back.

A transition is found by comparing the stored member with the new one inside the writer's
atomic write (under its WATCH on the generation), never against a writer's memory: a retried
write, a full sync repeating what the watcher wrote, or a second writer finds the row already
as it wants it and records nothing. Each object's history is one string key
(`fs:{c:<cluster>}:h:<identity>`, built-in kinds as the time index spells them: `key`) holding its
entries newest first, trimmed to the last `Retention.max_entries` and to `Retention.days` on
every write, and expiring `days` after its newest entry, so a deleted object's history stays
readable for the window and then goes. A history written with the legacy kind codes
(common.index.codes) stays under its `legacy_key`, read after the key's entries until it expires.

An entry is 7 NUL-separated fields: the cluster generation the write made (its position: newer
entries have higher ones; the history API's keyset), `at` (epoch s), the source code (`SOURCES`),
then the row's own stored status code, reason, message (capped at `MESSAGE_MAX`) and revision,
in common.index.rows' encoding. Entries follow one another in the value.

A kind's first rows in a cluster (a cluster's first sync, a watcher's first list of a kind, an
index rebuild) were not seen appearing: they record no `created` entries (`fs:{c:<cluster>}:hk`
holds the kinds past that point): a fleet's first sync writes no history at all.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from common.index import codes, keys, rows, timeline
from common.redis_client import text

SEP = "\x00"
FIELDS_PER_ENTRY = 7
MESSAGE_MAX = 200
"""History keeps at most this much of a message (the row keeps it whole)."""
SOURCES = {"watch": "w", "sync": "s", "created": "c", "deleted": "d"}
SOURCE_OF = {v: k for k, v in SOURCES.items()}
_CODE, _REASON, _MESSAGE, _LTT, _REVISION = 3, 4, 5, 6, 7
DAY_S = 86400


@dataclass(frozen=True)
class Retention:
    """How much history each object keeps (FLEETSCOPE_HISTORY_MAX, FLEETSCOPE_HISTORY_DAYS)."""

    max_entries: int = 50
    days: float = 14.0
    flapping: int = 4
    """FLEETSCOPE_FLAPPING_THRESHOLD: rows with this many transitions in the last 24 hours when
    written go into the flapping index (`flapping_now`)."""
    feed_max: int = 256
    """FLEETSCOPE_WATCH_FEED_MAX: entries kept in each cluster's change feed (common.index.feed)."""

    @property
    def window_s(self) -> float:
        return self.days * DAY_S


DEFAULT = Retention()


@dataclass(frozen=True)
class Transition:
    """One object's recorded change: its identity and the new entry (without its position)."""

    identity: str
    at: int
    source: str
    code: str
    reason: str
    message: str
    revision: str

    @property
    def kind(self) -> str:
        return rows.split_identity(self.identity)[1]

    def encode(self, position: int) -> str:
        message = self.message[:MESSAGE_MAX]
        fields = (str(position), str(self.at), SOURCES[self.source], self.code, self.reason)
        return SEP.join((*fields, message, self.revision))


class Entry(TypedDict):
    """A transition as the history API returns it."""

    at: str
    status: str
    suspended: bool
    reason: str
    message: str
    revision: str
    source: str
    position: int


def transitions(
    removed: Iterable[str],
    added: Iterable[str],
    source: str,
    baseline: Collection[str],
    now: float | None = None,
) -> list[Transition]:
    """The transitions a delta makes: per identity, the stored member (in `removed`) against the
    new one (in `added`). `source` is the writer's (`watch` or `sync`); rows of kinds not in
    `baseline` appearing record nothing (see the module docstring)."""
    now_s = int(time.time() if now is None else now)
    # Members are split only where they are compared (a first sync: nothing but kinds).
    old = {rows.identity(m): m for m in removed}
    if not old and not baseline:
        return []  # only new rows, of kinds never seen: nothing to record
    new = {rows.identity(m): m for m in added}
    out: list[Transition] = []
    for identity in sorted(old.keys() | new.keys()):
        b, a = old.get(identity), new.get(identity)
        if a is None and b is not None:
            out.append(_entry(identity, rows.split_member(b), "deleted", now_s))
        elif b is None and a is not None:
            if rows.kind_of(a) in baseline:
                out.append(_entry(identity, rows.split_member(a), "created", now_s))
        elif b is not None and a is not None:
            before, after = rows.split_member(b), rows.split_member(a)
            if not _changed(before, after):
                continue
            at = now_s
            ltt = _field(after, _LTT)
            if ltt and ltt != _field(before, _LTT):  # the leaf says when it happened
                at = min(int(ltt), now_s)
            out.append(_entry(identity, after, source, at))
    return out


def _field(parts: list[str], i: int) -> str:
    return parts[i] if i < len(parts) else ""


def _changed(before: list[str], after: list[str]) -> bool:
    return any(_field(before, i) != _field(after, i) for i in (_CODE, _REASON, _REVISION))


def _entry(identity: str, parts: list[str], source: str, at: int) -> Transition:
    f = parts + [""] * (_REVISION + 1 - len(parts))
    return Transition(identity, at, source, f[_CODE], f[_REASON], f[_MESSAGE], f[_REVISION])


def with_recent(
    removed: Iterable[str],
    added: Iterable[str],
    found: Iterable[Transition],
    max_times: int,
    now: float | None = None,
) -> list[str]:
    """`added` with each member's `recent` field (common.index.rows): carried over from the
    stored member of the same identity, moved by its transition if it has one."""
    now_s = int(time.time() if now is None else now)
    old = {rows.identity(m): m for m in removed}
    moved = {t.identity: t for t in found if t.source != "deleted"}
    out = []
    for m in added:
        identity = rows.identity(m)
        before = old.get(identity)
        recent = rows.recent_of(before) if before is not None else ""
        t = moved.get(identity)
        if t is not None:
            recent = _next_recent(before, m, recent, t, max_times, now_s)
        out.append(m if recent == rows.recent_of(m) else rows.with_recent(m, recent))
    return out


def _next_recent(
    before: str | None, after: str, recent: str, t: Transition, max_times: int, now_s: int
) -> str:
    """The `recent` field after transition `t`: its time in front of the last day's, and the
    start of the current run of non-healthy statuses (empty once healthy)."""
    since, times = rows.recent_times(recent)
    kept = [x for x in times if x >= now_s - DAY_S]
    times = [t.at, *kept][:max_times]
    new = rows.head_to_time(after)
    if rows.CODE_STATUS[new[_CODE]] == "healthy":
        since = ""
    elif before is None:  # appeared failing: since the leaf says so, else since now
        since = str(min(int(new[_LTT]), now_s)) if new[_LTT] else str(t.at)
    else:
        old = rows.head_to_time(before)
        if rows.CODE_STATUS[old[_CODE]] == "healthy":
            since = str(t.at)
        else:  # still failing: the run started earlier (before fleetscope saw it: its time)
            since = since or old[_LTT] or str(t.at)
    return ",".join([since, *map(str, times)])


def flapping_now(member: str, threshold: int, now: float) -> bool:
    """Whether a member had at least `threshold` transitions in the 24 hours before `now`."""
    if not rows.has_recent(member):  # most rows: no parse
        return False
    return rows.transitions_24h(rows.recent_of(member), now) >= threshold


def new_kinds(
    baseline: Collection[str], stored_kinds: Iterable[str], added: Iterable[str]
) -> set[str]:
    """The kinds to add to the baseline: those with rows stored or being added."""
    return {*stored_kinds, *(rows.kind_of(m) for m in added)} - set(baseline)


def key(cluster: str, identity: str) -> str:
    """The history key of a row identity (`rows.sort_key`), the built-in kinds shortened as
    the time index spells them (common.index.timeline.KIND_CODES: ~11 bytes a key)."""
    return _key(cluster, identity, timeline.KIND_CODES)


def legacy_key(cluster: str, identity: str) -> str | None:
    """The key the object's history had in the legacy spelling (common.index.codes), when it
    differs from `key`: read beside it until it expires (nothing is written to it)."""
    old = _key(cluster, identity, codes.LEGACY_TIME_SPELLING)
    return old if old != key(cluster, identity) else None


def _key(cluster: str, identity: str, spelling: Mapping[str, str]) -> str:
    ns, kind, name = rows.split_identity(identity)
    return keys.history(cluster, rows.sort_key(ns, spelling.get(kind, kind), name))


def queue_get(reads: Any, cluster: str, identity: str) -> int:
    """Queue the reads of an object's stored history (its key, and its legacy key when it has
    one); returns how many, whose replies `joined` makes one stored history of."""
    reads.get(key(cluster, identity))
    old = legacy_key(cluster, identity)
    if old is not None:
        reads.get(old)
    return 1 if old is None else 2


def joined(*values: str | bytes | None) -> str:
    """One stored history of the values `queue_get` read: the entries under the key, then
    the (older) ones under the legacy key."""
    return SEP.join(t for t in map(text, values) if t)


def queue_read(reads: Any, cluster: str, found: Iterable[Transition]) -> list[str]:
    """Queue a GET of each changed object's stored history; the identities, in reply order."""
    identities = sorted({t.identity for t in found})
    for identity in identities:
        reads.get(key(cluster, identity))
    return identities


def queue_write(
    tx: Any,
    cluster: str,
    found: list[Transition],
    stored: dict[str, str],
    position: int,
    retention: Retention,
    now: float | None = None,
) -> None:
    """SET each changed object's history (in a MULTI): its new entries in front of the stored
    ones, trimmed by count and age, expiring `days` from now."""
    now_s = time.time() if now is None else now
    oldest = now_s - retention.window_s
    by_identity: dict[str, list[str]] = {}
    for t in found:
        by_identity.setdefault(t.identity, []).insert(0, t.encode(position))
    expire_ms = int((now_s + retention.window_s) * 1000)
    for identity, fresh in by_identity.items():
        kept = [e for e in split(stored.get(identity, "")) if _at(e) >= oldest]
        entries = (fresh + kept)[: retention.max_entries]
        tx.set(key(cluster, identity), SEP.join(entries), pxat=expire_ms)


def split(value: str | bytes | None) -> list[str]:
    """The encoded entries of a stored history, newest first."""
    if not value:
        return []
    parts = text(value).split(SEP)
    n = FIELDS_PER_ENTRY
    return [SEP.join(parts[i : i + n]) for i in range(0, len(parts) - n + 1, n)]


def _at(entry: str) -> int:
    return int(entry.split(SEP, 2)[1])


def decode(entry: str) -> Entry:
    """An encoded entry as the API returns it."""
    position, at, source, code, reason, message, revision = entry.split(SEP)
    return Entry(
        at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(at))),
        status=rows.CODE_STATUS.get(code, "unknown"),
        suspended=code in rows.SUSPENDED_CODES,
        reason=rows.decode_reason(reason),
        message=rows.decode_message(message, revision),
        revision=revision,
        source=SOURCE_OF.get(source, source),
        position=int(position),
    )


def served(
    value: str | bytes | None, retention: Retention = DEFAULT, now: float | None = None
) -> list[Entry]:
    """The entries of a stored history as served: newest first, none older than the window,
    at most `max_entries` (a history joined with its legacy key's may hold more)."""
    oldest = (time.time() if now is None else now) - retention.window_s
    return [decode(e) for e in split(value) if _at(e) >= oldest][: retention.max_entries]


def read(
    r: Any,
    cluster: str,
    identity: str,
    retention: Retention = DEFAULT,
    now: float | None = None,
) -> list[Entry]:
    """An object's history, newest first, none older than the retention window (one round
    trip)."""
    reads: Any = r.pipeline(transaction=False)
    queue_get(reads, cluster, identity)
    return served(joined(*reads.execute()), retention, now)
