"""The watcher's packed objects (collector.watch.packed): what is unpacked is what was packed,
the row's labels field and integers beyond 64 bits included, and a packed object holds its JSON
only (not the encoder's whole buffer), filed under one string."""

from __future__ import annotations

import tracemalloc

from collector.watch.packed import key_of, pack, unpack
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
