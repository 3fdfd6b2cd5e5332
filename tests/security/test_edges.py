"""The service's edges over real HTTP against a kubesim fleet: a name, namespace or cluster
ending in a newline is a 400 like any invalid name, and no request reaches a leaf; every
answer with per-user data (errors too) carries `Cache-Control: no-store` and
`X-Content-Type-Options: nosniff`; in `header` and `anonymous` modes a foreign `Host` (a
DNS-rebinding page) is refused before any work; /metrics names no cluster unless asked to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim.server import KubeSim
from tests.support.http import make_app, request, serve
from tests.support.small_fleet import ADMIN, leaf_requests

H = list(ADMIN.items())


def a_kustomization(sim: KubeSim) -> tuple[str, str]:
    meta = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    return meta["namespace"], meta["name"]


def test_a_trailing_newline_is_an_invalid_name(collected: KubeSim, host: str) -> None:
    ns, name = a_kustomization(collected)
    base = "/api/v1/objects"
    targets = [
        f"{base}/cluster-000/{ns}%0A/Kustomization/{name}",
        f"{base}/cluster-000/{ns}/Kustomization/{name}%0A",
        f"{base}/cluster-000%0A/{ns}/Kustomization/{name}",
        f"{base}/cluster-000/{ns}%0A/Kustomization/{name}/relations",
        f"{base}/cluster-000/{ns}/Kustomization/{name}%0a",
    ]
    for target in targets:
        answer = request(host, target, H)
        assert answer.status == 400, (target, answer.status, answer.body)
        assert answer.body["error"] == "invalid_parameter" and answer.body["message"]
    assert leaf_requests(collected) == 0
    # The control: the same object without the newline is read from its leaf.
    assert request(host, f"{base}/cluster-000/{ns}/Kustomization/{name}", H).status == 200
    assert leaf_requests(collected) == 1


def test_per_user_answers_are_not_cached_or_sniffed(collected: KubeSim, host: str) -> None:
    ns, name = a_kustomization(collected)
    obj = f"/api/v1/objects/cluster-000/{ns}/Kustomization/{name}"
    answers = {
        target: request(host, target, headers)
        for target, headers in [
            ("/api/v1/objects?limit=2", H),
            ("/api/v1/facets", H),
            ("/api/v1/groups", H),
            ("/api/v1/status", H),
            ("/api/v1/access", H),
            (obj, H),
            (obj + "/relations", H),
            ("/api/v1/objects", []),  # 401
            ("/api/v1/objects?limit=0", H),  # 400
            ("/api/v1/objects/cluster-999/x/Kustomization/y", H),  # 404
            ("/", H),  # the web view's page
        ]
    }
    for target, answer in answers.items():
        assert answer.status in (200, 400, 401, 404), target
        assert answer.headers.get("cache-control") == "no-store", target
        assert answer.headers.get("x-content-type-options") == "nosniff", target


FOREIGN = ["evil.example", "evil.example:8080", "127.0.0.1.nip.io", "localhost.evil.example"]


@pytest.mark.parametrize("foreign", FOREIGN)
def test_a_foreign_host_is_refused_in_header_mode(
    collected: KubeSim, host: str, foreign: str
) -> None:
    ns, name = a_kustomization(collected)
    for target in ("/api/v1/objects", f"/api/v1/objects/cluster-000/{ns}/Kustomization/{name}"):
        answer = request(host, target, H, http_host=foreign)
        assert answer.status == 400, answer.body
        assert answer.body["error"] == "invalid_host"
        assert "FLEETSCOPE_ALLOWED_HOSTS" in answer.body["message"]
    assert leaf_requests(collected) == 0


def test_loopback_names_are_the_default_hosts(collected: KubeSim, host: str) -> None:
    port = host.rsplit(":", 1)[1]
    for name in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert request(host, "/api/v1/objects?limit=1", H, http_host=name).status == 200, name
    for probe in ("/healthz", "/readyz", "/metrics"):  # reached by address: not checked
        assert request(host, probe, http_host="10.1.2.3:8080").status == 200


@pytest.fixture
def named(collected: KubeSim, settings) -> Iterator[str]:
    allowed = ("fleetscope.example.com", "ops.example.com:8443")
    with serve(make_app(settings.replace(allowed_hosts=allowed))) as h:
        yield h


def test_allowed_hosts_replace_the_loopback_names(named: str) -> None:
    def status(http_host: str) -> int:
        return request(named, "/api/v1/objects?limit=1", H, http_host=http_host).status

    assert status("fleetscope.example.com") == 200
    assert status("fleetscope.example.com:443") == 200
    assert status("ops.example.com:8443") == 200
    assert status("ops.example.com:8444") == 400
    assert status("localhost") == 400


def test_anonymous_mode_checks_the_host_too(collected: KubeSim, settings) -> None:
    with serve(make_app(settings.replace(auth_mode="anonymous"))) as h:
        assert request(h, "/api/v1/objects?limit=1").status == 200
        answer = request(h, "/api/v1/objects?limit=1", http_host="evil.example")
        assert answer.status == 400 and answer.body["error"] == "invalid_host"


def test_metrics_name_no_cluster_by_default(collected: KubeSim, host: str, settings) -> None:
    assert request(host, "/api/v1/objects?limit=1", H).status == 200
    text = _metrics(host)
    assert "fleetscope_fleet_clusters" in text  # fleet-wide gauges stay
    assert "cluster=" not in text
    assert not any(c in text for c in collected.clusters)

    with serve(make_app(settings.replace(metrics_cluster_labels=True))) as opted_in:
        text = _metrics(opted_in)
        assert all(f'cluster="{c}"' in text for c in collected.clusters)


def _metrics(host: str) -> str:
    import http.client

    name, port = host.rsplit(":", 1)
    conn = http.client.HTTPConnection(name, int(port), timeout=10)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()
