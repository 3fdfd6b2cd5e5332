"""One bounded, generation-checked memo: what the readers remember between requests.

A `Memo` is a thread-safe LRU map bounded by the total weight of its entries (1 each unless
told: a weight in entries or rows bounds memory rather than keys). An entry carries the
generation it was computed at (a cluster's generation, a list of them, a window's version, a
grants hash: anything compared with `==`), and a lookup at another generation is a miss.

A key may hold the `id()` of an object that cannot be hashed (a caller's access): the entry then
holds that object (`owner`, or a tuple of them) and answers only for the very same one, so the
id cannot be reused while the entry lives, nor match another object after it was dropped.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_Entry = tuple[Any, Any, Any, int]
"""(owner, generation, value, weight)."""


class Memo(Generic[K, V]):
    """A bounded LRU map of values computed at a generation (one per cache; thread-safe:
    writes hold a lock; reads take none, each OrderedDict call being atomic under the GIL as
    the plain dicts these memos replaced were). Values are never None: `get` answers None for
    a miss."""

    __slots__ = ("_data", "_lock", "_weight", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        """The most total weight kept; the least recently used entries go first."""
        self._data: OrderedDict[K, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._weight = 0

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
        return e[1], e[2]

    def put(self, key: K, value: V, gen: Any = None, owner: Any = None, weight: int = 1) -> None:
        """Remember `value` for `key`, computed at `gen` for `owner`; the least recently used
        entries are dropped while the total weight is above `size`."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._weight -= old[3]
            self._data[key] = (owner, gen, value, weight)
            self._weight += weight
            self._shrink()

    def grow(self, key: K, weight: int) -> None:
        """Add `weight` to an entry whose value grew in place, as a use of it (nothing when it
        was dropped)."""
        with self._lock:
            e = self._data.get(key)
            if e is not None:
                self._data[key] = (e[0], e[1], e[2], e[3] + weight)
                self._data.move_to_end(key)
                self._weight += weight
                self._shrink()

    def pop(self, key: K) -> None:
        """Forget `key`."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._weight -= old[3]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def weight(self) -> int:
        """The total weight of the entries kept."""
        return self._weight

    def _shrink(self) -> None:
        data = self._data
        while self._weight > self.size and data:
            _key, e = data.popitem(last=False)
            self._weight -= e[3]


def _same(a: Any, b: Any) -> bool:
    """Whether two owners are the same object, or tuples of the same objects."""
    if type(a) is not tuple or type(b) is not tuple or len(a) != len(b):
        return a is b
    return all(x is y for x, y in zip(a, b, strict=True))
