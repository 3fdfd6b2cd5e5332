"""Watch delivery's cost and stamps: an event reaches only the streams of its cluster,
resource and namespace, serialized once for all of them; a stream that goes away unregisters
at once; each live event sent is stamped with when it was made and when a watcher got it."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from kubesim.catalog import Catalog
from kubesim.server import KubeSim
from kubesim.store import ClusterStore, Event
from kubesim.watch import Deliveries
from tests.support.waiting import wait_for

KS = "/apis/kustomize.toolkit.fluxcd.io/v1"
HR = "/apis/helm.toolkit.fluxcd.io/v2"


def test_store_hands_an_event_only_to_its_resource_and_namespace_watchers() -> None:
    catalog = Catalog.default()
    ks, ns_res = catalog.find("Kustomization"), catalog.find("Namespace")
    store = ClusterStore("c", catalog)
    store.create(ns_res, "", {"metadata": {"name": "a"}})
    store.create(ns_res, "", {"metadata": {"name": "b"}})
    got: dict[str, list[tuple[Event, bytes]]] = {}

    def watcher(label: str):  # type: ignore[no-untyped-def]
        got[label] = []
        return lambda e, line: got[label].append((e, line))

    store.watch(ks, "", watcher("ks-all"))
    store.watch(ks, "a", watcher("ks-a"))
    store.watch(ks, "b", watcher("ks-b"))
    store.watch(catalog.find("HelmRelease"), "", watcher("hr-all"))
    store.watch(catalog.find("HelmRelease"), "a", watcher("hr-a"))
    for i in range(20):  # streams of other namespaces: delivery must not pass over them
        store.watch(ks, f"other-{i}", watcher(f"ks-other-{i}"))
    before = store.watch_offers
    store.create(ks, "a", {"metadata": {"name": "apps"}, "spec": {}})
    assert store.watch_offers - before == 2
    assert {k for k, v in got.items() if v} == {"ks-all", "ks-a"}
    (e1, line1), (e2, line2) = got["ks-all"][0], got["ks-a"][0]
    assert e1 is e2 and line1 is line2  # one event, serialized once for every watcher
    assert json.loads(line1)["type"] == "ADDED" and e1.at > 0


def test_unwatch_forgets_the_stream_and_its_empty_group() -> None:
    catalog = Catalog.default()
    ks = catalog.find("Kustomization")
    store = ClusterStore("c", catalog)
    calls: list[Event] = []

    def w(e: Event, line: bytes) -> None:
        calls.append(e)

    store.watch(ks, "", w)
    store.unwatch(ks, "", w)
    store.create(catalog.find("Namespace"), "", {"metadata": {"name": "a"}})
    store.create(ks, "a", {"metadata": {"name": "apps"}, "spec": {}})
    assert store.watchers == {} and calls == [] and store.watch_offers == 0


def test_deliveries_keep_the_first_send_and_stay_bounded() -> None:
    log = Deliveries(size=2)
    events = [
        Event(rv, ("g", "r"), "MODIFIED", "ns", f"n{rv}", b"{}", at=float(rv)) for rv in (1, 2, 3)
    ]
    log.stamp("c", "K", events[0], 10.0)
    log.stamp("c", "K", events[0], 11.0)  # a second watcher of the same event
    d = log.get("c", "K", "ns", "n1", 1)
    assert d is not None and (d.made_s, d.delivered_s) == (1.0, 10.0)
    log.stamp("c", "K", events[1], 12.0)
    log.stamp("c", "K", events[2], 13.0)
    assert len(log) == 2 and log.get("c", "K", "ns", "n1", 1) is None
    assert log.get("c", "K", "ns", "n3", 3) is not None


WATCH_S = 8  # each test's watches end on the server's side after this


@contextmanager
def reading(http: requests.Session, url: str, **params: str) -> Iterator[list[dict]]:
    """A watch (ended by kubesim after WATCH_S) read in a thread; its events so far in the
    yielded list."""
    events: list[dict] = []
    query = {"watch": "1", "timeoutSeconds": str(WATCH_S), **params}
    resp = http.get(url, params=query, stream=True)

    def read() -> None:
        try:
            for ln in resp.iter_lines():
                if ln:
                    events.append(json.loads(ln))
        except requests.RequestException:
            pass

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        yield events
    finally:
        t.join(WATCH_S + 30)
        resp.close()


def test_a_change_touches_only_the_matching_streams(
    kubesim: KubeSim, http: requests.Session
) -> None:
    base, other = kubesim.url("cluster-000"), kubesim.url("cluster-001")
    rv = str(kubesim.resource_version("cluster-000"))
    rv1 = str(kubesim.resource_version("cluster-001"))
    with (
        reading(http, base + KS + "/kustomizations", resourceVersion=rv) as ks_all,
        reading(
            http, base + KS + "/namespaces/app-0001/kustomizations", resourceVersion=rv
        ) as ks_a,
        reading(
            http, base + KS + "/namespaces/app-0002/kustomizations", resourceVersion=rv
        ) as ks_b,
        reading(http, base + HR + "/helmreleases", resourceVersion=rv) as hr,
        reading(http, other + KS + "/kustomizations", resourceVersion=rv1) as ks_other,
    ):
        wait_for(lambda: kubesim.watch_streams("cluster-000") == 4, 30, "four streams")
        wait_for(lambda: kubesim.watch_streams("cluster-001") == 1, 30, "one stream")
        offers0, offers1 = kubesim.watch_offers("cluster-000"), kubesim.watch_offers("cluster-001")
        kubesim.set_ready("cluster-000", "Kustomization", "app-0001", "apps", False, message="x")
        wait_for(lambda: ks_all and ks_a, 30, "the event on both matching streams")
        assert kubesim.watch_offers("cluster-000") - offers0 == 2
        assert kubesim.watch_offers("cluster-001") == offers1
    assert [e["type"] for e in ks_all] == [e["type"] for e in ks_a] == ["MODIFIED"]
    assert ks_b == [] and hr == [] and ks_other == []


def test_a_closed_watch_unregisters_at_once(kubesim: KubeSim, tmp_path: Path) -> None:
    context = ssl.create_default_context(cafile=str(kubesim.ca_file(tmp_path)))
    port = kubesim.port("cluster-000")
    head = (
        f"GET {KS}/kustomizations?watch=1&timeoutSeconds=600 HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {kubesim.collector_token}\r\n\r\n"
    )
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(head.encode())
        assert tls.recv(12) == b"HTTP/1.1 200"
        wait_for(lambda: kubesim.watch_streams("cluster-000") == 1, 30, "the stream")
    # Long before its 600 s timeout or any bookmark: the client going away wakes the stream.
    wait_for(lambda: kubesim.watch_streams("cluster-000") == 0, 10, "the stream to unregister")


def test_each_live_event_sent_is_stamped(kubesim: KubeSim, http: requests.Session) -> None:
    path = kubesim.url("cluster-000") + KS + "/kustomizations"
    rv = str(kubesim.resource_version("cluster-000"))
    unwatched = kubesim.set_ready("cluster-001", "Kustomization", "app-0001", "apps", False)
    with reading(http, path, resourceVersion=rv) as events:
        wait_for(lambda: kubesim.watch_streams("cluster-000") == 1, 30, "the stream")
        t0 = time.monotonic()
        obj = kubesim.set_ready("cluster-000", "Kustomization", "app-0001", "apps", False)
        wait_for(lambda: events, 30, "the event")
    got = kubesim.delivery(
        "cluster-000", "Kustomization", "app-0001", "apps", obj["metadata"]["resourceVersion"]
    )
    assert got is not None and t0 <= got.made_s <= got.delivered_s <= time.monotonic()
    rv_unwatched = unwatched["metadata"]["resourceVersion"]
    assert (
        kubesim.delivery("cluster-001", "kustomizations", "app-0001", "apps", rv_unwatched) is None
    )
