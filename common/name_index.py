"""The name index of a cluster: object name -> the `namespace NUL kind NUL` of each row so named.

A `name` substring filter matches against the (few) distinct names instead of every row, then
reads exactly the matching rows (common.reader_lua.NAMED). The collector's full sync
(common.store) and the watcher (common.store_events) keep it in the same MULTI/EXEC as the rows.
A value lists its entries sorted, so equal indexes compare equal as strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from common.rows import SEP


def split(member: str) -> tuple[str, str]:
    """(name, entry) of an encoded row: the entry is `namespace NUL kind NUL`."""
    ns, kind, name, _ = member.split(SEP, 3)
    return name, f"{ns}{SEP}{kind}{SEP}"


def entries(value: str) -> set[str]:
    """The entries of one stored value."""
    parts = value.split(SEP)
    return {f"{ns}{SEP}{kind}{SEP}" for ns, kind in zip(parts[0::2], parts[1::2], strict=False)}


def join(items: Iterable[str]) -> str:
    """A stored value from entries (sorted, so a value is canonical)."""
    return "".join(sorted(items, key=str.encode))


def build(members: Iterable[str]) -> dict[str, str]:
    """The whole index of a snapshot of encoded rows."""
    by_name: dict[str, set[str]] = {}
    for m in members:
        name, entry = split(m)
        by_name.setdefault(name, set()).add(entry)
    return {name: join(es) for name, es in by_name.items()}


def diff(old: Mapping[str, str], new: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Fields to set and fields to delete to turn `old` into `new`."""
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    return changed, [k for k in old if k not in new]


def update(
    old: Mapping[str, str], removed: Iterable[str], added: Iterable[str]
) -> tuple[dict[str, str], list[str]]:
    """Fields to set and delete after `removed` then `added` rows, given the affected fields'
    stored values `old` (missing = no entries)."""
    current = {name: entries(v) for name, v in old.items()}
    for m in removed:
        name, entry = split(m)
        current.setdefault(name, set()).discard(entry)
    for m in added:
        name, entry = split(m)
        current.setdefault(name, set()).add(entry)
    new = {name: join(es) for name, es in current.items() if es}
    changed, _ = diff(old, new)
    return changed, [name for name in current if name in old and name not in new]
