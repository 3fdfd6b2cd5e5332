"""Attack: an exec credential plugin, where one is allowed (the operator's allow-list for Argo CD,
the kubeconfig directory), tries to read fleetscope's secrets from its environment, never ends,
or hangs while other clusters wait behind it. The plugin sees PATH, HOME, its config's own
variables and KUBERNETES_EXEC_INFO, never a `FLEETSCOPE_*` one; it is killed, with whatever it
started, at `FLEETSCOPE_EXEC_TIMEOUT_S`; and while one hangs, a detail read and a sync of another,
healthy cluster complete, and the watcher watches the other clusters (shown by order of events,
not by timing)."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from collector.clusters import ClusterSource
from collector.jobs import Collector, collect_once
from collector.watch.replica import WatchReplica
from common.kinds.registry import builtin_registry
from common.leaf import registry
from common.redis_client import connect
from common.settings import Settings
from kubesim.server import KubeSim
from tests.support import mgmtsim
from tests.support.http import make_app
from tests.support.mgmtsim import MGMT
from tests.support.registry_attacks import EXEC_API, credential, script
from tests.support.waiting import wait_for

REG = builtin_registry()
ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
CANARY = "fsSECRET-continue-token-key-0x2e2e"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    s = mgmtsim.start(tmp_path)
    yield s
    s.stop()


def _settings(sim: KubeSim, tmp_path: Path, redis_url: str, **changes: Any) -> Settings:
    base = dict(redis_url=redis_url, auth_mode="header", trusted_proxy_cidrs=("127.0.0.1/32",))
    return mgmtsim.management_settings(sim, tmp_path, **base, **changes)


def _argocd(sim: KubeSim, name: str, command: str, env: dict[str, str] | None = None) -> None:
    plugin = {"command": command, "apiVersion": EXEC_API, "env": env or {}}
    config = {
        "execProviderConfig": plugin,
        "tlsClientConfig": {"caData": base64.b64encode(sim.ca_pem).decode()},
    }
    sim.apply(MGMT, mgmtsim.argocd_secret(sim, "cluster-001", name, name, config=config))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except OSError:
        return False


def test_an_allow_listed_plugin_sees_no_fleetscope_variable_and_is_killed_at_the_timeout(
    sim: KubeSim,
    tmp_path: Path,
    redis_url: str,
    r: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETSCOPE_CONTINUE_TOKEN_KEY", CANARY)  # what a plugin would steal
    monkeypatch.setenv("FLEETSCOPE_REDIS_URL", redis_url)
    env_file, pid_file = tmp_path / "env", tmp_path / "pid"
    ok = script(tmp_path / "ok.sh", f"env > {env_file}\necho {credential(sim.collector_token)}\n")
    hang = script(tmp_path / "hang.sh", f"sleep 300 &\necho $! > {pid_file}\nwait\n")
    _argocd(sim, "ok", ok, {"ARGO_VAR": "from-the-config", "FLEETSCOPE_LEAK": "x"})
    _argocd(sim, "hung", hang)
    settings = _settings(
        sim, tmp_path, redis_url, argocd_clusters=True, exec_commands=(ok, hang), exec_timeout_s=1
    )
    c = Collector(settings, connect(redis_url), REG, ClusterSource(settings, r=connect(redis_url)))
    outcomes = {o.cluster: o for o in collect_once(c)}
    c.source.close()

    assert outcomes["ok"].ok, outcomes["ok"].objects.error  # the plugin works...
    seen = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    assert not [k for k in seen if k.startswith("FLEETSCOPE_")]  # ...without fleetscope's secrets
    assert CANARY not in env_file.read_text() and redis_url not in env_file.read_text()
    assert seen["ARGO_VAR"] == "from-the-config" and seen["PATH"]
    assert "ExecCredential" in seen["KUBERNETES_EXEC_INFO"]
    assert set(seen) <= {"PATH", "HOME", "ARGO_VAR", "KUBERNETES_EXEC_INFO", "PWD", "SHLVL", "_"}

    error = outcomes["hung"].objects.error  # killed at FLEETSCOPE_EXEC_TIMEOUT_S
    assert "did not finish within 1s" in error and "killed" in error
    pid = int(pid_file.read_text())
    wait_for(lambda: not _alive(pid), 30, "the plugin's background sleep to be killed too")


def test_a_hung_plugin_delays_no_other_cluster(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    """`slow` (cluster-001 through a plugin in the kubeconfig directory) hangs on demand; while
    it hangs inside a detail read and a sync, cluster-000's detail read and sync finish."""
    clusters = tmp_path / "dir"
    clusters.mkdir()
    (clusters / "cluster-000.yaml").write_text(
        (sim.kubeconfig_dir / "cluster-000.yaml").read_text()
    )
    hang, started, release = tmp_path / "hang", tmp_path / "started", tmp_path / "release"
    plugin = script(
        tmp_path / "slow.sh",
        f"if [ -e {hang} ]; then\n  touch {started}\n"
        f"  i=0; while [ ! -e {release} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\nfi\n"
        f"echo {credential(sim.collector_token)}\n",
    )
    slow = sim.kubeconfig("cluster-001")
    for user in slow["users"]:
        user["user"] = {"exec": {"command": plugin, "apiVersion": EXEC_API}}
    (clusters / "slow.yaml").write_text(yaml.safe_dump(slow))
    # a plugin timeout far beyond the waits below: the plugin hangs, it is not killed
    settings = _settings(sim, tmp_path, redis_url, clusters_dir=str(clusters), exec_timeout_s=300)
    c = Collector(settings, connect(redis_url), REG, ClusterSource(settings, r=connect(redis_url)))
    assert all(o.ok for o in collect_once(c))  # the plugin answers at once: both synced
    c.source.close()
    obj = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    healthy_path = f"/api/v1/objects/cluster-000/{obj['namespace']}/Kustomization/{obj['name']}"
    slow_path = f"/api/v1/objects/slow/{obj['namespace']}/Kustomization/{obj['name']}"

    hang.touch()
    app = make_app(settings)  # a fresh leaf pool: the slow cluster's plugin runs again
    fresh = Collector(
        settings, connect(redis_url), REG, ClusterSource(settings, r=connect(redis_url))
    )
    done: dict[str, Any] = {}

    def run(what: str, call: Any) -> threading.Thread:
        t = threading.Thread(target=lambda: done.__setitem__(what, call()), daemon=True)
        t.start()
        return t

    try:
        slow_read = run("slow read", lambda: app.test_client().get(slow_path, headers=ADMIN))
        wait_for(started.exists, 30, "the slow plugin to start")
        healthy = run("healthy read", lambda: app.test_client().get(healthy_path, headers=ADMIN))
        wait_for(lambda: "healthy read" in done, 20, "cluster-000's detail read, while slow hangs")
        assert done["healthy read"].status_code == 200
        started.unlink()
        slow_sync = run("slow sync", lambda: fresh.sync_objects("slow"))
        wait_for(started.exists, 30, "the slow plugin to start in the sync")
        run("healthy sync", lambda: fresh.sync_objects("cluster-000"))
        wait_for(lambda: "healthy sync" in done, 20, "cluster-000's sync, while slow hangs")
        assert done["healthy sync"].ok, done["healthy sync"].error
        # the order of events: both healthy calls ended while the slow ones were still waiting
        assert "slow read" not in done and "slow sync" not in done
        assert slow_read.is_alive() and slow_sync.is_alive()
    finally:
        release.touch()
    slow_read.join(60)
    slow_sync.join(60)
    healthy.join(60)
    assert done["slow read"].status_code == 200 and done["slow sync"].ok
    fresh.source.close()
    assert os.path.exists(release)


