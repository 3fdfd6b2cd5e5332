"""The readers' memo (common.index.read.memo): generation checks, owners held and compared by
identity, least-recently-used eviction by weight, and concurrent use from several threads."""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from common.index.read import memo as memo_mod
from common.index.read.memo import Memo


class Owner:
    """Stands for a caller's access: unhashable, compared by identity."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Owner)  # equal to every other: identity must decide


def test_a_lookup_at_another_generation_is_a_miss() -> None:
    memo: Memo[str, str] = Memo(8)
    memo.put("c1", "value", gen=[b"3", b"7"])
    assert memo.get("c1", [b"3", b"7"]) == "value"
    assert memo.get("c1", [b"3", b"8"]) is None
    assert memo.get("c1") is None, "no generation is not any generation"
    assert memo.get("c2", [b"3", b"7"]) is None
    memo.put("plain", "v")
    assert memo.get("plain") == "v"


def test_peek_answers_whatever_the_generation() -> None:
    memo: Memo[str, str] = Memo(8)
    assert memo.peek("c1") is None
    memo.put("c1", "old", gen=5)
    assert memo.peek("c1") == (5, "old")
    memo.put("c1", "new", gen=6)
    assert memo.peek("c1") == (6, "new")
    assert memo.get("c1", 5) is None


def test_an_entry_answers_only_its_own_owner() -> None:
    a, b = Owner(), Owner()
    assert a == b
    memo: Memo[tuple[int, str], str] = Memo(8)
    memo.put((id(a), "f"), "for a", gen=1, owner=a)
    assert memo.get((id(a), "f"), 1, a) == "for a"
    assert memo.get((id(a), "f"), 1, b) is None, "an equal object is not the owner"
    assert memo.get((id(a), "f"), 1) is None
    assert memo.peek((id(a), "f"), b) is None
    pair = (a, b)
    memo.put(("both", "f"), "for a and b", owner=pair)
    assert memo.get(("both", "f"), owner=(a, b)) == "for a and b", "a new tuple, same objects"
    assert memo.get(("both", "f"), owner=(b, a)) is None
    assert memo.get(("both", "f"), owner=(a, b, a)) is None
    assert memo.get(("both", "f"), owner=(a, Owner())) is None


def test_the_owner_lives_as_long_as_its_entry() -> None:
    """An id in a key cannot be reused while the entry holds its object; once the entry is
    gone, so is the object."""
    memo: Memo[tuple[int, str], str] = Memo(1)
    a = Owner()
    key, alive = (id(a), "f"), weakref.ref(a)
    memo.put(key, "v", owner=a)
    del a
    gc.collect()
    assert alive() is not None
    assert memo.get(key, owner=alive()) == "v"
    memo.put((0, "other"), "w")  # evicts the first entry (size 1)
    gc.collect()
    assert alive() is None
    assert memo.get(key, owner=Owner()) is None


def test_the_least_recently_used_entries_go_first() -> None:
    memo: Memo[str, int] = Memo(3)
    for i, k in enumerate("abc"):
        memo.put(k, i)
    assert memo.get("a") == 0  # a used: b is now the oldest
    memo.put("d", 3)
    assert [k for k in "abcd" if memo.get(k) is not None] == ["a", "c", "d"]
    assert memo.peek("c") is not None  # a peek counts as a use too
    memo.put("e", 4)
    assert memo.get("a") is None and memo.get("c") == 2
    memo.put("c", 22)  # replacing an entry keeps one
    assert len(memo) == 3 and memo.weight == 3


def test_a_miss_does_not_count_as_a_use() -> None:
    memo: Memo[str, int] = Memo(2)
    memo.put("a", 1, gen=1)
    memo.put("b", 2, gen=1)
    assert memo.get("a", 2) is None
    memo.put("c", 3, gen=1)
    assert memo.peek("a") is None and memo.get("b", 1) == 2


def test_weights_bound_the_memo() -> None:
    memo: Memo[str, list[int]] = Memo(10)
    memo.put("a", [1] * 4, weight=4)
    memo.put("b", [1] * 4, weight=4)
    assert memo.weight == 8 and len(memo) == 2
    memo.put("c", [1] * 3, weight=3)  # 11: a goes
    assert memo.get("a") is None and memo.weight == 7
    memo.grow("b", 4)  # b grew in place: 11, c is now the oldest
    assert memo.get("c") is None and memo.weight == 8
    memo.grow("gone", 5)
    assert memo.weight == 8
    memo.put("huge", [1] * 11, weight=11)  # heavier than the bound: kept by nothing
    assert len(memo) == 0 and memo.weight == 0


def test_pop_and_clear() -> None:
    memo: Memo[str, int] = Memo(10)
    memo.put("a", 1, weight=2)
    memo.put("b", 2, weight=3)
    memo.pop("a")
    memo.pop("never")
    assert memo.get("a") is None and memo.weight == 3
    memo.clear()
    assert len(memo) == 0 and memo.weight == 0 and memo.get("b") is None


def test_a_size_of_zero_remembers_nothing() -> None:
    memo: Memo[str, int] = Memo(0)
    memo.put("a", 1)
    assert memo.get("a") is None and len(memo) == 0


def test_threads_share_one_memo() -> None:
    """Readers and writers at once (eviction on every write): no error, every hit is the
    value put for that key and generation, and the weight is the entries' own."""
    memo: Memo[int, tuple[int, int]] = Memo(64)
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def work(seed: int) -> None:
        try:
            start.wait()
            for i in range(20_000):
                k = (i * 7 + seed) % 200
                gen = k % 3
                got = memo.get(k, gen)
                if got is not None:
                    assert got == (k, gen)
                if i % 3 == 0:
                    memo.put(k, (k, gen), gen=gen, weight=1 + k % 2)
                elif i % 101 == 0:
                    memo.pop(k)
                elif i % 997 == 0:
                    memo.peek(k)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    weights = sum(1 + k % 2 for k in range(200) if memo.peek(k) is not None)
    assert memo.weight == weights <= 64


