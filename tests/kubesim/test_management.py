"""kubesim as the management cluster: Secrets (stringData), GitopsCluster and Cluster API kinds
with their status subresources, registration objects generated for a fleet through each
source with credentials that really reach the leaves, `--from` manifests with a management
cluster, `fleetscope kubesim --register-with`, and revoked tokens."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from kubesim.gen.fleet import generate_fleet
from kubesim.manifests import ManifestFleet
from kubesim.registration import SOURCES, ManagementFleet
from tests.support import sims
from tests.support.paths import REPO

ROOT = REPO
EXAMPLE = ROOT / "kubesim" / "examples" / "management-fleet"


def _decoded(secret: dict, key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def _namespaces_of(kubeconfig: dict) -> list[str]:
    """The leaf's namespaces, read with the real kubernetes client and `kubeconfig`."""
    api = config.new_client_from_config_dict(kubeconfig)
    try:
        return [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
    finally:
        api.close()


@pytest.mark.parametrize("source", SOURCES)
def test_generated_management_cluster_registers_every_leaf(source: str, tmp_path: Path) -> None:
    with sims.start(ManagementFleet(generate_fleet(2, 1, seed=3), source), tmp_path) as sim:
        assert sim.management == "management"
        assert sorted(p.name for p in (tmp_path / "clusters").iterdir()) == [
            "cluster-000.yaml",
            "cluster-001.yaml",
        ]  # the management cluster is no leaf
        secrets = sim.list("management", "Secret")
        assert len(secrets) == 2
        for secret in secrets:
            if source == "argocd":
                assert secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "cluster"
                server = _decoded(secret, "server")
                cfg = json.loads(_decoded(secret, "config"))
                assert cfg["bearerToken"] == sim.collector_token
                assert server in {sim.url(c) for c in ("cluster-000", "cluster-001")}
                continue
            key = "kubeconfig" if source == "secret" else "value"
            kubeconfig = yaml.safe_load(_decoded(secret, key))
            assert "default" in _namespaces_of(kubeconfig)
            assert sim.admin_token not in _decoded(secret, key)  # only the collector identity
        if source == "gitopscluster":
            assert {g["spec"]["secretRef"]["name"] for g in sim.list("management", "gc")} == {
                "cluster-000-kubeconfig",
                "cluster-001-kubeconfig",
            }
        if source == "capi":
            clusters = sim.list("management", "clusters.cluster.x-k8s.io")
            assert all(c["status"]["controlPlaneReady"] for c in clusters)


def test_management_kinds_are_served_with_status_subresources(tmp_path: Path) -> None:
    with sims.start(ManagementFleet(generate_fleet(1, 1, seed=1))) as sim:
        sim.apply(
            "management",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "namespace": "fleet"},
                "stringData": {"value": "hello"},
            },
        )
        secret = sim.get("management", "Secret", "fleet", "s")
        assert secret is not None and "stringData" not in secret
        assert _decoded(secret, "value") == "hello"
        gc = {
            "apiVersion": "gitops.weave.works/v1alpha1",
            "kind": "GitopsCluster",
            "metadata": {"name": "x", "namespace": "fleet"},
            "spec": {"secretRef": {"name": "s"}},
        }
        sim.apply("management", gc)
        sim.patch_status(
            "management", "GitopsCluster", "fleet", "x", {"conditions": [{"type": "Ready"}]}
        )
        sim.patch("management", "GitopsCluster", "fleet", "x", {"spec": {"secretRef": None}})
        got = sim.get("management", "GitopsCluster", "fleet", "x")
        assert got is not None and got["status"]["conditions"] == [{"type": "Ready"}]
        api = config.new_client_from_config_dict(sim.kubeconfig("management"))
        try:
            resources = client.CustomObjectsApi(api).get_api_resources(
                "cluster.x-k8s.io", "v1beta1"
            )
        finally:
            api.close()
        assert {r.name for r in resources.resources} == {"clusters", "clusters/status"}


def test_from_manifests_with_a_management_cluster(tmp_path: Path) -> None:
    with sims.start(ManifestFleet(EXAMPLE), tmp_path, management="management") as sim:
        assert sorted(p.stem for p in (tmp_path / "clusters").iterdir()) == [
            "prod-eu",
            "prod-us",
            "staging",
        ]
        eu = sim.get("management", "Secret", "fleet", "prod-eu-kubeconfig")
        assert eu is not None
        assert "flux-system" in _namespaces_of(yaml.safe_load(_decoded(eu, "value.yaml")))
        staging = sim.get("management", "Secret", "argocd", "cluster-staging")
        assert staging is not None and _decoded(staging, "name") == "staging"
        assert _decoded(staging, "server") == sim.url("staging")
        path = sim.write_management_kubeconfig(tmp_path / "mgmt.yaml")
        assert yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["server"] == sim.url(
            "management"
        )


def test_revoked_token_is_refused(tmp_path: Path) -> None:
    with sims.start(generate_fleet(1, 1, seed=1)) as sim:
        token = sim.token_for("fleetscope-collector", token="kubesim-test-token-1")
        assert token == "kubesim-test-token-1"
        assert "default" in _namespaces_of(sim.kubeconfig("cluster-000", token))
        sim.revoke_token(token)
        with pytest.raises(client.ApiException) as e:
            _namespaces_of(sim.kubeconfig("cluster-000", token))
        assert e.value.status == 401


def test_cli_register_with_writes_the_management_kubeconfig(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetscope", "kubesim", "--clusters", "2", "--namespaces", "1",
         "--register-with", "gitopscluster", "--kubeconfig-dir", str(tmp_path / "clusters")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "kubesim ready: 3 clusters" in line, line
        assert "management cluster management" in line
        kubeconfig = yaml.safe_load((tmp_path / "kubesim-management.yaml").read_text())
        assert "fleet" in _namespaces_of(kubeconfig)
        assert sorted(p.stem for p in (tmp_path / "clusters").iterdir()) == [
            "cluster-000",
            "cluster-001",
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
