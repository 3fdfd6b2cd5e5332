"""Each cluster's change feed: every row change the one writer makes, recorded in the same
transaction as the row, for `GET /api/v1/watch` (query.watch_hub reads it).

The feed is a Redis stream (`keys.feed`, under the cluster's hash tag). An entry's id is
`<generation>-<n>`: the write's new generation (the writer INCRs it in the same transaction)
and the change's place in that write, so ids only grow, and a list read at generation `g` is
exactly the feed up to `g-<any>`. Fields: `n` the new member (ADDED, MODIFIED), `o` the old
member (MODIFIED, DELETED: a filtered watch tells a row leaving its filter as DELETED with the
state it had, as Kubernetes' cacher does). The stream is capped at
`max_entries` (exact MAXLEN); a position whose next entry is no longer kept answers 410 Expired.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis

from common.index import keys, rows
from common.redis_client import text as reply_text

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
DEFAULT_MAX = 256


@dataclass(frozen=True)
class Position:
    """A place in one cluster's feed: after every entry up to `(gen, seq)`; `seq` None means
    after all of generation `gen` (a list's position)."""

    gen: int
    seq: int | None = None

    def after(self, entry_id: tuple[int, int]) -> bool:
        """True when the entry is past this position (not yet seen from here)."""
        if entry_id[0] != self.gen:
            return entry_id[0] > self.gen
        return self.seq is not None and entry_id[1] > self.seq

    def next_id(self) -> tuple[int, int]:
        """The id of the entry right after this position, if it was written."""
        return (self.gen + 1, 0) if self.seq is None else (self.gen, self.seq + 1)

    def start(self) -> str:
        """The exclusive XRANGE start just past this position."""
        if self.seq is None:
            return f"{self.gen + 1}-0"
        return f"({self.gen}-{self.seq}"

    def behind(self, other: Position) -> bool:
        """True when `other` is strictly past this position."""
        mine = (self.gen, float("inf") if self.seq is None else self.seq)
        theirs = (other.gen, float("inf") if other.seq is None else other.seq)
        return theirs > mine


@dataclass(frozen=True)
class Change:
    """One feed entry, decoded."""

    cluster: str
    entry: tuple[int, int]
    type: str
    member: bytes
    """The row as it is now (ADDED, MODIFIED) or was last (DELETED)."""
    before: bytes | None
    """MODIFIED: the old member; else None."""

    @property
    def position(self) -> Position:
        return Position(*self.entry)


def changes(removed: Iterable[str], added: Iterable[str]) -> list[dict[str, str]]:
    """A write's feed entries (fields), ordered by identity: the rows removed and added, paired
    by identity into MODIFIED."""
    old = {rows.identity(m): m for m in removed}
    new = {rows.identity(m): m for m in added}
    out = []
    for ident in sorted(old.keys() | new.keys()):
        o, n = old.get(ident), new.get(ident)
        if n is None:
            out.append({"o": o or ""})
        elif o is None:
            out.append({"n": n})
        elif o != n:
            out.append({"n": n, "o": o})
    return out


_XADD_ALL = """
local key, maxlen, gen = KEYS[1], ARGV[1], ARGV[2]
local seq, skipped, i = tonumber(ARGV[3]), tonumber(ARGV[4]), 5
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local args = {key, 'MAXLEN', maxlen, gen .. '-' .. seq}
  for j = 1, n do args[4 + j] = ARGV[i + j] end
  redis.call('XADD', unpack(args))
  seq, i = seq + 1, i + n + 1
end
if skipped > 0 and redis.REDIS_VERSION_NUM then
  local info, added = redis.call('XINFO', 'STREAM', key), 0
  for j = 1, #info, 2 do
    if info[j] == 'entries-added' then added = info[j + 1] end
  end
  redis.call('XSETID', key, gen .. '-' .. (seq - 1), 'ENTRIESADDED', added + skipped)
end
return seq
"""
"""`XADD key MAXLEN <max> <gen>-<seq> field value ...` for each entry (ARGV: max, gen, first
seq, the entries skipped, then per entry its field/value count and pairs): the same commands as
one, so a full sync's entries cost one command to send and one reply to parse. Entries skipped
(the write's own later entries would have trimmed them) are counted in the stream's
entries-added (Redis 7's `XSETID ... ENTRIESADDED`; Redis 6 keeps no such count), so the
stream ends as if every entry had been added: its length, first and last entries and counters
are the same (trimming leaves max-deleted-entry-id alone)."""
XADD_CHUNK = 1000  # entries per EVAL


def queue_write(
    tx: Any, cluster: str, entries: list[dict[str, str]], gen: int, max_entries: int
) -> None:
    """XADD the entries as `<gen>-0`, `<gen>-1`, ... (in the writer's MULTI), capped: the stream
    ends exactly as if each entry had been its own XADD with MAXLEN (test_feed.py). Only the
    last `max_entries` are sent: a first sync of an L cluster has ~7,800 entries, and sending
    the ones its own later entries trim cost the collector a third of its Redis arguments."""
    key = keys.feed(cluster)
    skipped = len(entries) - max_entries if 0 < max_entries < len(entries) else 0
    for start in range(skipped, len(entries), XADD_CHUNK):
        end = min(start + XADD_CHUNK, len(entries))
        args: list[Any] = [max_entries, gen, start, skipped if end == len(entries) else 0]
        for fields in entries[start:end]:
            args.append(2 * len(fields))
            for pair in fields.items():
                args.extend(pair)
        tx.execute_command("EVAL", _XADD_ALL, 1, key, *args)


def parse_id(raw: bytes | str) -> tuple[int, int]:
    text = reply_text(raw)
    gen, _, seq = text.partition("-")
    return int(gen), int(seq or 0)


def decode(cluster: str, entry_id: Any, fields: dict[Any, Any]) -> Change:
    """A stream entry as read by XRANGE/XREAD (bytes keys)."""
    got = {reply_text(k): v for k, v in fields.items()}
    b = {k: (v.encode() if isinstance(v, str) else v) for k, v in got.items()}
    if "n" not in b:
        return Change(cluster, parse_id(entry_id), DELETED, b.get("o", b""), None)
    if "o" in b:
        return Change(cluster, parse_id(entry_id), MODIFIED, b["n"], b["o"])
    return Change(cluster, parse_id(entry_id), ADDED, b["n"], None)


def expired(r: Any, cluster: str, pos: Position) -> bool:
    """True when entries past `pos` may have been trimmed from the feed: some were trimmed
    (more added than kept) and the oldest kept is not the one right after `pos` or before it.
    (A generation that wrote nothing can make this answer True for nothing lost: a 410 and a
    list more, never a gap.)"""
    try:
        info = r.xinfo_stream(keys.feed(cluster))
    except redis.ResponseError as e:  # no such key: nothing was ever written or trimmed
        if "no such key" in str(e).lower():
            return False
        raise
    got = {reply_text(k): v for k, v in info.items()}
    added = got.get("entries-added")  # Redis 7; before, judged by the oldest entry alone
    if added is not None and int(added) <= int(got.get("length", 0)):
        return False  # nothing trimmed
    first = got.get("first-entry")
    if not first:
        return True
    oldest = parse_id(first[0])
    nxt = (pos.gen + 1, 0) if pos.seq is None else (pos.gen, pos.seq + 1)
    return oldest > nxt


def read_after(r: Any, cluster: str, pos: Position, upto: str = "+") -> list[Change]:
    """The feed's entries past `pos` (up to `upto`, inclusive)."""
    got = r.xrange(keys.feed(cluster), min=pos.start(), max=upto)
    return [decode(cluster, i, f) for i, f in got]


def last(r: Any, cluster: str) -> Position:
    """The position after the feed's newest entry (generation 0 for an empty feed)."""
    got = r.xrevrange(keys.feed(cluster), count=1)
    if not got:
        return Position(0)
    return Position(*parse_id(got[0][0]))