def test_sweeps_while_threads_read_and_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sweeps racing readers that move entries and writers that add them: no error, and the
    weight stays the entries' own."""
    monkeypatch.setattr(memo_mod, "_sweeps", [])
    memo: Memo[int, int] = Memo(500)
    errors: list[BaseException] = []
    done = threading.Event()

    def work(seed: int) -> None:
        try:
            for i in range(30_000):
                k = (i * 13 + seed) % 400
                if memo.get(k) is None:
                    memo.put(k, k, weight=1 + k % 3)
        except BaseException as e:  # reported below
            errors.append(e)

    def sweep() -> None:
        try:
            while not done.is_set():
                memo_mod.sweep_idle()
        except BaseException as e:
            errors.append(e)

    sweeper = threading.Thread(target=sweep)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    sweeper.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    sweeper.join()
    assert not errors
    assert memo.weight == sum(1 + k % 3 for k in range(400) if memo.peek(k) is not None)


# -- the memo budget: named memos bounded in bytes --------------------------------------------


@pytest.fixture
def budget() -> Iterator[Callable[[float], None]]:
    """Set this process's memo budget for one test, then put it back."""
    before = memo_mod.budget_bytes()
    yield memo_mod.set_budget
    memo_mod.set_budget(before / 2**20)


def test_a_budget_bounds_a_named_memo_by_its_share_in_bytes(
    budget: Callable[[float], None],
) -> None:
    budget(1)  # 1 MiB: facets.raw gets its share of it
    memo: Memo[int, bytes] = Memo(10_000, "facets.raw")
    assert memo.max_bytes == int(memo_mod.SHARES["facets.raw"] * 2**20)
    for i in range(20):
        memo.put(i, bytes(10_000))
    assert 0 < memo.nbytes <= memo.max_bytes
    assert len(memo) == memo.nbytes // memo_mod.approx_size(bytes(10_000))
    assert 4 <= len(memo) < 20
    assert memo.get(19) is not None and memo.get(0) is None, "the oldest went first"


def test_without_a_budget_the_weight_alone_bounds_it(budget: Callable[[float], None]) -> None:
    budget(0)
    memo: Memo[int, bytes] = Memo(10_000, "facets.raw")
    for i in range(20):
        memo.put(i, bytes(10_000))
    assert len(memo) == 20 and memo.nbytes == 0 and memo.max_bytes == 0


def test_an_unnamed_memo_has_no_share(budget: Callable[[float], None]) -> None:
    budget(1)
    memo: Memo[int, bytes] = Memo(10_000)
    for i in range(200):
        memo.put(i, bytes(10_000))
    assert len(memo) == 200 and memo.max_bytes == 0


def test_an_entry_over_the_share_is_kept_alone(budget: Callable[[float], None]) -> None:
    budget(1)
    memo: Memo[int, bytes] = Memo(10_000, "facets.raw")
    memo.put(1, bytes(1_000))
    memo.put(2, bytes(200_000))  # over the ~42 KB share by itself: computed, so kept
    assert memo.get(2) is not None and memo.get(1) is None and len(memo) == 1


