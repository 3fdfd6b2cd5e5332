"""The time index: each cluster's rows in lastTransitionTime order, for `sort=lastTransitionTime`.

A cluster's entries are spread over small sorted sets, one per 12-hour window of transition
times (`WINDOW_MS`), so that each stays in Redis's compact listpack encoding (<= 128 entries of
<= 64 bytes: a few times smaller than one sorted set of every row; docs/benchmarks.md,
"memory", has the bytes per row), plus a
directory of the windows in use:

    fs:{c:<cluster>}:tt          hash   field: a window's suffix, value: its version
    fs:{c:<cluster>}:tt:<suffix> zset   member: an entry, score: its time within the window (ms)

Every write that touches a window bumps its version, so a reader that remembers windows reads
again only those that changed (a transition moves a row to the newest window: two windows).

An entry is `<namespace> NUL <kind code> NUL <name> NUL <status code>`: the row's identity with
the built-in kinds shortened (`^` + their code, common.index.codes; entries are never ordered by
kind; an entry in the legacy spelling is read too) and the one-byte status code, so status and suspension filters need no row. Rows without a transition time are
in window -1 (they sort as the oldest), spread over `UNTIMED_SPLIT` sets by a hash of their
entry, since there can be many (a third of a fleet-L cluster's rows: Istio kinds without
status conditions; 64 sets keep up to ~8,000 of them per cluster in listpacks).

An untimed entry's score is when it was written (when its status last changed: a rewrite that
keeps the entry keeps it); time order ignores it, group walks (common.index.read.groups) read
it to tell the rows that changed during a walk. A timed entry's score is the time of the
transition, in ms, but never later than the moment the writer stored it: Kubernetes reports transitions to the second, and a walk oldest-first must tell a
row that changed after the walk began (its score is then later than the walk's start: it is
skipped, never shown twice) from one that changed in the same second before it (shown).

The writer (common.index.write.writer) keeps the entries in the same MULTI/EXEC as the rows. Windows
emptied by later writes stay in the directory (readers skip them) until the next full sync. An
index that is not `READY` (never built, or built in the legacy spelling) is built whole by the
next full sync, in its transaction.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from common.index import codes, keys, rows
from common.redis_client import text

SEP = b"\x00"
WINDOW_MS = 12 * 3600 * 1000
UNTIMED = -1
"""The window of rows without a lastTransitionTime."""
UNTIMED_SPLIT = 64
READY = "timeline"
"""Sync status field: the cluster's time index holds every row (set by the first full sync, or
the first write to a cluster without rows)."""
READY_VALUE = "2"
"""`READY`'s value for an index in this spelling (`1`: the legacy one, common.index.codes)."""

KIND_MARK = "^"
"""Before the code of a built-in kind (common.index.codes) in an entry and in history keys."""
KIND_CODES = {k: codes.marked(k, KIND_MARK) for k in codes.KIND_CODES}
"""A built-in kind key -> its spelling in entries (other kinds: their key)."""
KIND_CODES_B = {k.encode(): v.encode() for k, v in KIND_CODES.items()}
KIND_OF = {
    v.encode(): k.encode() for k, v in (*KIND_CODES.items(), *codes.LEGACY_TIME_SPELLING.items())
}
"""Either spelling of a built-in kind (`^` + code, or the legacy `~` + hex) -> its key."""


_LTT = rows.FIELDS.index("lastTransitionTime")


def ready(flag: str | bytes | None) -> bool:
    """Whether the sync-hash field `READY` says the cluster's index is complete and in this
    spelling."""
    return text(flag) == READY_VALUE


def placement(
    member: str, now_ms: int, spelling: Mapping[str, str] = KIND_CODES
) -> tuple[str, int, str, int]:
    """Where a row's entry goes: (window suffix, window number, entry, score in the window)."""
    ns, kind, name, code, _reason, _msg, ltt, _ = rows.head_to_time(member)
    entry = f"{ns}\x00{spelling.get(kind, kind)}\x00{name}\x00{code}"
    if not ltt:  # the score is when it was written: time order ignores it (`position`)
        return suffix_of(UNTIMED, entry.encode()), UNTIMED, entry, now_ms
    at_ms = int(ltt) * 1000
    window = at_ms // WINDOW_MS
    score = max(min(at_ms + 999, now_ms) - window * WINDOW_MS, 0)
    return str(window), window, entry, score


def where(member: str) -> tuple[str, str]:
    """(window suffix, entry) of a stored row: what removing its entry needs (no clock)."""
    suffix, _window, entry, _score = placement(member, 0)
    return suffix, entry


