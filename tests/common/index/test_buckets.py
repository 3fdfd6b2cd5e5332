"""common.index.buckets against a real redis-server: fields land in their bucket, values too
long for a listpack in the overflow hash, moving both ways as they change; buckets stay
listpacks."""

from __future__ import annotations

import redis

from common.index.buckets import LISTPACK_VALUE_MAX, Bucketed

H = Bucketed(lambda c, b: f"t:{{{c}}}:{b}", 8, lambda c: f"t:{{{c}}}:long")


def read(r: redis.Redis, fields: list[str]) -> dict[str, str]:
    pipe = r.pipeline(transaction=False)
    groups = H.queue_hmget(pipe, "c", fields)
    return H.collect(groups, pipe.execute())


def read_all(r: redis.Redis) -> dict[str, str]:
    pipe = r.pipeline(transaction=False)
    assert H.queue_hgetall(pipe, "c") == H.reads_all == 9
    return H.collect_all(pipe.execute())


def write(r: redis.Redis, changed: dict[str, str], gone: tuple[str, ...] = ()) -> None:
    tx = r.pipeline(transaction=True)
    H.queue_write(tx, "c", changed, gone)
    tx.execute()


def test_long_values_live_in_the_overflow_and_move_back_when_short(r: redis.Redis) -> None:
    long, short = "x" * (LISTPACK_VALUE_MAX + 1), "y" * LISTPACK_VALUE_MAX
    fields = {f"f{i}": short for i in range(100)}
    write(r, {**fields, "big": long})
    assert read_all(r) == {**fields, "big": long}
    assert r.hkeys("t:{c}:long") == ["big"]
    assert all(r.object("encoding", H.key("c", b)) == "listpack" for b in range(8))
    assert read(r, ["big", "f1", "nope"]) == {"big": long, "f1": short}
    write(r, {"big": "s", "f1": long})  # big shrinks, f1 grows
    assert r.hkeys("t:{c}:long") == ["f1"]
    assert r.hget(H.key_of("c", "big"), "big") == "s" and r.hget(H.key_of("c", "f1"), "f1") is None
    assert read(r, ["big", "f1"]) == {"big": "s", "f1": long}
    write(r, {"f2": ""}, ("f1",))  # "" and gone both delete, wherever the field was
    got = read_all(r)
    assert "f1" not in got and "f2" not in got and len(got) == 99
