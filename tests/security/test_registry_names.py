"""Attack: name squatting. A tenant who may write GitopsClusters and Secrets in a registry
namespace labels its registration `fleetscope.io/cluster-name: prod` to take the name of a real
cluster, so that users' detail reads (with their impersonation headers) go to the tenant's
server. Outside `FLEETSCOPE_CLUSTER_NAME_LABEL_NAMESPACES` the label is ignored (the registration
keeps its `<namespace>.<name>`); inside, a name claimed from two sources is refused for both,
with the conflict in `/api/v1/status`, and no detail read goes to either server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

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
from tests.support.registry_attacks import kubeconfig, listener

REG = builtin_registry()
ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = mgmtsim.start(tmp_path)
    yield s
    s.stop()


def _settings(sim: KubeSim, tmp_path: Path, redis_url: str, **changes: Any) -> Settings:
    base = dict(
        redis_url=redis_url,
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        argocd_clusters=True,
        gitopsclusters=True,
        gitopsclusters_namespace="fleet,tenant",
    )
    return mgmtsim.management_settings(sim, tmp_path, **{**base, **changes})


def _squat(sim: KubeSim, namespace: str, server: str) -> None:
    """The tenant's GitopsCluster `<namespace>/squat`, labelled to be called `prod`."""
    config = kubeconfig(server, {"token": "tenant-token"})
    secret = mgmtsim.kubeconfig_secret(sim, "cluster-000", "squat-kc", namespace)
    secret["data"]["value"] = mgmtsim.b64(yaml.safe_dump(config))
    sim.apply(MGMT, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    sim.apply(MGMT, secret)
    labels = {"fleetscope.io/cluster-name": "prod"}
    sim.apply(MGMT, mgmtsim.gitopscluster("squat", namespace, "squat-kc", labels=labels))


def _detail(settings: Settings, sim: KubeSim) -> tuple[Any, dict]:
    obj = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    path = f"/api/v1/objects/prod/{obj['namespace']}/Kustomization/{obj['name']}"
    return make_app(settings).test_client().get(path, headers=ADMIN), obj


def test_the_name_label_is_ignored_outside_the_allowed_namespaces(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    settings = _settings(sim, tmp_path, redis_url, cluster_name_label_namespaces=("fleet",))
    with listener() as ear:
        _squat(sim, "tenant", ear.url)  # before the real cluster registers
        c = Collector(
            settings, connect(redis_url), REG, ClusterSource(settings, r=connect(redis_url))
        )
        assert c.reconcile().added == ["tenant.squat"]  # its own name, not `prod`
        sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-000", "cluster-prod", "prod"))
        outcomes = {o.cluster: o for o in collect_once(c)}
        c.source.close()
        assert outcomes["prod"].ok
        resp, obj = _detail(settings, sim)
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["object"]["metadata"]["uid"] == obj["uid"]  # the real cluster's
    assert Record.decode(r.hget(keys.CLUSTERS, "prod")).source == "argocd"
    impersonated = [h for _, h in ear.requests if "Impersonate-User" in h]
    assert impersonated == []  # no user's identity went to the tenant's server


def test_a_name_claimed_by_two_sources_is_refused_for_both_and_shown_in_status(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    settings = _settings(sim, tmp_path, redis_url, cluster_name_label_namespaces=("fleet",))
    sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-000", "cluster-prod", "prod"))
    c = Collector(settings, connect(redis_url), REG, ClusterSource(settings, r=connect(redis_url)))
    assert all(o.ok for o in collect_once(c))
    with listener() as ear:
        _squat(sim, "fleet", ear.url)  # `fleet` may use the label: a second claim on `prod`
        sim.clear_request_log()
        outcomes = {o.cluster: o for o in collect_once(c)}
        c.source.close()
        resp, _ = _detail(settings, sim)
        status = make_app(settings).test_client().get("/api/v1/status", headers=ADMIN).get_json()
    assert outcomes["prod"].objects.skipped.startswith("not ready: cluster name prod is claimed")
    assert resp.status_code >= 400  # refused for both: no server gets the read
    assert ear.requests == [] and sim.request_log("cluster-000") == []
    record = Record.decode(r.hget(keys.CLUSTERS, "prod"))
    assert not record.ready and record.conflict  # still registered: its data is kept
    assert r.exists(keys.rows("prod"))
    (problem,) = (p for p in status["registry"]["problems"] if p["cluster"] == "prod")
    assert problem["type"] == "conflict"
    assert sorted(problem["origins"]) == [
        "argocd secret argocd/cluster-prod",
        "gitopscluster fleet/squat",
    ]
    row = {x["cluster"]: x for x in status["clusters"]}["prod"]
    assert not row["ready"] and "claimed by" in row["registryError"]