def test_a_hung_plugin_delays_no_other_clusters_watch(
    sim: KubeSim, tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    """The watcher takes clusters in name order; `a-slow` comes first and its plugin hangs:
    cluster-000 is watched meanwhile, and `a-slow` once its plugin answers."""
    clusters = tmp_path / "dir"
    clusters.mkdir()
    (clusters / "cluster-000.yaml").write_text(
        (sim.kubeconfig_dir / "cluster-000.yaml").read_text()
    )
    started, release = tmp_path / "started", tmp_path / "release"
    plugin = script(
        tmp_path / "slow.sh",
        f"touch {started}\n"
        f"i=0; while [ ! -e {release} ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n"
        f"echo {credential(sim.collector_token)}\n",
    )
    slow = sim.kubeconfig("cluster-001")
    for user in slow["users"]:
        user["user"] = {"exec": {"command": plugin, "apiVersion": EXEC_API}}
    (clusters / "a-slow.yaml").write_text(yaml.safe_dump(slow))
    settings = _settings(  # a plugin timeout far beyond the waits below: the plugin hangs
        sim, tmp_path, redis_url, clusters_dir=str(clusters), watch_lease_ttl_s=2.0,
        exec_timeout_s=300,
    )  # fmt: skip
    registry.reconcile(r, registry.load_claims(settings))
    source = ClusterSource(settings, r=connect(redis_url))
    replica = WatchReplica(settings, connect(redis_url), REG, source, "a")
    stop = threading.Event()
    loop = threading.Thread(target=replica.run, args=(stop,), daemon=True)
    loop.start()
    try:
        wait_for(started.exists, 30, "the slow plugin to start")
        wait_for(lambda: "cluster-000" in replica.watches, 20, "cluster-000 watched, slow hung")
        assert not release.exists() and "a-slow" not in replica.watches  # the order of events
        release.touch()
        wait_for(lambda: "a-slow" in replica.watches, 30, "a-slow watched once its plugin ends")
    finally:
        release.touch()
        stop.set()
        loop.join(30)
        source.close()
