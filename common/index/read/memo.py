"""One bounded, generation-checked memo: what the readers remember between requests.

A `Memo` is a thread-safe LRU map bounded by the total weight of its entries (1 each unless
told: a weight in entries or rows bounds memory rather than keys). A named memo is also
bounded in bytes once the process has a memo budget (`set_budget`, the query service's
`FLEETSCOPE_QUERY_MEMO_MIB`): its share of the budget (`SHARES`), its entries' sizes estimated
when they are stored (`approx_size`). An entry carries the
generation it was computed at (a cluster's generation, a list of them, a window's version, a
grants hash: anything compared with `==`), and a lookup at another generation is a miss.

A key may hold the `id()` of an object that cannot be hashed (a caller's access): the entry then
holds that object (`owner`, or a tuple of them) and answers only for the very same one, so the
id cannot be reused while the entry lives, nor match another object after it was dropped.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_Entry = tuple[Any, Any, Any, int, int, int]
"""(owner, generation, value, weight, estimated bytes: 0 unless the memo is byte-bounded, the
sweep round of its last use)."""

SHARES: dict[str, float] = {
    # What each named memo may hold of the process's budget. Measured at fleet L (200
    # clusters, 1.57 M rows) with every cap reached, per entry: a caller's group facets
    # counts ~7.9 MB; a facets answer 0.5-0.8 MB; a cluster's namespace counts ~280 KB; a
    # (cluster, caller) table ~46 KB; a list page of 50 ~5 KB (docs/operations.md, "Memory of
    # a query worker"). The shares add up to 1. `body.facets` and `groups.texts` are the query
    # service's encoded answers (query/body.py, query/groups.py).
    "group_facets.states": 0.12,
    "tally.tables": 0.07,
    "facets.answers": 0.04,
    "facets.counted": 0.03,
    "facets.sums": 0.05,
    "facets.ns": 0.04,
    "facets.parts": 0.04,
    "facets.raw": 0.04,
    "groups.pages": 0.02,
    "groups.tallies": 0.04,
    "groups.keys": 0.01,
    "groups.codes": 0.03,
    "groups.nsvalues": 0.01,
    "groups.nsmembers": 0.02,
    "groups.runs": 0.04,
    "groups.shares": 0.05,
    "groups.changes": 0.005,
    "groups.walks": 0.005,
    "timesort.windows": 0.07,
    "timesort.segments": 0.05,
    "timesort.indexes": 0.02,
    "timesort.members": 0.01,
    "timesort.visible": 0.01,
    "timesort.pages": 0.01,
    "reader.pages": 0.05,
    "reader.visible": 0.01,
    "access.cache": 0.05,
    "body.facets": 0.04,
    "groups.texts": 0.02,
}
"""Shares of the memo budget by memo name; a memo not named here is bounded by its weight only
(the small ones: plans, directories, keys, serials)."""

_budget = [0]
"""The process's memo budget in bytes; 0: memos are bounded by their weights only."""
_round = [0]
"""The sweep round (`sweep_idle`): each entry remembers the round of its last use."""
_memos: weakref.WeakSet[Idle] = weakref.WeakSet()
"""Every memo of the process, and every other cache `track`ed, for `sweep_idle`."""
_sweeps: list[Callable[[], None]] = []
"""Other caches' clears, run by every `sweep_idle` (`on_sweep`)."""
_SAMPLE = 8
"""Items of a container measured to estimate the rest (`approx_size`)."""


def set_budget(mib: float) -> None:
    """Bound every named memo of this process, from now on, by its share of `mib` MiB (0: by
    its weight only). Called once at start-up (query.app), before requests."""
    _budget[0] = int(mib * 2**20)


def budget_bytes() -> int:
    return _budget[0]


