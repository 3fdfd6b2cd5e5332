"""Attack: a tenant who may write registration objects on the management cluster hands fleetscope
a kubeconfig that runs a command (`exec`, `auth-provider` `cmd-path`) or names a local file
(`tokenFile` pointing at fleetscope's own service-account token, `certificate-authority`,
`client-certificate`), through every registry source, against kubesim as the management cluster
and the real kubernetes client. Whatever the source, the cluster is registered as not ready with
the refused field as its `registryError` (status, logs, metrics), the marker file the command
would write never appears, the tenant's listener never receives the token, and no leaf is asked
anything; loading such a config directly is refused too (the check cannot be bypassed).
Argo CD's `execProviderConfig` with `/bin/sh` is refused unless the operator allow-lists it."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from collector.clusters import ClusterSource
from collector.jobs import Collector, collect_once
from common.errors import ClusterError
from common.index import keys, syncstatus
from common.index.registry_record import Record
from common.kinds.registry import builtin_registry
from common.leaf import registry
from common.leaf.client import ClusterConfig
from common.redis_client import connect
from common.settings import Settings
from kubesim.server import KubeSim
from query.fleet_metrics import fleet_families
from tests.support import mgmtsim
from tests.support.http import make_app
from tests.support.mgmtsim import MGMT
from tests.support.redis_dump import redis_dump
from tests.support.registry_attacks import (
    EXEC_API,
    SWITCHES,
    credential,
    kubeconfig,
    listener,
    register,
)

REG = builtin_registry()
ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
SA_TOKEN = "fsSECRET-service-account-token-0x5aa5"
SOURCES = ["secret", "gitopscluster", "capi"]
ATTACKS = ["exec", "auth-provider", "tokenFile", "certificate-authority", "client-certificate"]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = mgmtsim.start(tmp_path)
    yield s
    s.stop()


def _settings(sim: KubeSim, tmp_path: Path, redis_url: str, **changes: Any) -> Settings:
    """Only cluster-000 in the kubeconfig directory: cluster-001 is the target a file-path
    kubeconfig would reach (so any request it receives is the attack's)."""
    clusters = tmp_path / "dir"
    clusters.mkdir(exist_ok=True)
    (clusters / "cluster-000.yaml").write_text(
        (sim.kubeconfig_dir / "cluster-000.yaml").read_text()
    )
    base = dict(
        redis_url=redis_url,
        auth_mode="header",
        trusted_proxy_cidrs=("127.0.0.1/32",),
        clusters_dir=str(clusters),
    )
    return mgmtsim.management_settings(sim, tmp_path, **base, **changes)


def _attack(attack: str, sim: KubeSim, tmp_path: Path, ear_url: str) -> tuple[dict, str]:
    """The attacker's kubeconfig and the field fleetscope must name when refusing it."""
    marker = tmp_path / "marker"
    ca_data = {"certificate-authority-data": base64.b64encode(sim.ca_pem).decode()}
    leaf, token = sim.url("cluster-001"), sim.collector_token
    if attack == "exec":
        plugin = {
            "command": "/bin/sh",
            "args": ["-c", f"touch {marker}; echo {credential(token)}"],
            "apiVersion": EXEC_API,
        }
        return kubeconfig(ear_url, {"exec": plugin}), "users[0].user.exec"
    if attack == "auth-provider":
        provider = {
            "name": "gcp",
            "config": {"cmd-path": "/usr/bin/touch", "cmd-args": str(marker)},
        }
        return kubeconfig(ear_url, {"auth-provider": provider}), "users[0].user.auth-provider"
    if attack == "tokenFile":
        path = tmp_path / "sa-token"  # stands for /var/run/secrets/kubernetes.io/...
        path.write_text(SA_TOKEN)
        return kubeconfig(ear_url, {"tokenFile": str(path)}), "users[0].user.tokenFile"
    if attack == "certificate-authority":
        ca = sim.ca_file(tmp_path)
        config = kubeconfig(leaf, {"token": token}, {"certificate-authority": str(ca)})
        return config, "clusters[0].cluster.certificate-authority"
    ca = sim.ca_file(tmp_path)
    user = {"token": token, "client-certificate": str(ca), "client-key": str(ca)}
    return kubeconfig(leaf, user, ca_data), "users[0].user.client-certificate"


def _status(settings: Settings) -> dict:
    resp = make_app(settings).test_client().get("/api/v1/status", headers=ADMIN)
    assert resp.status_code == 200
    return resp.get_json()


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("source", SOURCES)
def test_a_registry_kubeconfig_never_runs_a_command_nor_reads_a_file(
    source: str,
    attack: str,
    sim: KubeSim,
    tmp_path: Path,
    redis_url: str,
    r: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with listener() as ear:
        config, field = _attack(attack, sim, tmp_path, ear.url)
        name = register(sim, source, config)
        settings = _settings(sim, tmp_path, redis_url, **{SWITCHES[source]: True})
        rc = connect(redis_url)
        source_ = ClusterSource(settings, r=rc)
        c = Collector(settings, rc, REG, source_)
        sim.clear_request_log()
        outcomes = {o.cluster: o for o in collect_once(c)}
        assert outcomes["cluster-000"].ok  # the rest of the fleet is collected as ever
        assert outcomes[name].objects.skipped.startswith("not ready: kubeconfig field")
        # no path hands the config to the kubernetes client: sources, the query's pool,
        # the watcher's configs, and a direct load
        assert name not in source_.configs(refresh=True)
        assert name not in registry.load_cluster_configs(settings)
        direct = ClusterConfig(name, source, "test", config)
        with pytest.raises(ClusterError, match=re.escape(field)):
            direct.configuration()
        app = make_app(settings).test_client()
        detail = app.get(f"/api/v1/objects/{name}/ns/Kustomization/x", headers=ADMIN)
        assert detail.status_code in (404, 502)
        status = _status(settings)
        metrics = {m.name: m for m in fleet_families(_syncs(r), settings, 0.0)}
        source_.close()

    assert not (tmp_path / "marker").exists()  # nothing ran
    assert ear.requests == []  # the tenant's server heard nothing (no token, no request)
    assert sim.request_log("cluster-001") == []  # no file-path credential reached a leaf
    record = Record.decode(r.hget(keys.CLUSTERS, name))
    assert not record.ready and field in record.error and field in record.reason
    problems = [p for p in status["registry"]["problems"] if p["cluster"] == name]
    assert [p["type"] for p in problems] == ["refused-credentials"]
    assert field in problems[0]["message"]
    not_ready = {x["cluster"]: x for x in status["registry"]["notReady"]}
    assert field in not_ready[name]["reason"]
    assert f"kubeconfig field {field} is refused" in caplog.text  # logged
    refused = metrics["fleetscope_registry_refused_clusters"].samples
    assert {s.labels["reason"]: s.value for s in refused} == {"credentials": 1.0, "conflict": 0.0}
    everything = "\n".join([redis_dump(r), json.dumps(status), caplog.text])
    assert SA_TOKEN not in everything


def _syncs(r: redis.Redis) -> list[Any]:
    return list(syncstatus.read_all(r, syncstatus.registered_clusters(r)).values())


def test_argocd_exec_provider_runs_only_when_allow_listed(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    marker = tmp_path / "marker"
    ca = {"caData": base64.b64encode(sim.ca_pem).decode()}
    plugin = {
        "command": "/bin/sh",  # exists, absolute: passed the old "command exists" check
        "args": ["-c", f"touch {marker}; echo {credential(sim.collector_token)}"],
        "apiVersion": EXEC_API,
    }
    config = {"execProviderConfig": plugin, "tlsClientConfig": ca}
    sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-001", "evil", "evil", config=config))
    settings = _settings(sim, tmp_path, redis_url, argocd_clusters=True)
    c = Collector(settings, connect(redis_url), REG, ClusterSource(settings, r=connect(redis_url)))
    sim.clear_request_log()
    outcomes = {o.cluster: o for o in collect_once(c)}
    c.source.close()
    assert "FLEETSCOPE_EXEC_COMMANDS" in outcomes["evil"].objects.skipped
    assert not marker.exists() and sim.request_log("cluster-001") == []
    record = Record.decode(r.hget(keys.CLUSTERS, "evil"))
    assert not record.ready and "FLEETSCOPE_EXEC_COMMANDS" in record.error
    by_name = {x["cluster"]: x for x in _status(settings)["registry"]["notReady"]}
    assert "execProviderConfig" in by_name["evil"]["reason"]

    # the operator allow-lists /bin/sh: now it runs, and its token reaches cluster-001
    allowed = settings.replace(exec_commands=("/bin/sh",))
    c = Collector(allowed, connect(redis_url), REG, ClusterSource(allowed, r=connect(redis_url)))
    outcomes = {o.cluster: o for o in collect_once(c)}
    c.source.close()
    assert outcomes["evil"].ok, outcomes["evil"].objects.error
    assert marker.exists() and sim.request_log("cluster-001")
    assert Record.decode(r.hget(keys.CLUSTERS, "evil")).ready
