"""Clusters registered on a management cluster, end to end: kubesim plays the management cluster
and the leaves (HTTPS, the real kubernetes client), the collector reconciles and syncs into a
real Redis, the query app answers `/api/v1/status`. Each source adds a cluster, rotates its
token (the next leaf request uses the new one: the old one is revoked) and removes it live; a
name claimed twice is an error in the status and the logs; not-ready clusters are registered,
reported and never synced; and no token, password or exec argument ever reaches the logs, Redis
or an answer, also when the leaf refuses it or it cannot be used."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from collector.clusters import ClusterSource
from collector.jobs import Collector, collect_once
from common.index import keys
from common.index.registry_record import Record
from common.kinds.registry import builtin_registry
from common.redis_client import connect
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import mgmtsim
from tests.support.http import make_app
from tests.support.mgmtsim import MGMT
from tests.support.redis_dump import redis_dump

REG = builtin_registry()
ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
MEMBER = {"X-Remote-User": "solo"}  # a RoleBinding in one namespace of cluster-000


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = mgmtsim.start(tmp_path)
    yield s
    s.stop()


def _settings(sim: KubeSim, tmp_path: Path, redis_url: str, **changes: object) -> Settings:
    base = dict(redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",))
    return mgmtsim.management_settings(sim, tmp_path, **base, **changes)  # type: ignore[arg-type]


def _collector(settings: Settings) -> Collector:
    r = connect(settings.redis_url)
    return Collector(settings, r, REG, ClusterSource(settings, r=r))


def _status(settings: Settings, headers: dict[str, str] = ADMIN) -> dict:
    resp = make_app(settings).test_client().get("/api/v1/status", headers=headers)
    assert resp.status_code == 200
    return resp.get_json()


@pytest.mark.parametrize("source", ["gitopscluster", "capi", "argocd", "secret"])
def test_a_source_adds_rotates_and_removes_a_cluster_live(
    source: str,
    sim: KubeSim,
    tmp_path: Path,
    redis_url: str,
    r: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    old = mgmtsim.leaf_token(sim, f"fsSECRET-{source}-old-0x51ab")
    new = mgmtsim.leaf_token(sim, f"fsSECRET-{source}-new-0x9c3d")
    reg = mgmtsim.Registration(sim, source, "cluster-001")
    settings = reg.settings(_settings(sim, tmp_path, redis_url))
    c = _collector(settings)
    bodies = []

    # added: the next reconcile registers it, and it syncs with the registered token
    reg.apply(old)
    result = c.reconcile()
    assert (result.added, result.to_sync) == ([reg.name], [reg.name])
    record = Record.decode(r.hget(keys.CLUSTERS, reg.name))
    assert record.source == source and record.ready and record.server == sim.url("cluster-001")
    assert c.sync_objects(reg.name).ok and c.sync_rbac(reg.name).ok
    bodies.append(json.dumps(_status(settings)))

    # rotated: the record changes, and the next leaf request uses the new token
    reg.apply(new)
    sim.revoke_token(old)
    result = c.reconcile()
    assert result.updated == [reg.name] and result.to_sync == [reg.name]
    assert Record.decode(r.hget(keys.CLUSTERS, reg.name)).revision != record.revision
    sim.clear_request_log("cluster-001")
    synced = c.sync_objects(reg.name)
    assert synced.ok, synced.error
    assert {x.status for x in sim.request_log("cluster-001")} == {200}
    status = _status(settings)
    assert [x["cluster"] for x in status["clusters"]] == [reg.name]
    assert status["clusters"][0]["source"] == source and status["clusters"][0]["ready"]
    bodies.append(json.dumps(status))

    # removed: its data goes with it
    reg.remove()
    result = c.reconcile()
    assert result.removed == [reg.name]
    assert r.exists(*keys.cluster_keys(reg.name)) == 0

    c.source.close()
    logged = [json.dumps(rec.__dict__, default=str) for rec in caplog.records]
    text = "\n".join([*logged, redis_dump(r), *bodies])
    assert old not in text and new not in text


def test_a_name_claimed_twice_is_an_error_in_status_and_logs(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(
        sim,
        tmp_path,
        redis_url,
        clusters_dir=str(sim.kubeconfig_dir),
        argocd_clusters=True,
        gitopsclusters=True,
        cluster_name_label_namespaces=("fleet",),
    )
    c = _collector(settings)
    assert c.reconcile().added == ["cluster-000", "cluster-001"]
    assert all(o.ok for o in collect_once(c))
    # cluster-000 is a file already; Argo CD now calls another cluster by that name, too
    sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-001", "cluster-dup", "cluster-000"))
    # "twin" is new, and two sources claim it at once
    labels = {"fleetscope.io/cluster-name": "twin"}
    sim.apply(MGMT, mgmtsim.kubeconfig_secret(sim, "cluster-000", "twin-kc"))
    sim.apply(MGMT, mgmtsim.gitopscluster("twin", secret_ref="twin-kc", labels=labels))
    sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-001", "cluster-twin", "twin"))
    caplog.set_level(logging.WARNING)
    result = c.reconcile()
    assert result.added == [] and result.removed == []
    kept = Record.decode(r.hget(keys.CLUSTERS, "cluster-000"))
    assert kept.source == "dir"  # never a silent overwrite
    assert not kept.ready  # refused for both claims until an operator resolves it
    assert "claimed by" in caplog.text and "argocd secret argocd/cluster-dup" in caplog.text

    status = _status(settings)
    by_name = {x["cluster"]: x for x in status["clusters"]}
    assert "argocd secret argocd/cluster-dup" in by_name["cluster-000"]["registryError"]
    problems = {p["cluster"]: p for p in status["registry"]["problems"]}
    assert sorted(problems) == ["cluster-000", "twin"]
    assert problems["twin"]["type"] == "conflict"
    assert problems["twin"]["origins"] == [
        "gitopscluster fleet/twin",
        "argocd secret argocd/cluster-twin",
    ]
    assert "none is registered" in problems["twin"]["message"]
    # a team member sees their clusters' problems, and how many others there are
    member = _status(settings, MEMBER)["registry"]
    assert [p["cluster"] for p in member["problems"]] == ["cluster-000"]
    assert member["hidden"] == 1
    # no detail read of cluster-000 goes anywhere while its name is in conflict
    obj = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    path = f"/api/v1/objects/cluster-000/{obj['namespace']}/Kustomization/{obj['name']}"
    sim.clear_request_log()
    resp = make_app(settings).test_client().get(path, headers=ADMIN)
    assert resp.status_code >= 400, resp.get_json()
    assert sim.request_log("cluster-000") == sim.request_log("cluster-001") == []
    # resolved: the Argo CD claim goes, and cluster-000 is ready again
    sim.delete(MGMT, "Secret", "argocd", "cluster-dup")
    assert c.reconcile().to_sync == ["cluster-000"]
    resp = make_app(settings).test_client().get(path, headers=ADMIN)
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["object"]["metadata"]["uid"] == obj["uid"]
    c.source.close()


def test_not_ready_clusters_are_registered_reported_and_left_alone(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    settings = _settings(
        sim, tmp_path, redis_url, clusters_dir=str(sim.kubeconfig_dir), gitopsclusters=True,
        capi_clusters=True,
    )  # fmt: skip
    sim.apply(MGMT, mgmtsim.kubeconfig_secret(sim, "cluster-001", "waiting-kc"))
    waiting = mgmtsim.gitopscluster(
        "waiting", secret_ref="waiting-kc", ready="False", reason="WaitingForSecret",
        message="waiting for cluster secret to be available",
    )  # fmt: skip
    sim.apply(MGMT, waiting)
    sim.apply(MGMT, mgmtsim.capi_cluster("booting", ready=False))
    c = _collector(settings)
    result = c.reconcile()
    assert result.added == ["cluster-000", "cluster-001", "fleet.booting", "fleet.waiting"]
    assert result.not_ready == ["fleet.booting", "fleet.waiting"]
    assert c.syncable() == ["cluster-000", "cluster-001"]
    sim.clear_request_log()
    outcomes = {o.cluster: o for o in collect_once(c)}
    assert outcomes["fleet.waiting"].ok and outcomes["fleet.waiting"].objects.skipped == (
        "not ready: Ready=False (WaitingForSecret): waiting for cluster secret to be available"
    )
    syncs = [x for x in sim.request_log("cluster-001") if x.user == "fleetscope-collector"]
    assert len(syncs) == len(sim.request_log("cluster-001"))  # only cluster-001's own sync

    status = _status(settings)
    assert status["state"] == "degraded" and "2 not ready" in status["message"]
    assert (status["collected"], status["total"]) == (2, 4)
    not_ready = {x["cluster"]: x for x in status["registry"]["notReady"]}
    assert not_ready["fleet.booting"]["reason"].startswith("control plane not ready")
    assert not_ready["fleet.waiting"]["source"] == "gitopscluster"

    # Ready again: the next reconcile registers the change and syncs it at once
    ready = mgmtsim.gitopscluster("waiting", secret_ref="waiting-kc", ready="True")
    sim.patch_status(MGMT, "GitopsCluster", "fleet", "waiting", ready["status"])
    result = c.reconcile()
    assert result.to_sync == ["fleet.waiting"]
    assert c.sync_objects("fleet.waiting").ok and c.sync_rbac("fleet.waiting").ok
    row = {x["cluster"]: x for x in _status(settings)["clusters"]}["fleet.waiting"]
    assert row["ready"] and row["notReadyReason"] is None and row["collected"]
    c.source.close()


def test_refused_and_unusable_argocd_credentials_never_leak(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = {
        "token": "fsSECRET-argo-token-0x77e1",
        "password": "fsSECRET-argo-password-0x03b2",
        "exec": "fsSECRET-argo-exec-arg-0x5d5d",
    }
    ca = {"caData": mgmtsim.b64(sim.ca_pem.decode())}
    configs = {
        "refused": {"bearerToken": secrets["token"], "tlsClientConfig": ca},
        "basic": {"username": "admin", "password": secrets["password"], "tlsClientConfig": ca},
        "plugin": {
            "execProviderConfig": {"command": "no-such-auth-plugin", "args": [secrets["exec"]]},
            "tlsClientConfig": ca,
        },
    }
    for name, config in configs.items():
        sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-000", name, name, config=config))
    settings = _settings(sim, tmp_path, redis_url, argocd_clusters=True)
    c = _collector(settings)
    outcomes = {o.cluster: o for o in collect_once(c)}
    assert "HTTP 401" in outcomes["refused"].objects.error
    assert "HTTP 401" in outcomes["basic"].objects.error
    assert outcomes["plugin"].objects.skipped.startswith(
        "not ready: execProviderConfig: command 'no-such-auth-plugin' is refused"
    )
    bodies = [json.dumps(_status(settings))]
    client = make_app(settings).test_client()
    for name in configs:
        bodies.append(client.get(f"/api/v1/objects/{name}/ns/Kustomization/x", headers=ADMIN).text)
    c.source.close()
    logged = [json.dumps(rec.__dict__, default=str) for rec in caplog.records]
    text = "\n".join([*logged, redis_dump(r), *bodies])
    assert [k for k, v in secrets.items() if v in text] == []