def legacy_where(member: str) -> tuple[str, str] | None:
    """`where` in the legacy spelling (common.index.codes), for a row whose entry an index not
    yet rebuilt may hold so; None when both spell its kind alike (kinds-file kinds)."""
    kind = member.split("\x00", 2)[1]
    if codes.LEGACY_TIME_SPELLING.get(kind, kind) == KIND_CODES.get(kind, kind):
        return None
    suffix, _window, entry, _score = placement(member, 0, codes.LEGACY_TIME_SPELLING)
    return suffix, entry


def queue_write(
    tx: Any,
    cluster: str,
    removed: Iterable[str],
    added: Iterable[str],
    now_ms: int,
    building: bool = False,
    legacy: bool = False,
) -> None:
    """Remove the entries of `removed` and add those of `added` (in a MULTI). An untimed
    entry both removed and added (its row rewritten, its status unchanged) is left as it is,
    with its score: when its status last changed; unless `building` the index from scratch
    (then each window written is emptied first: nothing of an earlier index stays in it).
    `legacy`: the index is not yet rebuilt, so a removed entry may be in the legacy spelling:
    that is removed too."""
    gone: dict[str, list[str]] = {}
    twins: dict[str, tuple[str, str]] = {}
    for m in removed:
        suffix, entry = where(m)
        gone.setdefault(suffix, []).append(entry)
        legacy_place = legacy_where(m) if legacy and not building else None
        if legacy_place is not None:
            twins[entry] = legacy_place
    new: dict[str, dict[str, int]] = {}
    for m in added:
        suffix, _window, entry, score = placement(m, now_ms)
        new.setdefault(suffix, {})[entry] = score
    if not building:
        for suffix, scored in new.items():
            if suffix in gone and window_number(suffix) == UNTIMED:
                kept = scored.keys() & set(gone[suffix])
                gone[suffix] = [e for e in gone[suffix] if e not in kept]
                for e in kept:
                    del scored[e]
        if twins:  # a kept entry keeps its twin too (the row's one entry, as stored)
            removed_twins = [twins[e] for es in gone.values() for e in es if e in twins]
            for twin_suffix, twin_entry in removed_twins:
                gone.setdefault(twin_suffix, []).append(twin_entry)
        gone = {w: es for w, es in gone.items() if es}
        new = {w: es for w, es in new.items() if es}
    touched = sorted({*gone, *new})
    if building and touched:
        tx.delete(*(keys.timeline_window(cluster, w) for w in touched))
        gone = {}
    for suffix, entries in gone.items():
        tx.zrem(keys.timeline_window(cluster, suffix), *entries)
    for suffix, scored in new.items():
        tx.zadd(keys.timeline_window(cluster, suffix), scored)
    for suffix in touched:
        tx.hincrby(keys.timeline(cluster), suffix, 1)


def windows_of(members: Iterable[str]) -> set[str]:
    """The window suffixes that hold the entries of `members` (`where`'s, the entry built only
    for untimed rows, whose window it picks)."""
    out = set()
    for m in members:
        ltt = rows.head_to_time(m)[_LTT]
        out.add(str(int(ltt) * 1000 // WINDOW_MS) if ltt else where(m)[0])
    return out


def suffix_of(at: int, entry: bytes) -> str:
    """The window suffix of an entry placed at `at` (common.index.read.timesort's positions)."""
    if at == UNTIMED:  # spread by a hash of the entry
        return f"-{zlib.crc32(entry) % UNTIMED_SPLIT:x}"
    return str(at // WINDOW_MS)


def untimed_suffixes() -> list[str]:
    """The suffixes of every untimed set."""
    return [f"-{i:x}" for i in range(UNTIMED_SPLIT)]


def window_number(suffix: str) -> int:
    """The window a suffix names (`UNTIMED` for the untimed ones)."""
    return UNTIMED if suffix[:1] == "-" else int(suffix)


def parse(entry: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """(namespace, kind key, name, status code) of a stored entry."""
    ns, kind, name, code = entry.split(SEP, 3)
    return ns, KIND_OF.get(kind, kind), name, code


def entry_of(member: bytes) -> bytes:
    """The time-index entry of a stored member (bytes in, bytes out)."""
    ns, kind, name, code, _ = rows.member_head(member)
    return b"%s\x00%s\x00%s\x00%s" % (ns, KIND_CODES_B.get(kind, kind), name, code)


def identity(entry: bytes) -> bytes:
    """The row identity (`rows.sort_key`) of an entry, as stored members start with it."""
    ns, kind, name, _code = parse(entry)
    return b"%s\x00%s\x00%s\x00" % (ns, kind, name)


def position(window: int, score: int) -> int:
    """An entry's time as one number (ms since the epoch; untimed rows below every other)."""
    return -1 if window == UNTIMED else window * WINDOW_MS + int(score)