def approx_size(value: Any, depth: int = 0) -> int:
    """Estimated bytes held by `value`: its own size plus what it refers to, containers measured
    on their first few items and the rest assumed alike (cheap whatever the size; objects shared
    between entries are counted in each)."""
    size = sys.getsizeof(value)
    if depth > 4:
        return size
    t = type(value)
    if t in _FLAT:
        return size
    if isinstance(value, dict):  # OrderedDict too
        n = len(value)
        if n:
            part = itertools.islice(value.items(), _SAMPLE)
            seen = sum(approx_size(k, depth + 1) + approx_size(v, depth + 1) for k, v in part)
            size += seen * n // min(n, _SAMPLE)
        return size
    if isinstance(value, list | tuple | set | frozenset):
        n = len(value)
        if n:
            part = itertools.islice(value, _SAMPLE)
            size += sum(approx_size(x, depth + 1) for x in part) * n // min(n, _SAMPLE)
        return size
    fields = getattr(value, "__dict__", None)
    if fields is not None:
        size += approx_size(fields, depth + 1)
    for cls in t.__mro__:
        for name in cls.__dict__.get("__slots__", ()):
            size += approx_size(getattr(value, name, None), depth + 1)
    return size


_FLAT = frozenset({bytes, str, int, float, bool, type(None), array, bytearray, memoryview})


class Idle(Protocol):
    """What `sweep_idle` calls: drop the entries last used before sweep round `before`, and say
    how many went."""

    def drop_idle(self, before: int) -> int: ...