def test_growing_an_entry_adds_bytes_at_its_rate(budget: Callable[[float], None]) -> None:
    budget(1)
    memo: Memo[str, list[bytes]] = Memo(10_000, "timesort.segments")
    value = [bytes(100) for _ in range(10)]
    memo.put("k", value, weight=10)
    before = memo.nbytes
    value.extend(bytes(100) for _ in range(10))
    memo.grow("k", 10)
    assert memo.nbytes == 2 * before
    memo.pop("k")
    assert memo.nbytes == 0 and memo.weight == 0


def _deep(o: Any, seen: set[int]) -> int:
    """Every byte, each object once (what approx_size estimates)."""
    if id(o) in seen:
        return 0
    seen.add(id(o))
    size = sys.getsizeof(o)
    if isinstance(o, dict):
        size += sum(_deep(k, seen) + _deep(v, seen) for k, v in o.items())
    elif isinstance(o, list | tuple | set | frozenset):
        size += sum(_deep(x, seen) for x in o)
    elif hasattr(o, "__dict__"):
        size += _deep(vars(o), seen)
    return size


@dataclasses.dataclass
class _Counts:
    by_ns: dict[str, int]
    ids: array[int]
    keys: list[bytes]


def test_approx_size_follows_what_a_value_holds() -> None:
    values: list[Any] = [
        {f"app-{i:04d}": f"{i:064d}" for i in range(5_000)},
        [(i, f"cluster-{i:03d}/ns/{i}".encode()) for i in range(20_000)],
        _Counts(
            {f"ns-{i}": i * 1_000_003 for i in range(3_000)},
            array("I", range(50_000)),
            [bytes(60) for _ in range(4_000)],
        ),
        frozenset(f"k{i}" for i in range(1_000)),
    ]
    for v in values:
        exact, approx = _deep(v, set()), memo_mod.approx_size(v)
        assert 0.8 * exact <= approx <= 1.25 * exact, (type(v).__name__, exact, approx)
    # a small value costs its own size, a big one is not walked whole: both are estimates
    assert memo_mod.approx_size(b"x" * 10) == sys.getsizeof(b"x" * 10)


def test_every_share_names_a_memo_of_the_query_readers() -> None:
    """The shares add up to at most the whole budget, and each names a memo the query service's
    readers hold (a renamed memo would silently lose its bound)."""
    import fakeredis

    from common.index.read.group_facets import GroupFacets
    from common.index.read.groups import GroupReader
    from common.index.read.reader import Reader
    from common.index.read.timesort import TimeReader
    from common.kinds.registry import load_registry
    from common.rbac.access import AccessResolver

    r = fakeredis.FakeRedis()
    registry = load_registry("")
    reader = Reader(r, registry.keys())
    held = [
        reader,
        GroupReader(reader),
        GroupFacets(reader),
        TimeReader(r),
        AccessResolver(r, registry),
    ]
    names: set[str] = set()

    def walk(o: Any, depth: int) -> None:
        if isinstance(o, Memo):
            names.add(o.name)
            return
        if depth > 2:
            return
        attrs = getattr(o, "__dict__", {})
        for v in attrs.values():
            walk(v, depth + 1)

    for o in held:
        walk(o, 0)
    from query import body, groups  # the query service's encoded answers

    names |= {body._facets.name, groups._texts.name}
    assert set(memo_mod.SHARES) <= names
    assert sum(memo_mod.SHARES.values()) <= 1.0 + 1e-9


def test_a_sweep_drops_what_was_not_used_for_a_whole_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memo_mod, "_sweeps", [])
    m: Memo[str, int] = Memo(100)
    m.put("old", 1, gen=1)
    m.put("used", 2, gen=1)
    m.put("peeked", 3, gen=1)
    memo_mod.sweep_idle()  # round 1 starts: everything was used in round 0, the last whole one
    assert len(m) == 3
    assert m.get("used", 1) == 2
    assert m.peek("peeked") == (1, 3)
    assert m.get("old", 2) is None  # a miss is no use
    m.put("new", 4, gen=1)
    memo_mod.sweep_idle()  # round 2: "old" was last used in round 0
    assert m.get("old", 1) is None and m.weight == 3
    assert [m.get(k, 1) for k in ("used", "peeked", "new")] == [2, 3, 4]
    memo_mod.sweep_idle()
    memo_mod.sweep_idle()  # two rounds with no use at all: nothing is left
    assert len(m) == 0 and m.weight == 0


