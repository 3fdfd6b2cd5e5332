"""The alert tasks in a real Celery worker, scheduled by two beats at once (a mistake that
happens): alerts from a collected leaf reach a real Alertmanager and resolve there, and the
evaluator's lease keeps evaluations from overlapping or doubling (the second beat's tasks are
skipped, and the worker's metrics count them)."""

from __future__ import annotations

import itertools
import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from common.index import keys
from tests.support.alertmanager import Alertmanager
from tests.support.celery_procs import TOKEN, start, start_worker, stop
from tests.support.fakeleaf import KS, FakeLeaf, flux_object
from tests.support.waiting import wait_for

RULES = """
rules:
  - name: KustomizationFailing
    match: {kind: Kustomization, status: unhealthy}
    for: 1s
    annotations: {summary: "{{ .name }}: {{ .message }}"}
  - name: KustomizationFailingEverywhere
    match: {kind: Kustomization, status: unhealthy}
    minClusters: 2
"""


@pytest.fixture
def leaf() -> Iterator[FakeLeaf]:
    fake = FakeLeaf(token=TOKEN).start()
    fake.add(KS, "kustomizations", flux_object("ns-0", "app", ready="False"))
    fake.add(KS, "kustomizations", flux_object("ns-1", "app"))
    for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"):
        fake.objects[("rbac.authorization.k8s.io/v1", plural)] = []
    yield fake
    fake.stop()


def test_two_beats_one_evaluator_alerts_reach_alertmanager(
    leaf: FakeLeaf,
    redis_url: str,
    broker_url: str,
    tmp_path: Path,
    alertmanager: Alertmanager,
) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for name in ("alpha", "beta"):
        (clusters / f"{name}.yaml").write_text(yaml.safe_dump(leaf.kubeconfig(name)))
    (tmp_path / "rules.yaml").write_text(RULES)
    env = {
        **os.environ,
        "FLEETSCOPE_REDIS_URL": redis_url,
        "FLEETSCOPE_BROKER_URL": broker_url,
        "FLEETSCOPE_CLUSTERS_DIR": str(clusters),
        "FLEETSCOPE_SYNC_INTERVAL_S": "1",
        "FLEETSCOPE_RBAC_SYNC_INTERVAL_S": "1",
        "FLEETSCOPE_REGISTRY_INTERVAL_S": "1",
        "FLEETSCOPE_METRICS_DIR": str(tmp_path),
        "FLEETSCOPE_ALERT_RULES_FILE": str(tmp_path / "rules.yaml"),
        "FLEETSCOPE_ALERT_INTERVAL_S": "1",
        "FLEETSCOPE_ALERTMANAGER_URL": alertmanager.url,
        "FLEETSCOPE_EXTERNAL_URL": "https://fleetscope.example",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    worker, port = start_worker(env, tmp_path / "worker.log")
    beats = [
        start(
            ["beat", "--schedule", str(tmp_path / f"beat-{i}"), "--max-interval", "1"],
            env,
            tmp_path / f"beat-{i}.log",
        )
        for i in range(2)
    ]
    r = redis.Redis.from_url(redis_url)
    try:

        def names() -> list[str]:
            return sorted(
                f"{a['labels']['alertname']}/{a['labels'].get('cluster', '*')}"
                for a in alertmanager.alerts()
            )

        want = [
            "KustomizationFailing/alpha",
            "KustomizationFailing/beta",
            "KustomizationFailingEverywhere/*",
        ]
        wait_for(lambda: names() == want, what="the alerts in Alertmanager")
        (one,) = (a for a in alertmanager.alerts() if a["labels"].get("cluster") == "alpha")
        assert one["annotations"] == {"summary": "app: m"}
        assert one["generatorURL"].startswith("https://fleetscope.example/?cluster=alpha&")

        def skipped() -> float:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
            m = re.search(
                r'fleetscope_alert_evaluations_total\{result="skipped"\} (\S+)', text.decode()
            )
            return float(m.group(1)) if m else 0.0

        wait_for(lambda: skipped() >= 1, what="a second beat's evaluation refused by the lease")
        log = [line.decode().split() for line in r.lrange(keys.ALERT_LOG, 0, -1)]
        starts = sorted(float(entry[0]) for entry in log)
        assert len(starts) >= 2
        # The lease (1 s at this interval) spaces evaluations: never two at once or back to back.
        assert all(b - a >= 0.99 for a, b in itertools.pairwise(starts)), starts

        leaf.objects[(KS, "kustomizations")][0]["status"]["conditions"][0]["status"] = "True"
        wait_for(lambda: names() == [], what="the alerts resolved in Alertmanager")
    finally:
        for beat in beats:
            stop(beat)
        stop(worker)
        r.close()
