"""The watcher's packed objects and tables (collector.watch.packed): what is unpacked is what
was packed, the row's labels field and integers beyond 64 bits included; a packed object holds
its JSON only (not the encoder's whole buffer), filed under one string; a table reads back what
a dict would hold, in a fraction of the memory."""

from __future__ import annotations

import tracemalloc

from collector.watch.packed import FOLD_MIN, Table, key_of, pack, unpack
from common.index import rows


def test_round_trip_keeps_the_labels_field_and_big_integers() -> None:
    obj = {
        "metadata": {"namespace": "a", "name": "b", rows.SLIM_LABELS: "xyz"},
        "spec": {"hosts": ["h"], "port": 2**70},
    }
    assert unpack(pack(obj)) == obj
    assert isinstance(pack(obj), bytes)  # the labels field inside the JSON, not a tuple beside
    plain = {"metadata": {"name": "r"}, "rules": [{"verbs": ["list"]}]}
    assert unpack(pack(plain)) == plain


def test_a_packed_object_holds_its_json_only() -> None:
    objs = [
        {"metadata": {"namespace": "a", "name": f"b{i}"}, "spec": {"x": [i]}} for i in range(1000)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        packed = [pack(o) for o in objs]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert all(isinstance(p, bytes) for p in packed)
    assert held < 1000 * 200  # orjson's own answer would hold its 4 KiB buffer each


def test_objects_are_filed_under_namespace_slash_name() -> None:
    assert key_of({"metadata": {"namespace": "a", "name": "b"}}) == "a/b"
    assert key_of({"metadata": {"name": "cr", "namespace": None}}) == "/cr"
    assert len({key_of({"metadata": {"namespace": n, "name": m}}) for n in "ab" for m in "ab"}) == 4


def _obj(ns: str, name: str, **spec: object) -> dict[str, object]:
    return {"metadata": {"namespace": ns, "name": name}, "spec": dict(spec)}


def test_a_table_reads_back_what_a_dict_filed_by_key_would_hold() -> None:
    """Lists and events applied to a table and to a plain dict by `key_of` give the same
    objects in the same order, before and after the changes are folded into the bulk."""
    first = [_obj("a", f"o{i}", n=i) for i in range(200)] + [_obj("a", "o3", n=-3)]
    table = Table(first)
    plain = {key_of(o): o for o in first}
    assert table.objects() == list(plain.values())
    for i in range(0, 400, 3):  # past FOLD_MIN + size // 8: the changes are folded once
        if i % 2:
            table.delete(f"a/o{i}")
            plain.pop(f"a/o{i}", None)
        else:
            changed = _obj("a", f"o{i}", n=i, changed=True)
            table.put(changed)
            plain[f"a/o{i}"] = changed
        assert table.objects() == list(plain.values())
    assert len(table._changes) < FOLD_MIN + 1 + 201 // 8


def test_a_table_keeps_the_labels_field_and_big_integers() -> None:
    labelled = {"metadata": {"namespace": "a", "name": "b", rows.SLIM_LABELS: "xyz"}}
    big = _obj("a", "c", port=2**70)
    table = Table([labelled, big])
    assert table.objects() == [labelled, big]
    table.put({"metadata": {"namespace": "a", "name": "d", rows.SLIM_LABELS: "q"}})
    assert table.objects()[-1]["metadata"] == {"namespace": "a", "name": "d", rows.SLIM_LABELS: "q"}
    assert Table().objects() == []


def test_a_table_holds_a_fraction_of_its_objects_json() -> None:
    """A cluster's objects are much alike: the bulk compressed together holds far less than
    the same objects packed one by one (what the watcher held per Istio object before)."""
    objs = [
        {
            "metadata": {"namespace": f"app-{i:04d}", "name": "web", "generation": i % 7},
            "spec": {"http": [{"route": [{"destination": {"host": f"web.app-{i:04d}"}}]}]},
        }
        for i in range(2000)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        packed = {key_of(o): pack(o) for o in objs}
        one_by_one = tracemalloc.get_traced_memory()[0] - before
        before = tracemalloc.get_traced_memory()[0]
        table = Table(objs)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(packed) == 2000 and table.objects() == objs
    assert held * 10 < one_by_one