class Memo(Generic[K, V]):
    """A bounded LRU map of values computed at a generation (one per cache; thread-safe:
    writes hold a lock; reads take none, each OrderedDict call being atomic under the GIL as
    the plain dicts these memos replaced were). Values are never None: `get` answers None for
    a miss."""

    __slots__ = ("__weakref__", "_bytes", "_data", "_lock", "_weight", "name", "share", "size")

    def __init__(self, size: int, name: str = "") -> None:
        self.size = size
        """The most total weight kept; the least recently used entries go first."""
        self.name = name
        self.share = SHARES.get(name, 0.0)
        """Its share of the process's memo budget (0: bounded by weight only)."""
        self._data: OrderedDict[K, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._weight = 0
        self._bytes = 0
        _memos.add(self)

    def get(self, key: K, gen: Any = None, owner: Any = None) -> V | None:
        """The value remembered for `key` at `gen` for `owner`; None when there is none, or it
        was computed at another generation or for another owner."""
        data = self._data
        e = data.get(key)
        if e is None or not (e[0] is owner or _same(e[0], owner)):
            return None
        if e[1] is not gen and e[1] != gen:
            return None
        # used last; not contextlib.suppress: a context manager costs more than the lookup
        try:  # noqa: SIM105
            data.move_to_end(key)
        except KeyError:  # dropped by another thread meanwhile
            pass
        if e[5] != _round[0]:
            self._used(key, e)
        value: V = e[2]
        return value

    def peek(self, key: K, owner: Any = None) -> tuple[Any, V] | None:
        """(generation, value) remembered for `key` and `owner`, whatever the generation: for
        callers that must read the generations the value depends on first, or that move an
        older value forward."""
        data = self._data
        e = data.get(key)
        if e is None or not (e[0] is owner or _same(e[0], owner)):
            return None
        try:  # noqa: SIM105  (as in `get`)
            data.move_to_end(key)
        except KeyError:
            pass
        if e[5] != _round[0]:
            self._used(key, e)
        return e[1], e[2]

    def _used(self, key: K, e: _Entry) -> None:
        """Mark `e` used in this sweep round (once per round and entry: the lookups take no
        lock, this does), unless it was replaced or dropped meanwhile."""
        with self._lock:
            if self._data.get(key) is e:
                self._data[key] = (*e[:5], _round[0])

    def put(self, key: K, value: V, gen: Any = None, owner: Any = None, weight: int = 1) -> None:
        """Remember `value` for `key`, computed at `gen` for `owner`; the least recently used
        entries are dropped while the total weight is above `size`."""
        nbytes = approx_size(value) if self.share and _budget[0] else 0
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._weight -= old[3]
                self._bytes -= old[4]
            self._data[key] = (owner, gen, value, weight, nbytes, _round[0])
            self._weight += weight
            self._bytes += nbytes
            self._shrink()

    def grow(self, key: K, weight: int) -> None:
        """Add `weight` to an entry whose value grew in place, as a use of it (nothing when it
        was dropped)."""
        with self._lock:
            e = self._data.get(key)
            if e is not None:
                more = e[4] * weight // e[3] if e[3] > 0 else 0  # as much again per weight
                self._data[key] = (e[0], e[1], e[2], e[3] + weight, e[4] + more, _round[0])
                self._data.move_to_end(key)
                self._weight += weight
                self._bytes += more
                self._shrink()

    def pop(self, key: K) -> None:
        """Forget `key`."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._weight -= old[3]
                self._bytes -= old[4]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._weight = 0
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def weight(self) -> int:
        """The total weight of the entries kept."""
        return self._weight

    @property
    def nbytes(self) -> int:
        """The estimated bytes of the entries kept (0 unless bounded in bytes)."""
        return self._bytes

    @property
    def max_bytes(self) -> int:
        """The most estimated bytes kept: its share of the process's budget (0: no bound)."""
        return int(self.share * _budget[0])

    def drop_idle(self, before: int) -> int:
        """Drop the entries last used before sweep round `before` (the least recently used come
        first, so the scan stops at the first one used since); how many were dropped."""
        dropped = 0
        with self._lock:  # writers wait; readers only move entries to the end meanwhile
            data = self._data
            while data:
                key, e = data.popitem(last=False)  # atomic: no iterator a reader could upset
                if e[5] >= before:
                    data[key] = e
                    data.move_to_end(key, last=False)  # back in front, where it was
                    break
                self._weight -= e[3]
                self._bytes -= e[4]
                dropped += 1
        return dropped

    def _shrink(self) -> None:
        data = self._data
        while self._weight > self.size and data:
            _key, e = data.popitem(last=False)
            self._weight -= e[3]
            self._bytes -= e[4]
        most = self.max_bytes
        # the entry just stored stays even alone over the share: it was worth computing
        while most and self._bytes > most and len(data) > 1:
            _key, e = data.popitem(last=False)
            self._weight -= e[3]
            self._bytes -= e[4]


def sweep_idle() -> int:
    """Start a new sweep round: drop every memo's entries not used in the last whole round (so
    an entry goes after one to two sweep periods unused), and clear the caches registered with
    `on_sweep`. Called every `FLEETSCOPE_QUERY_MEMO_IDLE_S / 2` by the housekeeping thread of
    every query process (query.housekeeping: each worker and the stream process), so a
    process's memos follow what its callers asked lately: under writes most entries are of
    generations no request will ask again, and the memory they held is reused rather than
    added to. Returns the entries dropped."""
    _round[0] += 1
    dropped = sum(m.drop_idle(_round[0] - 1) for m in list(_memos))
    for clear in _sweeps:
        clear()
    return dropped


def track(cache: Idle) -> None:
    """Have `sweep_idle` call `cache.drop_idle` (held weakly: a cache that goes is forgotten),
    for a cache that must do more than forget an idle entry (close a leaf client's
    connections). Such a cache stamps each use with `sweep_round()`."""
    _memos.add(cache)


def held_bytes() -> int:
    """The estimated bytes every memo of the process holds (0 without a budget: sizes are
    estimated only under one, `set_budget`)."""
    return sum(m.nbytes for m in list(_memos) if isinstance(m, Memo))


def sweep_round() -> int:
    """The current sweep round: what a `track`ed cache stamps a use of an entry with."""
    return _round[0]


def on_sweep(clear: Callable[[], None]) -> None:
    """Run `clear` at every `sweep_idle` (once however often it is registered): for caches
    outside the memos (functools.lru_cache's `cache_clear`, a plain dict's `clear`) that would
    otherwise fill up to their bound however seldom their entries are asked again."""
    if clear not in _sweeps:
        _sweeps.append(clear)


def _same(a: Any, b: Any) -> bool:
    """Whether two owners are the same object, or tuples of the same objects."""
    if type(a) is not tuple or type(b) is not tuple or len(a) != len(b):
        return a is b
    return all(x is y for x, y in zip(a, b, strict=True))


class Flights:
    """One computation per key at a time (thread-safe): a request that misses its memo while
    another request of the same key is computing waits for that one and then looks again,
    instead of computing the same answer beside it. After a write every concurrent request
    for a popular page misses at once: without this, a worker's threads each walked it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Any, list[Any]] = {}
        """key -> [its lock, callers holding or waiting for it]."""
        self.waited = 0
        """Callers that found the key being computed: for tests."""

    def one(self, key: Hashable) -> _Flight:
        return _Flight(self, key)


class _Flight:
    __slots__ = ("flights", "key", "slot")

    def __init__(self, flights: Flights, key: Hashable) -> None:
        self.flights, self.key = flights, key
        self.slot: list[Any] = []

    def __enter__(self) -> _Flight:
        f = self.flights
        with f._lock:
            slot = f._running.get(self.key)
            if slot is None:
                slot = f._running[self.key] = [threading.Lock(), 0]
            elif slot[1]:
                f.waited += 1
            slot[1] += 1
        self.slot = slot
        slot[0].acquire()
        return self

    def others(self) -> int:
        """Callers of the same key waiting behind this one now. Each read its generations
        before this one reads any again: an answer made from generations read after this call
        is as new as every one of theirs wants, so one computation answers them all instead of
        each making its own in turn (under writes each waiter's generations are newer than
        the answer it waited for). Worth a read of the generations where the answer costs
        more than it (a group page), not where it costs about as much (a time page after
        message updates)."""
        with self.flights._lock:
            return int(self.slot[1]) - 1

    def __exit__(self, *exc: object) -> None:
        f, slot = self.flights, self.slot
        slot[0].release()
        with f._lock:
            slot[1] -= 1
            if not slot[1]:
                del f._running[self.key]


def not_older(held: Any, wanted: Any) -> bool:
    """Whether generations `held` (a list, as read: bytes or None) are each at least those of
    `wanted`: an answer computed at them is as new as one at `wanted` would be, or newer."""
    if held is None or len(held) != len(wanted):
        return False
    return all(int(h or 0) >= int(w or 0) for h, w in zip(held, wanted, strict=True))


class Recent(Generic[K, V]):
    """Per key, the values made last (at most `per_key`, newest first), held weakly: what a
    new memo entry may be seeded from (a caller's facets sums and group counts, made again
    for a new access map, start from the last ones of the same filters). At most `keys` keys:
    beyond them, the keys whose values all went are forgotten, or every key if none went.
    Not thread-safe: called under its owner's lock."""

    def __init__(self, per_key: int, keys: int) -> None:
        self.per_key, self.keys = per_key, keys
        self._refs: dict[K, list[weakref.ref[V]]] = {}

    def push(self, key: K, value: V) -> list[V]:
        """Put `value` first for `key`; returns the values before it that are still alive
        (held strongly: the caller may drop the last other reference meanwhile)."""
        live = [v for ref in self._refs.get(key, ()) if (v := ref()) is not None]
        if key not in self._refs and len(self._refs) >= self.keys:
            kept = {k: refs for k, refs in self._refs.items() if any(r() for r in refs)}
            self._refs = kept if len(kept) < self.keys else {}
        self._refs[key] = [weakref.ref(v) for v in [value, *live[: self.per_key - 1]]]
        return live
