"""The time index: each cluster's rows in lastTransitionTime order, for `sort=lastTransitionTime`.

A cluster's entries are spread over small sorted sets, one per 12-hour window of transition
times (`WINDOW_MS`), so that each stays in Redis's compact listpack encoding (<= 128 entries of
<= 64 bytes: ~36 bytes an entry, where one sorted set of every row would cost ~150), plus a
directory of the windows in use:

    fs:{c:<cluster>}:tt          hash   field: a window's suffix, value: its version
    fs:{c:<cluster>}:tt:<suffix> zset   member: an entry, score: its time within the window (ms)

Every write that touches a window bumps its version, so a reader that remembers windows reads
again only those that changed (a transition moves a row to the newest window: two windows).

An entry is `<namespace> NUL <kind code> NUL <name> NUL <status code>`: the row's identity with
the built-in kinds shortened (`KIND_CODES`; entries are never ordered by kind) and the one-byte
status code, so status and suspension filters need no row. Rows without a transition time are
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
emptied by later writes stay in the directory (readers skip them) until the next full sync.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

from common.index import keys, rows

SEP = b"\x00"
WINDOW_MS = 12 * 3600 * 1000
UNTIMED = -1
"""The window of rows without a lastTransitionTime."""
UNTIMED_SPLIT = 64
READY = "timeline"
"""Sync status field: the cluster's time index holds every row (set by the first full sync, or
the first write to a cluster without rows)."""
READY_VALUE = "1"

KIND_CODES = {
    k: f"~{i:x}"
    for i, k in enumerate(
        (
            "Kustomization",
            "HelmRelease",
            "GitRepository",
            "HelmRepository",
            "OCIRepository",
            "Bucket",
            "HelmChart",
            "ImageRepository",
            "ImagePolicy",
            "ImageUpdateAutomation",
            "Alert",
            "Provider",
            "Receiver",
            "VirtualService",
            "DestinationRule",
            "Gateway",
            "ServiceEntry",
            "Sidecar",
            "WorkloadEntry",
            "AuthorizationPolicy",
            "PeerAuthentication",
            "RequestAuthentication",
            "Telemetry",
            "GatewayClass",
            "K8sGateway",
            "HTTPRoute",
            "GRPCRoute",
            "TLSRoute",
            "TCPRoute",
            "ReferenceGrant",
            "AuthPolicy",
            "RateLimitPolicy",
            "DNSPolicy",
            "TLSPolicy",
        )
    )
}
"""Append only: a stored code keeps its meaning. Kind keys never start with `~`."""
KIND_OF = {v.encode(): k.encode() for k, v in KIND_CODES.items()}
KIND_CODES_B = {k.encode(): v.encode() for k, v in KIND_CODES.items()}


def placement(member: str, now_ms: int) -> tuple[str, int, str, int]:
    """Where a row's entry goes: (window suffix, window number, entry, score in the window)."""
    ns, kind, name, code, _reason, _msg, ltt, _ = rows.head_to_time(member)
    entry = f"{ns}\x00{KIND_CODES.get(kind, kind)}\x00{name}\x00{code}"
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


def queue_write(
    tx: Any,
    cluster: str,
    removed: Iterable[str],
    added: Iterable[str],
    now_ms: int,
    building: bool = False,
) -> None:
    """Remove the entries of `removed` and add those of `added` (in a MULTI). An untimed
    entry both removed and added (its row rewritten, its status unchanged) is left as it is,
    with its score: when its status last changed; unless `building` the index from scratch."""
    gone: dict[str, list[str]] = {}
    for m in removed:
        suffix, entry = where(m)
        gone.setdefault(suffix, []).append(entry)
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
        gone = {w: es for w, es in gone.items() if es}
        new = {w: es for w, es in new.items() if es}
    for suffix, entries in gone.items():
        tx.zrem(keys.timeline_window(cluster, suffix), *entries)
    for suffix, scored in new.items():
        tx.zadd(keys.timeline_window(cluster, suffix), scored)
    for suffix in sorted({*gone, *new}):
        tx.hincrby(keys.timeline(cluster), suffix, 1)


def windows_of(members: Iterable[str]) -> set[str]:
    """The window suffixes that hold the entries of `members`."""
    return {where(m)[0] for m in members}


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
