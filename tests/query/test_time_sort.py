"""`sort=lastTransitionTime` / `sort=-lastTransitionTime` end to end with real parts: a kubesim
fleet collected by the real collector into Redis, walked over HTTP by generated users; the rows
are compared with the default order's walk (the same set), the order with the rows' own times,
and walks under concurrent transitions must show every unchanged row exactly once and no row
twice."""

from __future__ import annotations

from typing import Any

import pytest

from common.index import keys, timeline
from common.redis_client import text
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import e2e_fleet, topology
from tests.support.e2e_fleet import FLEET, Key, collect, flux_objects, headers, key, pages, walk

sim, settings, client = e2e_fleet.sim, e2e_fleet.settings, e2e_fleet.client


@pytest.mark.parametrize("user", ["admin-0", "dev-team-00", "solo", "nobody"])
def test_sorted_walks_hold_exactly_what_the_default_order_does(client: Any, user: str) -> None:
    plain = {key(r) for r in walk(client, user, 50)}
    for sort in ("-lastTransitionTime", "lastTransitionTime"):
        got = walk(client, user, 7, sort=sort)
        keys_ = [key(r) for r in got]
        assert len(keys_) == len(set(keys_)), (user, sort)
        assert set(keys_) == plain, (user, sort)
        times = [r["lastTransitionTime"] or "" for r in got]  # none: the oldest
        assert times == sorted(times, reverse=sort.startswith("-")), (user, sort)
    if user != "nobody":
        assert plain


def test_filters_apply_to_sorted_pages(client: Any) -> None:
    for query in (
        {"status": "unhealthy"},
        {"kind": "HelmRelease"},
        {"status": "healthy", "suspended": "false"},
        {"name": "a"},
        {"namespace": FLEET.namespace_names()[1]},
        {"cluster": FLEET.cluster_names[0], "status": "unhealthy,progressing"},
    ):
        plain = {key(r) for r in walk(client, "dev-team-00", 50, **query)}
        got = walk(client, "dev-team-00", 4, sort="-lastTransitionTime", **query)
        assert {key(r) for r in got} == plain, query
        assert len(got) == len(plain), query


def test_sort_and_token_errors_name_the_parameter(client: Any) -> None:
    h = headers("admin-0")
    for bad in ("name", "lastTransitionTime,name", "+lastTransitionTime"):
        resp = client.get("/api/v1/objects", query_string={"sort": bad}, headers=h)
        assert resp.status_code == 400, bad
        assert resp.get_json()["message"].startswith("sort:"), bad
    first = client.get("/api/v1/objects", query_string={"limit": 2}, headers=h).get_json()
    newest = client.get(
        "/api/v1/objects", query_string={"limit": 2, "sort": "-lastTransitionTime"}, headers=h
    ).get_json()
    for token, sort in [
        (first["continue"], "-lastTransitionTime"),  # a default-order token
        (newest["continue"], "lastTransitionTime"),  # the other direction's
        (newest["continue"], ""),
    ]:
        q = {"limit": 2, "continue": token, **({"sort": sort} if sort else {})}
        resp = client.get("/api/v1/objects", query_string=q, headers=h)
        assert resp.status_code == 400, sort
        assert resp.get_json()["message"].startswith("continue:"), sort


@pytest.mark.parametrize("sort", ["-lastTransitionTime", "lastTransitionTime"])
def test_walks_under_transitions_show_unchanged_rows_once_and_none_twice(
    sim: KubeSim, settings: Settings, client: Any, sort: str
) -> None:
    cluster = FLEET.cluster_names[0]
    targets = flux_objects(sim, cluster)
    assert len(targets) >= 6
    before = {key(r) for r in walk(client, "admin-0", 50)}
    seen: list[Key] = []
    changed: set[Key] = set()
    for n, page in enumerate(pages(client, "admin-0", 5, sort=sort)):
        seen += [key(r) for r in page]
        # Between pages, objects transition (some seen already, some not yet), and the
        # collector writes them: each moves to the newest end of the order.
        for kind, ns, name in targets[n % len(targets) :: 3][:2]:
            obj = sim.get(cluster, kind, ns, name)
            assert obj is not None
            ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
            sim.set_ready(cluster, kind, ns, name, ready["status"] != "True")
            changed.add((cluster, ns, kind, name))
        collect(settings, cluster)
    assert len(seen) == len(set(seen)), "a row was shown twice"
    assert set(seen) >= before - changed, "an unchanged row was skipped"
    assert changed & set(seen) <= before


def test_index_follows_rows_and_leaves_with_the_cluster(
    sim: KubeSim, settings: Settings, client: Any, redis_url: str
) -> None:
    r = topology.client(redis_url)
    cluster = FLEET.cluster_names[0]
    entries = set()
    for w in r.hkeys(keys.timeline(cluster)):
        entries |= set(r.zrange(keys.timeline_window(cluster, text(w)), 0, -1))
    stored = {timeline.where(text(m))[1].encode() for m in r.zrange(keys.rows(cluster), 0, -1)}
    assert entries == stored and stored
    kind, ns, name = flux_objects(sim, cluster)[0]
    sim.delete(cluster, kind, ns, name)
    collect(settings, cluster)
    entries = set()
    for w in r.hkeys(keys.timeline(cluster)):
        entries |= set(r.zrange(keys.timeline_window(cluster, text(w)), 0, -1))
    assert len(entries) == len(stored) - 1
    assert not any(
        e.split(b"\x00")[2] == name.encode() and e.startswith(ns.encode()) for e in entries - stored
    )
