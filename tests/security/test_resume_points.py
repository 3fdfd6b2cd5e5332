"""A leaf's resourceVersions become resume points stored in Redis (`fs:{c:<cluster>}:wrv`) and
are sent back to that leaf by the replica taking the cluster over: a hostile one stays one
query parameter's value, and an oversized one is not stored (and drops the older point, so the
kind is listed rather than replayed twice)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from common.index import keys, rows
from common.index.write import store_events, writer
from common.leaf.client import watch_path
from tests.support import rowfactory, topology

C = "cluster-a"


def test_a_hostile_resource_version_is_one_query_value() -> None:
    rv = "7&watch=false&labelSelector=x\r\nHost: evil\x00"
    query = parse_qs(urlsplit(watch_path("v1", "services", rv, 300)).query)
    assert query["resourceVersion"] == [rv]
    assert query["watch"] == ["1"] and "labelSelector" not in query


def test_an_oversized_resource_version_is_not_stored(redis_url: str) -> None:
    rb = topology.client(redis_url)
    member = rowfactory.member(C, "apps", "Kustomization", "app-1")
    change = store_events.Change.of(member)
    store_events.apply_changes(rb, C, [change], resume={"Kustomization": "41"})
    assert store_events.resume_points(rb, C) == {"Kustomization": "41"}
    huge = "9" * (writer.RESUME_POINT_MAX + 1)
    gone = store_events.Change(rows.identity(member), None)  # any write: the point rides with it
    store_events.apply_changes(rb, C, [gone], resume={"Kustomization": huge})
    assert store_events.resume_points(rb, C) == {}  # neither the huge one nor the older one
    assert not rb.exists(keys.resume(C))
