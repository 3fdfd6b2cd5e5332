"""Count guards behind the query benchmark's numbers (docs/benchmarks.md): a list request costs a
fixed handful of Redis commands and plans only the clusters its page reaches, however many
clusters the caller can see; the fleet view is refreshed once per period, not once per thread."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
import redis

from common.index import keys, rows, syncstatus
from common.index.read import reader
from common.index.read.reader import Filters, PageRequest, Reader
from common.index.write import store_events
from common.rbac.grants import compile_grants, store_grants
from common.redis_client import text
from common.settings import Settings
from query import positions
from query.scope import FleetView
from tests.support.costs import commands, count_round_trips
from tests.support.http import make_app
from tests.support.index_fleet import KINDS, FakeAccess, make_row, write_rows
from tests.support.query_fleet import FORTY, REG, USERS, headers, mark_synced, rbac_objects

CLUSTERS = FORTY
ALL = frozenset(KINDS)


def cached_client(redis_url: str):
    """A test client of the query app with header auth whose fleet view is refreshed once per
    period (an hour here), as between two refreshes in production."""
    settings = Settings(
        redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",)
    )
    app = make_app(settings)
    app.extensions["fleetscope"].fleet.cache_s = 3600
    return app.test_client()


def count_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = reader.plan

    def counting(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(reader, "plan", counting)
    return calls


def test_first_page_plans_only_the_clusters_it_reads(
    wide: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = count_plans(monkeypatch)
    access = {c: FakeAccess(ALL) for c in CLUSTERS}
    page = Reader(wide, KINDS).page(access, PageRequest(Filters(), 50))
    assert len(page.rows) == 50
    # 30 rows a cluster: the page (51 with the look-ahead) needs two clusters; round trips take
    # 1 then 2 clusters (batches double), so 3 of the 40 are planned and read.
    assert len(plans) == 3
    plans.clear()
    Reader(wide, KINDS).page(access, PageRequest(Filters(), 50, page.cursor))
    assert len(plans) == 3


def test_repeated_pages_reuse_plans_until_the_access_changes(
    wide: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = count_plans(monkeypatch)
    r = Reader(wide, KINDS)
    access = {c: FakeAccess(ALL) for c in CLUSTERS}
    first = r.page(access, PageRequest(Filters(), 50))
    assert len(plans) == 3
    assert r.page(access, PageRequest(Filters(), 50)).members == first.members
    assert len(plans) == 3  # same Access objects, same filters: the ranges are reused
    narrower = {c: FakeAccess(frozenset(KINDS[:1])) for c in CLUSTERS}  # e.g. grants changed
    page = r.page(narrower, PageRequest(Filters(), 50))
    assert len(plans) > 3
    assert {row["kind"] for row in page.rows} == {KINDS[0]}


@pytest.mark.standalone_only
def test_list_request_costs_a_fixed_number_of_redis_commands(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cached_client(redis_url)
    h = headers(USERS["admin"])
    for _ in range(2):  # warm: scripts loaded, grants cached, fleet view read, token key read
        assert client.get("/api/v1/objects?limit=50", headers=h).status_code == 200
    wide.config_resetstat()
    trips = count_round_trips(monkeypatch)
    n = 10
    for _ in range(n):
        body = client.get("/api/v1/objects?limit=50", headers=h).get_json()
        assert len(body["items"]) == 50
    # Three round trips per request: the clusters' generations (the answer's resourceVersion,
    # one MGET) with the grants-version GET (cached grants, confirmed by it: tally.read_once),
    # then the page scans, the second reading the next two clusters.
    assert trips == ["pipeline"] * (3 * n)
    stats = {k.removeprefix("cmdstat_"): v["calls"] for k, v in wide.info("commandstats").items()}
    stats.pop("config|resetstat", None)
    # Per request: GET fs:version (grants epoch) and, for a caller who sees every row, one
    # ZRANGEBYLEX per cluster read for exactly the rows still missing (30 + 21 of 30 + 0 of
    # 30: 1 then 2 clusters, batches double), no script.
    assert stats.pop("get") == n
    assert stats.pop("mget") == n  # the resourceVersion: one MGET whatever the fleet's size
    assert stats.pop("zrangebylex") == 3 * n
    assert stats == {}, f"unexpected commands per list request: {stats}"


@pytest.mark.standalone_only
@pytest.mark.parametrize(
    "query", ["sort=-lastTransitionTime", "sort=lastTransitionTime", "status=unhealthy"]
)
def test_a_list_reads_the_generations_once(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """A remembered sorted or sparse page is answered after one read of the clusters'
    generations: the one the answer's resourceVersion is made from (tally.read_once), not a
    second one of its own; the grants version rides in the same round trip."""
    client = cached_client(redis_url)
    h = headers(USERS["admin"])
    url = f"/api/v1/objects?limit=20&{query}"
    first = client.get(url, headers=h).get_json()
    wide.config_resetstat()
    trips = count_round_trips(monkeypatch)
    again = client.get(url, headers=h).get_json()
    assert trips == ["pipeline"]
    assert again["items"] == first["items"] and again["resourceVersion"]
    stats = {k.removeprefix("cmdstat_"): v["calls"] for k, v in wide.info("commandstats").items()}
    stats.pop("config|resetstat", None)
    assert stats == {"mget": 1, "get": 1}, stats


def test_the_list_position_is_encoded_once_while_no_cluster_is_written(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer's resourceVersion (every cluster's generation, signed) is made again only
    when a generation moved: encoding it was half of a list page's time at 1,000 clusters."""
    client = cached_client(redis_url)
    signer = client.application.extensions["fleetscope"].signer
    h = headers(USERS["admin"])
    encoded: list[int] = []
    real = positions.encode_generations
    monkeypatch.setattr(positions, "encode_generations", lambda *a: encoded.append(1) or real(*a))
    first = client.get("/api/v1/objects?limit=5", headers=h).get_json()["resourceVersion"]
    again = client.get("/api/v1/objects?limit=5", headers=h).get_json()["resourceVersion"]
    assert again == first and len(encoded) == 1
    written = CLUSTERS[1]
    member = rows.encode(make_row(written, "ns-new", "Kustomization", "moved"))
    store_events.apply_changes(wide, written, [store_events.Change.of(member)])
    moved = client.get("/api/v1/objects?limit=5", headers=h).get_json()["resourceVersion"]
    assert len(encoded) == 2
    before, after = positions.decode(signer, first), positions.decode(signer, moved)
    assert after[written].gen == before[written].gen + 1
    assert {c: p for c, p in after.items() if c != written} == {
        c: p for c, p in before.items() if c != written
    }


