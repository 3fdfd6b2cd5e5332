"""The name index (common.index.write.name_index) kept by the full sync (common.index.write.store) and the watcher
(common.index.write.store_events) against a real Redis: after every write it equals the index rebuilt from
the rows, a no-change re-sync leaves it alone, and it goes with the cluster."""

from __future__ import annotations

import random

import redis

from common.index import keys, rows
from common.index.write import name_index, store
from common.index.write.store_events import Change, apply_changes
from tests.support import rowfactory, topology

C = "c1"
KINDS = ("Kustomization", "HelmRelease", "Gateway")


def member(ns: str, kind: str, name: str, status: str = "healthy") -> str:
    return rowfactory.member(C, ns, kind, name, status)


def stored(r: redis.Redis) -> dict[str, str]:
    return r.hgetall(keys.names(C))  # type: ignore[return-value]


def rebuilt(r: redis.Redis) -> dict[str, str]:
    return name_index.build(r.zrange(keys.rows(C), 0, -1))  # type: ignore[arg-type]


def random_members(rnd: random.Random, n: int) -> list[str]:
    out = {}
    for _ in range(n):
        ns, kind, name = f"ns-{rnd.randint(0, 9)}", rnd.choice(KINDS), f"app-{rnd.randint(0, 6)}"
        out[(ns, kind, name)] = member(ns, kind, name, rnd.choice(("healthy", "unhealthy")))
    return list(out.values())


def test_build_groups_rows_by_name_in_byte_order() -> None:
    index = name_index.build(
        [member("b", "Gateway", "web"), member("a", "HelmRelease", "web"), member("a", "X", "db")]
    )
    assert index == {
        "web": "a\0HelmRelease\0b\0Gateway\0",
        "db": "a\0X\0",
        "": "\0db\0web\0",  # every name, for one plain search
    }
    assert name_index.entries(index["web"]) == {"a\0HelmRelease\0", "b\0Gateway\0"}
    assert name_index.entries("") == set()


def test_update_moves_entries_and_drops_empty_names() -> None:
    old = {"web": "a\0Gateway\0", "db": "a\0X\0", "": "\0db\0web\0"}
    changed, gone = name_index.update(
        old, removed=[member("a", "X", "db")], added=[member("b", "X", "web")]
    )
    assert changed == {"web": "a\0Gateway\0b\0X\0", "": "\0web\0"} and gone == ["db"]
    changed, gone = name_index.update(old, removed=[], added=[member("b", "X", "web")])
    assert changed == {"web": "a\0Gateway\0b\0X\0"} and gone == []  # names unchanged
    changed, gone = name_index.update(
        {"db": "a\0X\0", "": "\0db\0"}, removed=[member("a", "X", "db")], added=[]
    )
    assert changed == {} and sorted(gone) == ["", "db"]


def test_full_sync_builds_and_diffs_the_index(r: redis.Redis) -> None:
    rnd = random.Random(3)
    for _ in range(6):
        snapshot = random_members(rnd, 40)
        store.replace_rows(r, C, snapshot)
        assert stored(r) == name_index.build(snapshot) == rebuilt(r)
    store.replace_rows(r, C, [])
    assert not r.exists(keys.names(C))


def test_unchanged_resync_does_not_write_the_index(r: redis.Redis) -> None:
    snapshot = random_members(random.Random(4), 30)
    store.replace_rows(r, C, snapshot)
    topology.reset_stats(r)
    store.replace_rows(r, C, snapshot)
    stats = topology.commandstats(r)
    assert "hdel" not in stats
    assert stats["hset"] == 1  # the sync status only


def test_a_lost_index_is_rebuilt_by_the_next_full_sync(r: redis.Redis) -> None:
    snapshot = random_members(random.Random(5), 30)
    store.replace_rows(r, C, snapshot)
    r.delete(keys.names(C))
    store.replace_rows(r, C, snapshot)
    assert stored(r) == rebuilt(r) != {}


