"""kubectl against kubesim: get (table and JSON), client-side apply, status patch, delete,
and impersonation denied by the cluster's RBAC."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kubesim.server import KubeSim

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl not installed (.ci/run installs it)"
)


def kubectl(sim: KubeSim, *args: str, context: str = "") -> subprocess.CompletedProcess[str]:
    cmd = [str(KUBECTL), "--kubeconfig", str(sim.kubeconfig_path("cluster-000"))]
    if context:
        cmd += ["--context", context]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


def test_get_kustomizations_all_namespaces_table(kubesim: KubeSim) -> None:
    out = kubectl(kubesim, "get", "kustomizations", "-A")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "AGE", "READY", "STATUS"]
    names = {tuple(line.split()[:2]) for line in lines[1:]}
    expected = {
        (o["metadata"]["namespace"], o["metadata"]["name"])
        for o in kubesim.list("cluster-000", "Kustomization")
    }
    assert names == expected and ("flux-system", "flux-system") in names


def test_get_kustomizations_json(kubesim: KubeSim) -> None:
    out = kubectl(kubesim, "get", "kustomizations", "-A", "-o", "json")
    assert out.returncode == 0, out.stderr
    items = json.loads(out.stdout)["items"]
    assert len(items) == len(kubesim.list("cluster-000", "Kustomization"))
    ready = items[0]["status"]["conditions"]
    assert {c["type"] for c in ready} & {"Ready", "Reconciling", "Stalled"}
    assert all(i["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1" for i in items)


def test_apply_patch_status_delete(kubesim: KubeSim, tmp_path: Path) -> None:
    manifest = tmp_path / "ks.yaml"
    manifest.write_text(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
        "metadata: {name: demo, namespace: app-0001}\n"
        "spec: {interval: 5m, path: ./demo, prune: true,"
        " sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}}\n"
    )
    admin = "cluster-000-admin"
    # No OpenAPI document is served: client-side apply needs --validate=false.
    out = kubectl(kubesim, "apply", "--validate=false", "-f", str(manifest), context=admin)
    assert out.returncode == 0, out.stderr
    assert (
        kubectl(kubesim, "apply", "--validate=false", "-f", str(manifest), context=admin).returncode
        == 0
    )
    patch = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "BuildFailed",
                    "message": "kustomize build failed",
                }
            ]
        }
    }
    out = kubectl(
        kubesim, "patch", "ks", "demo", "-n", "app-0001", "--subresource=status",
        "--type=merge", "-p", json.dumps(patch), context=admin,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    obj = kubesim.get("cluster-000", "Kustomization", "app-0001", "demo")
    assert obj is not None and obj["status"]["conditions"][0]["message"] == "kustomize build failed"
    assert obj["spec"]["path"] == "./demo"
    out = kubectl(kubesim, "get", "ks", "-n", "app-0001")
    assert "kustomize build failed" in out.stdout
    out = kubectl(kubesim, "delete", "ks", "demo", "-n", "app-0001", context=admin)
    assert out.returncode == 0, out.stderr
    assert kubesim.get("cluster-000", "Kustomization", "app-0001", "demo") is None


def test_collector_identity_cannot_write(kubesim: KubeSim) -> None:
    out = kubectl(kubesim, "delete", "ks", "apps", "-n", "app-0001")
    assert out.returncode != 0 and "Forbidden" in out.stderr


def test_impersonated_user_sees_what_rbac_allows(kubesim: KubeSim) -> None:
    team = kubesim.get("cluster-000", "Namespace", "", "app-0001")["metadata"]["labels"]  # type: ignore[index]
    group = team["fleetscope.io/team"]
    ok = kubectl(kubesim, "--as", "dev", "--as-group", group, "get", "ks", "-n", "app-0001")
    assert ok.returncode == 0, ok.stderr
    assert "apps" in ok.stdout
    denied = kubectl(kubesim, "--as", "dev", "--as-group", group, "get", "ks", "-A")
    assert denied.returncode != 0 and "Forbidden" in denied.stderr


def test_get_gateway_api_and_services_tables(kubesim: KubeSim) -> None:
    """The printer columns of the real CRDs and kube-apiserver (cluster-scoped GatewayClass)."""
    out = kubectl(kubesim, "get", "gatewayclasses")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "CONTROLLER", "ACCEPTED", "AGE"]
    rows = {line.split()[0]: line.split()[1:3] for line in lines[1:]}
    assert rows["istio"] == ["istio.io/gateway-controller", "True"]
    out = kubectl(kubesim, "get", "gateways.gateway.networking.k8s.io", "-n", "istio-system")
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"]
    assert row.split()[:4] == [
        "public", "istio", "public-istio.istio-system.svc.cluster.local", "True",
    ]  # fmt: skip
    out = kubectl(kubesim, "get", "svc", "-n", "istio-system", "istiod")
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()
    assert header.split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert row.split()[1] == "ClusterIP" and row.split()[4].startswith("15010/TCP,")