@pytest.mark.standalone_only
def test_a_team_members_page_costs_one_script_per_cluster(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cached_client(redis_url)
    h = headers(USERS["team"])
    for _ in range(2):
        assert client.get("/api/v1/objects?limit=50", headers=h).status_code == 200
    wide.config_resetstat()
    n = 10
    for _ in range(n):
        assert len(client.get("/api/v1/objects?limit=50", headers=h).get_json()["items"]) == 50
    stats = commands(wide)
    # GET fs:version, one EVALSHA per cluster read (7: 1, 2 and 4 clusters in three round
    # trips, batches double) and two ZRANGEBYLEX inside each (one per range of the plan)
    assert stats.pop("get") == n
    assert stats.pop("mget") == n  # the resourceVersion
    assert stats.pop("evalsha") == 7 * n
    assert stats.pop("zrangebylex") == 2 * 7 * n
    assert stats == {}, f"unexpected commands per list request: {stats}"


@pytest.mark.standalone_only
def test_fleet_view_refreshes_once_when_threads_race(wide: redis.Redis) -> None:
    view = FleetView(wide, cache_s=3600)
    wide.config_resetstat()
    start = threading.Barrier(8)

    def read() -> None:
        start.wait()
        assert len(view.syncs()) == len(CLUSTERS)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = wide.info("commandstats")
    assert stats["cmdstat_hkeys"]["calls"] == 1


def test_fleet_view_refresh_does_not_hold_up_other_requests(
    wide: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a view exists, one thread re-reads it when it is old and the others go on with
    the current one instead of queueing behind the re-read (~200 hashes at fleet L)."""
    view = FleetView(wide, cache_s=3600)
    first = view.syncs()
    view.snapshot(Settings(redis_url="redis://unused"))
    view._at = float("-inf")  # the view is old now
    reading, release = threading.Event(), threading.Event()
    real = syncstatus.read_all

    def slow_read_all(r, clusters, memo=None):
        reading.set()
        assert release.wait(30)
        return real(r, clusters, memo)

    monkeypatch.setattr(syncstatus, "read_all", slow_read_all)
    refresher = threading.Thread(target=view.syncs)
    refresher.start()
    assert reading.wait(30)
    got: list[dict] = []
    other = threading.Thread(target=lambda: got.append(view.syncs()))
    other.start()
    other.join(10)  # a wait here is the queue this test is about (the re-read never ends)
    release.set()
    refresher.join(30)
    assert got and got[0] is first, "another request waited for the view's re-read"
    assert view.syncs() is not first and view.syncs() == first


def test_a_view_refresh_with_the_same_outcome_keeps_the_scope(
    wide: redis.Redis, redis_url: str
) -> None:
    """What the reader remembers per access map (plans, facets, their encoded JSON) must
    outlive the view's refreshes (every second) while nothing changed for the caller."""
    client = cached_client(redis_url)
    st = client.application.extensions["fleetscope"]
    user = USERS["team"].with_authenticated()
    before = st.scope(user)
    st.fleet._at = float("-inf")  # the next request re-reads the view: a new snapshot
    after = st.scope(user)
    assert after.snapshot is not before.snapshot
    assert after.visible is before.visible and after.access is before.access
    mark_synced(wide, "c01", rbac_synced_at=1.0)  # now c01's grants are too old to serve
    st.fleet._at = float("-inf")
    hidden = st.scope(user)
    assert "c01" not in hidden.visible and "c01" in before.visible


def test_reused_scope_follows_a_revocation(wide: redis.Redis, redis_url: str) -> None:
    """With the fleet view cached, a caller's scope is reused between requests, but a grants
    change on one cluster still takes effect on the next request."""
    client = cached_client(redis_url)
    h = headers(USERS["team"])

    def clusters() -> set[str]:
        body = client.get("/api/v1/objects?limit=500", headers=h).get_json()
        return {row["cluster"] for row in body["items"]}

    assert "c00" in clusters() and "c00" in clusters()  # second call: the reused scope
    objects = dataclasses.replace(rbac_objects("c00"), role_bindings=[])  # team-a's bindings gone
    store_grants(wide, "c00", compile_grants(objects, REG), time.time())
    assert "c00" not in clusters()
    assert "c01" in clusters()


@pytest.mark.standalone_only
def test_facets_request_costs_one_round_trip_when_nothing_changed(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = cached_client(redis_url)
    for who in ("admin", "team"):
        h = headers(USERS[who])
        want = client.get("/api/v1/facets", headers=h).get_json()  # warm: tables read
        wide.config_resetstat()
        trips = count_round_trips(monkeypatch)
        for _ in range(5):
            body = client.get("/api/v1/facets", headers=h).get_json()
            assert body["total"] == want["total"] > 0 and body["kinds"] == want["kinds"]
        # cached grants confirmed by the grants version, read with the clusters' generations
        assert trips == ["pipeline"] * 5, who
        assert commands(wide) == {"get": 5, "mget": 5}, who
        monkeypatch.undo()
    # a write to one cluster: the next request reads that cluster's table again, and counts it
    write_rows(wide, [make_row("c07", "team-00", "Kustomization", "new", "unhealthy")])
    h = headers(USERS["admin"])
    body = client.get("/api/v1/facets", headers=h).get_json()
    assert body["clusters"]["c07"] == 31 and body["statuses"].get("unhealthy", 0) >= 1


def test_an_idle_callers_scope_goes_with_the_memos_idle_entries(
    wide: redis.Redis, redis_url: str
) -> None:
    """A caller's remembered scope pins a fleet snapshot and their access maps: it is dropped
    once the caller was idle for a whole sweep round, as the memos' idle entries are, and kept
    while they ask."""
    from common.index.read import memo

    client = cached_client(redis_url)
    st = client.application.extensions["fleetscope"]
    team, admin = USERS["team"].with_authenticated(), USERS["admin"].with_authenticated()
    kept = st.scope(team)
    st.scope(admin)
    key = lambda u: (u.name, u.groups)  # noqa: E731
    assert key(team) in st.fleet.scopes and key(admin) in st.fleet.scopes
    memo.sweep_idle()
    st.scope(team)  # the team member asks between the sweeps; the admin does not
    memo.sweep_idle()
    assert key(team) in st.fleet.scopes and key(admin) not in st.fleet.scopes
    assert st.scope(team).access is kept.access  # still the same maps: the memos' owners
    memo.sweep_idle()
    memo.sweep_idle()
    assert st.fleet.scopes == {}
    assert st.scope(admin).visible  # asked again: resolved again


def _reword(r: redis.Redis, cluster: str, message: str, **more: Any) -> None:
    """Every row of `cluster` gets a new message (and `more`; its status unchanged) through the
    watcher's writer: its generation moves, its status generation does not unless `more` moves
    what it covers (a transition time)."""
    changes = []
    for i, m in enumerate(text(x) for x in r.zrange(keys.rows(cluster), 0, -1)):
        row = rows.decode(cluster, m)
        row.update(message=message, **{k: v.format(i=i) for k, v in more.items()})
        changes.append(store_events.Change.of(rows.encode(row, rows.edges_of(m))))
    assert store_events.apply_changes(r, cluster, changes).updated == len(changes) > 0


@pytest.mark.standalone_only
def test_a_sorted_page_under_message_writes_reads_its_rows_with_the_status_generations(
    wide: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remembered time-sorted page written since needs the clusters' status generations to
    know its order holds (only messages moved), then its rows on the written clusters: while
    pages keep their order, both in one round trip after the list's generations (two round
    trips, not three); a transition that moves the order leaves the rows read unused."""
    written = CLUSTERS[0]
    _reword(wide, written, "timed", lastTransitionTime="2026-12-01T10:{i:02d}:00Z")
    client = cached_client(redis_url)
    h = headers(USERS["admin"])
    url = "/api/v1/objects?limit=20&sort=-lastTransitionTime"
    first = client.get(url, headers=h).get_json()["items"]
    assert len(first) == 20 and {i["cluster"] for i in first} == {written}
    trips = count_round_trips(monkeypatch)
    for message in ["moved once", "moved twice"]:
        _reword(wide, written, message)
        wide.config_resetstat()
        trips.clear()
        items = client.get(url, headers=h).get_json()["items"]
        assert [i["name"] for i in items] == [i["name"] for i in first]  # the same order
        assert {i["message"] for i in items if i["cluster"] == written} == {message}
        # generations + grants version; status generations + the written cluster's 20 rows
        assert trips == ["pipeline", "pipeline"], trips
        stats = commands(wide)
        assert stats.pop("mget") == 2 and stats.pop("zrangebylex") == 20, stats
    # a transition: the order moves; the page is merged or walked again, with the new order
    _reword(wide, written, "moved", lastTransitionTime="2026-12-02T10:{i:02d}:00Z")
    moved = client.get(url, headers=h).get_json()["items"]
    assert {i["lastTransitionTime"][:10] for i in moved} == {"2026-12-02"}