def test_a_sweep_keeps_the_bytes_of_a_budgeted_memo_right(
    budget: Callable[[float], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memo_mod, "_sweeps", [])
    budget(1)
    m: Memo[int, bytes] = Memo(100, "reader.pages")
    m.put(1, b"x" * 1000)
    memo_mod.sweep_idle()
    m.put(2, b"y" * 1000)
    held = m.nbytes
    memo_mod.sweep_idle()
    assert len(m) == 1 and 0 < m.nbytes < held
    m.grow(2, 1)
    memo_mod.sweep_idle()
    assert len(m) == 1  # growing is a use
    memo_mod.sweep_idle()
    assert m.nbytes == 0


def test_a_sweep_clears_the_registered_caches_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo_mod, "_sweeps", [])
    cache: dict[str, int] = {"a": 1}
    memo_mod.on_sweep(cache.clear)
    memo_mod.on_sweep(cache.clear)  # registered twice: run once
    assert len(memo_mod._sweeps) == 1
    memo_mod.sweep_idle()
    assert cache == {}


def test_the_query_caches_outside_the_memos_are_swept() -> None:
    from common.index import rows
    from common.index.read import groups
    from query import body, scope

    for clear in (
        body._rows.clear,
        scope.iso.cache_clear,
        rows.clear_caches,
        groups._member.cache_clear,
        groups._decoded.cache_clear,
        groups._summed.cache_clear,
    ):
        assert clear in memo_mod._sweeps
    rows._iso("1700000000")
    rows.clear_caches()
    assert rows._iso.cache_info().currsize == 0


def test_flights_run_one_computation_per_key_and_let_other_keys_run() -> None:
    """Callers of one key take turns (the later ones find it running and wait); another key
    runs beside them."""
    from common.index.read.memo import Flights

    flights = Flights()
    inside: list[str] = []
    most = [0]
    lock = threading.Lock()
    entered = threading.Event()
    release = threading.Event()

    def run(key: str) -> None:
        with flights.one(key):
            with lock:
                inside.append(key)
                most[0] = max(most[0], inside.count("a"))
            entered.set()
            release.wait(10)
            with lock:
                inside.remove(key)

    first = threading.Thread(target=run, args=("a",))
    first.start()
    assert entered.wait(10)
    others = [threading.Thread(target=run, args=("a",)) for _ in range(3)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 10
    while flights.waited < 3 and time.monotonic() < deadline:
        time.sleep(0.001)  # polling a counter with a deadline, not sleeping for a race
    assert flights.waited == 3
    b = threading.Thread(target=run, args=("b",))
    b.start()
    deadline = time.monotonic() + 10
    while "b" not in inside and time.monotonic() < deadline:
        time.sleep(0.001)
    assert "b" in inside  # another key was not held up
    release.set()
    for t in (first, *others, b):
        t.join(10)
    assert most[0] == 1 and not inside and not flights._running


class _Value:
    """Something weakly referable, like the memos' sums and counts."""


def test_recent_keeps_the_last_values_per_key_newest_first_and_weakly() -> None:
    recent: memo_mod.Recent[str, _Value] = memo_mod.Recent(per_key=2, keys=8)
    a, b, c = _Value(), _Value(), _Value()
    assert recent.push("f", a) == []
    assert recent.push("f", b) == [a]
    assert recent.push("f", c) == [b, a]  # what was there before c, held strongly
    assert recent.push("g", _Value()) == []  # keys apart
    d = _Value()
    assert recent.push("f", d) == [c, b]  # two kept per key: a went
    del b, c
    gc.collect()
    assert recent.push("f", _Value()) == [d]  # the ones nothing else held went


def test_recent_forgets_keys_whose_values_all_went_beyond_its_bound() -> None:
    recent: memo_mod.Recent[int, _Value] = memo_mod.Recent(per_key=4, keys=3)
    held = [_Value(), _Value()]
    recent.push(0, held[0])
    recent.push(1, held[1])
    recent.push(2, _Value())  # nothing holds it
    gc.collect()
    recent.push(3, _Value())  # a fourth key: key 2's values all went, so key 2 goes
    assert recent.push(0, _Value()) == [held[0]] and recent.push(1, _Value()) == [held[1]]
    assert recent.push(2, _Value()) == []
    assert sorted(recent._refs) == [0, 1, 2]  # key 3's value went: forgotten for key 2
