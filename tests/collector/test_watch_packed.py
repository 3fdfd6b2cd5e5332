"""The watcher's packed objects (collector.watch.packed): what is unpacked is what was packed,
the row's labels field and integers beyond 64 bits included, and a packed object holds its JSON
only (not the encoder's whole buffer)."""

from __future__ import annotations

import tracemalloc

from collector.watch.packed import pack, unpack
from common.index import rows


def test_round_trip_keeps_the_labels_field_and_big_integers() -> None:
    obj = {
        "metadata": {"namespace": "a", "name": "b", rows.SLIM_LABELS: "xyz"},
        "spec": {"hosts": ["h"], "port": 2**70},
    }
    assert unpack(pack(obj)) == obj
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