def test_watch_events_keep_the_index(r: redis.Redis) -> None:
    rnd = random.Random(6)
    store.replace_rows(r, C, random_members(rnd, 30))
    for _ in range(30):
        changes = []
        for m in random_members(rnd, 4):  # adds and status updates
            changes.append(Change.of(m))
        current = r.zrange(keys.rows(C), 0, -1)
        for m in rnd.sample(current, 3):  # deletions
            changes.append(Change(rows.identity(m), None))
        apply_changes(r, C, changes)
        assert stored(r) == rebuilt(r)


def test_rename_and_last_row_of_a_name(r: redis.Redis) -> None:
    store.replace_rows(r, C, [member("a", "Gateway", "old"), member("b", "Gateway", "web")])
    apply_changes(
        r,
        C,
        [Change(rows.sort_key("a", "Gateway", "old"), None), Change.of(member("a", "X", "new"))],
    )
    assert stored(r) == {"new": "a\0X\0", "web": "b\0Gateway\0", "": "\0new\0web\0"}


def test_delete_cluster_removes_the_index(r: redis.Redis) -> None:
    store.replace_rows(r, C, random_members(random.Random(7), 10))
    assert r.exists(keys.names(C))
    store.delete_cluster(r, C)
    assert not r.exists(keys.names(C))


def test_an_update_in_place_does_not_read_the_name_dictionary(r: redis.Redis) -> None:
    """The dictionary (every name of the cluster) is read by a watch write only when the write
    adds or drops a name; a row updated in place keeps its name (count guard: bytes sent)."""
    snapshot = [member(f"ns-{i % 7}", "Gateway", f"application-name-{i:05d}") for i in range(2000)]
    store.replace_rows(r, C, snapshot)
    dictionary = r.hget(keys.names(C), name_index.DICT)
    assert dictionary is not None and len(dictionary) > 40_000
    topology.reset_stats(r)
    sent = int(r.info("stats")["total_net_output_bytes"])
    apply_changes(
        r, C, [Change.of(member("ns-0", "Gateway", "application-name-00000", "unhealthy"))]
    )
    assert int(r.info("stats")["total_net_output_bytes"]) - sent < len(dictionary) // 4
    assert "hget" not in topology.commandstats(r)
    assert stored(r) == rebuilt(r)

    topology.reset_stats(r)
    apply_changes(r, C, [Change.of(member("ns-1", "Gateway", "a-new-name"))])
    cmds = topology.commandstats(r)
    assert cmds["hget"] == 1 and cmds["hmget"] >= 1  # the dictionary and the name's entries
    assert stored(r) == rebuilt(r)
    apply_changes(r, C, [Change(rows.sort_key("ns-1", "Gateway", "a-new-name"), None)])
    assert stored(r) == rebuilt(r)  # the name's last row gone: out of the dictionary again


def test_a_status_change_does_not_read_a_widely_used_names_entries(r: redis.Redis) -> None:
    """A name in every namespace (a chart's release, an app's Kustomization) has entries of
    tens of KB at fleet L; a write that keeps each row's name and entry (a status change, a
    message) neither reads nor rewrites them (count guard: bytes sent)."""
    store.replace_rows(
        r, C, [member(f"namespace-{i:04d}", "HelmRelease", "podinfo") for i in range(1500)]
    )
    entries = r.hget(keys.names(C), "podinfo")
    assert entries is not None and len(entries) > 30_000
    sent = int(r.info("stats")["total_net_output_bytes"])
    apply_changes(
        r, C, [Change.of(member("namespace-0007", "HelmRelease", "podinfo", "unhealthy"))]
    )
    assert int(r.info("stats")["total_net_output_bytes"]) - sent < len(entries) // 4
    assert r.hget(keys.names(C), "podinfo") == entries
    assert stored(r) == rebuilt(r)
