"""Proxy abuse over real HTTP: path traversal (`..`, encoded slashes, `%2e%2e`), unknown kinds,
invalid and over-long names, clusters not in the registry, stray parameters. Each is a JSON
400/404 and, by kubesim's own request log, no request reaches any leaf."""

from __future__ import annotations

import pytest

from collector.jobs import Collector, collect_once
from kubesim.server import KubeSim
from tests.support.http import make_app, raw_get, serve
from tests.support.small_fleet import ADMIN

BASE = "/api/v1/objects"
HOSTILE = [
    # traversal, literal and encoded
    f"{BASE}/cluster-000/app-0000/Kustomization/../../../../api/v1/secrets",
    f"{BASE}/cluster-000/app-0000/Kustomization/..%2F..%2Fapi%2Fv1%2Fsecrets",
    f"{BASE}/cluster-000/app-0000/Kustomization/..%2f..%2fsecrets",
    f"{BASE}/cluster-000/%2e%2e/Kustomization/apps",
    f"{BASE}/cluster-000/app-0000/Kustomization/%2e%2e",
    f"{BASE}/cluster-000/app-0000/Kustomization/%2E%2E%2F%2E%2E",
    f"{BASE}/cluster-000/..%252f..%252fsecrets/Kustomization/apps",
    f"{BASE}/cluster-000/kube-system%2F..%2Fdefault/Kustomization/apps",
    f"{BASE}/..%2Fcluster-001/app-0000/Kustomization/apps",
    f"{BASE}/cluster-000/app-0000/Kustomization/apps%00.json",
    f"{BASE}/cluster-000/app-0000/Kustomization/apps%3Fwatch%3D1",
    f"{BASE}/cluster-000/app-0000/Kustomization/apps;x=1",
    f"{BASE}/cluster-000/app-0000/Kustomization/%5C..%5Csecrets",
    # unknown kinds (also Kubernetes kinds fleetscope does not serve)
    f"{BASE}/cluster-000/app-0000/Secret/db-password",
    f"{BASE}/cluster-000/app-0000/secrets/db-password",
    f"{BASE}/cluster-000/app-0000/Kustomization%2Fstatus/apps",
    # invalid or over-long names and namespaces
    f"{BASE}/cluster-000/app-0000/Kustomization/{'a' * 254}",
    f"{BASE}/cluster-000/{'n' * 64}/Kustomization/apps",
    f"{BASE}/cluster-000/app-0000/Kustomization/APPS",
    f"{BASE}/cluster-000/app-0000/Kustomization/-apps",
    f"{BASE}/cluster-000/App_0000/Kustomization/apps",
    f"{BASE}/cluster-000/app-0000/Kustomization/%F0%9F%92%A5",
    # clusters not in the registry, or not cluster names at all
    f"{BASE}/cluster-999/app-0000/Kustomization/apps",
    f"{BASE}/Cluster_000/app-0000/Kustomization/apps",
    f"{BASE}/{'c' * 300}/app-0000/Kustomization/apps",
    f"{BASE}/127.0.0.1:6443/app-0000/Kustomization/apps",
    # parameters the proxy does not take (they must not be forwarded)
    f"{BASE}/cluster-000/app-0000/Kustomization/apps?watch=1",
    f"{BASE}/cluster-000/app-0000/Kustomization/apps?fieldSelector=metadata.name%3Dx",
]


@pytest.fixture
def host(sim: KubeSim, collector: Collector, settings):
    assert all(o.ok for o in collect_once(collector))
    with serve(make_app(settings)) as h:
        sim.clear_request_log()
        yield h


def leaf_requests(sim: KubeSim) -> int:
    return sum(len(sim.request_log(c)) for c in sim.clusters)


def test_hostile_detail_paths_never_reach_a_leaf(sim: KubeSim, host: str) -> None:
    answers = {target: raw_get(host, target, ADMIN) for target in HOSTILE}
    bad = {t: a for t, a in answers.items() if a[0] not in (400, 404)}
    assert not bad, bad
    for target, (_status, body) in answers.items():
        assert body is not None and body["error"] and body["message"], target
    assert leaf_requests(sim) == 0

    # The control: the same client, a valid path, reaches the leaf as the caller.
    obj = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    ok = f"{BASE}/cluster-000/{obj['namespace']}/Kustomization/{obj['name']}"
    status, body = raw_get(host, ok, ADMIN)
    assert status == 200 and body["object"]["metadata"]["name"] == obj["name"]
    [rec] = sim.request_log("cluster-000")
    assert rec.impersonate_user == "admin-0" and rec.verb == "get"


def test_unauthenticated_detail_reads_never_reach_a_leaf(sim: KubeSim, host: str) -> None:
    obj = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    ok = f"{BASE}/cluster-000/{obj['namespace']}/Kustomization/{obj['name']}"
    assert raw_get(host, ok)[0] == 401
    assert raw_get(host, ok, {"X-Remote-Group": "fleet-admins"})[0] == 401
    assert leaf_requests(sim) == 0
