"""The name index of a cluster: object name -> the `namespace NUL kind NUL` of each row so named.

A `name` substring filter matches against the (few) distinct names instead of every row, then
reads exactly the matching rows (common.index.read.lua.NAMED). The collector's full sync
(common.index.write.store) and the watcher (common.index.write.store_events) keep it in the same MULTI/EXEC as the rows.
A value lists its entries sorted, so equal indexes compare equal as strings. The field "" holds
every name NUL-delimited (`\0a\0b\0`, lower-cased): one plain search of it finds the matching names without
walking the hash (which costs as much as the rows when most names are distinct).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from common.index.rows import SEP, name_entry

DICT = ""  # the field holding all names (object names are never empty)


split = name_entry  # (name, entry) of an encoded row: the entry is `namespace NUL kind NUL`


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
    index = {name: join(es) for name, es in by_name.items()}
    if index:
        index[DICT] = dictionary(index)
    return index


def dictionary(names: Iterable[str]) -> str:
    """The DICT value of a set of names, lower-cased for case-insensitive search: a name with
    upper-case letters is stored as `lower \1 name` (Kubernetes names rarely have any)."""
    return SEP + "".join(_word(n) + SEP for n in sorted(names, key=str.encode))


def _word(name: str) -> str:
    low = name.lower()
    return name if low == name else f"{low}\x01{name}"


def names_in(value: str) -> set[str]:
    """The names a DICT value holds."""
    return {w.rsplit("\x01", 1)[-1] for w in value.split(SEP) if w}


def diff(old: Mapping[str, str], new: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Fields to set and fields to delete to turn `old` into `new`."""
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    return changed, [k for k in old if k not in new]


def unchanged(removed: Iterable[str], added: Iterable[str]) -> bool:
    """Whether removing `removed` and adding `added` leaves every entry as it was: rows
    rewritten in place (a message, a status: most watch events) keep their names and entries."""
    return sorted(map(split, removed)) == sorted(map(split, added))


def update(
    old: Mapping[str, str],
    removed: Iterable[str],
    added: Iterable[str],
    dictionary_value: Callable[[], str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """Fields to set and delete after `removed` then `added` rows, given the affected fields'
    stored values `old` (missing = no entries). The stored DICT is `old[DICT]` when there, else
    what `dictionary_value` returns, asked only when a name appears or goes (a row updated in
    place keeps its name; the dictionary is every name of the cluster)."""
    removed, added = list(removed), list(added)
    if unchanged(removed, added):
        return {}, []
    current = {name: entries(v) for name, v in old.items() if name != DICT}
    for m in removed:
        name, entry = split(m)
        current.setdefault(name, set()).discard(entry)
    for m in added:
        name, entry = split(m)
        current.setdefault(name, set()).add(entry)
    new = {name: join(es) for name, es in current.items() if es}
    gone = [name for name in current if name in old and name not in new]
    appeared = [name for name in new if name not in old]
    if gone or appeared:
        stored = old.get(DICT)
        if stored is None and dictionary_value is not None:
            stored = dictionary_value()
        names = (names_in(stored or "") - set(gone)) | set(appeared)
        if names:
            new[DICT] = dictionary(names)
        elif stored:
            gone.append(DICT)
    changed, _ = diff(old, new)
    return changed, gone
