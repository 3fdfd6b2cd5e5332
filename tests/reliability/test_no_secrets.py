"""No secrets out: kubeconfigs carry distinctive tokens (the collector's, the admin's, one the
leaf rejects, one in a kubeconfig that cannot be loaded); after a full collection (in-process and
`fleetscope collect --once` as a subprocess, both logging at DEBUG) and a query round over every
route (detail reads, refusals and errors included), no log line, API answer, Redis key or value
contains any of them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml

from collector.jobs import collect_once
from common.rbac.authorizer import AUTHENTICATED, MASTERS, UserInfo
from kubesim.auth import ADMIN_USER, COLLECTOR_USER
from kubesim.server import KubeSim
from tests.reliability.stack import stack_env
from tests.support.paths import REPO
from tests.support.redis_dump import redis_dump
from tests.support.small_fleet import ADMIN

SECRETS = {
    "collector": "fsSECRETcollector0x7f3a9c21",
    "admin": "fsSECRETadmin0x1b8e55d0",
    "rejected": "fsSECRETrejected0x99aa7731",
    "broken": "fsSECRETbroken0x4c4c0e0e",
}


def plant_tokens(sim: KubeSim) -> Path:
    """Rewrite the kubeconfigs with our tokens; add a rejected and an unloadable cluster."""

    def register() -> None:
        sim.tokens.add(UserInfo(COLLECTOR_USER, (AUTHENTICATED,)), SECRETS["collector"])
        sim.tokens.add(UserInfo(ADMIN_USER, (MASTERS, AUTHENTICATED)), SECRETS["admin"])
        sim.tokens.collector, sim.tokens.admin = SECRETS["collector"], SECRETS["admin"]

    sim._call(register)  # kubesim's tokens live on its event loop thread
    assert sim.kubeconfig_dir is not None
    directory = sim.kubeconfig_dir
    sim.write_kubeconfigs(directory)
    rejected = yaml.safe_load(sim.kubeconfig_path("cluster-000").read_text())
    rejected["users"][0]["user"]["token"] = SECRETS["rejected"]
    (directory / "rejected.yaml").write_text(yaml.safe_dump(rejected))
    broken = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "contexts": [{"name": "x", "context": {"cluster": "missing", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": SECRETS["broken"]}}],
    }
    (directory / "broken.yaml").write_text(yaml.safe_dump(broken))
    return directory


def leaks(text: str | bytes) -> list[str]:
    data = text.decode(errors="replace") if isinstance(text, bytes) else text
    return [name for name, token in SECRETS.items() if token in data]


def query_round(api, sim: KubeSim) -> list[str]:
    """Every route, as an admin, a team member, a stranger and nobody; bodies as text."""
    obj = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    detail = f"/api/v1/objects/cluster-000/{obj['namespace']}/Kustomization/{obj['name']}"
    paths = [
        "/api/v1/status",
        "/api/v1/clusters",
        "/api/v1/access",
        "/api/v1/objects?limit=500",
        "/api/v1/facets",
        detail,
        detail.replace(obj["name"], "no-such-object"),
        f"/api/v1/objects/rejected/{obj['namespace']}/Kustomization/{obj['name']}",
        f"/api/v1/objects/broken/{obj['namespace']}/Kustomization/{obj['name']}",
        "/metrics",
        "/readyz",
        "/api/v1/openapi.json",
    ]
    callers = [ADMIN, {"X-Remote-User": "dev-team-00", "X-Remote-Group": "team-00"}]
    callers += [{"X-Remote-User": "nobody"}, {}]
    bodies = []
    for headers in callers:
        for path in paths:
            resp = api.get(path, headers=headers)
            bodies.append(f"{path} {resp.status_code} {resp.headers} {resp.get_data(as_text=True)}")
    return bodies


def test_no_token_in_logs_answers_or_redis(
    sim: KubeSim, settings, r: redis.Redis, api, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clusters = plant_tokens(sim)
    from collector.clusters import ClusterSource
    from collector.jobs import Collector
    from tests.support.small_fleet import REG

    collector = Collector(settings, r, REG, ClusterSource(settings))
    outcomes = {o.cluster: o for o in collect_once(collector)}
    assert all(outcomes[c].ok for c in sim.clusters)
    assert not outcomes["rejected"].ok and not outcomes["broken"].ok
    bodies = query_round(api, sim)
    assert {" 200 ", " 401 ", " 404 "} <= {
        code for b in bodies for code in (" 200 ", " 401 ", " 403 ", " 404 ") if code in b[:120]
    }

    env = stack_env(settings.redis_url, clusters, tmp_path, log_level="DEBUG", log_format="json")
    proc = subprocess.run(
        [sys.executable, "-m", "fleetscope", "collect", "--once"],
        env=env,
        capture_output=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 1, "two clusters fail"  # and the others were collected
    assert b"rejected" in proc.stdout + proc.stderr

    logged = [
        rec.getMessage() + (rec.exc_text or "") + json.dumps(rec.__dict__, default=str)
        for rec in caplog.records
    ]
    assert caplog.records, "logs were captured"
    assert leaks("\n".join(logged)) == [], "in-process logs"
    assert leaks(proc.stdout + proc.stderr) == [], "subprocess output"
    assert leaks("\n".join(bodies)) == [], "API answers"
    dump = redis_dump(r)
    assert "cluster-000" in dump and leaks(dump) == [], "Redis keys and values"
