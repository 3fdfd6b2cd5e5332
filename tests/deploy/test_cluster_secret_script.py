"""scripts/make-cluster-secret.sh: the real kubectl against a loopback API server.

The script reads the leaf's service-account token Secret (waiting for the token controller),
and prints the labelled cluster Secret whose kubeconfig fleetscope's loader and kubectl accept.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.leaf.client import ClusterConfig
from tests.deploy.fake_apiserver import fake_apiserver
from tests.support.paths import REPO

ROOT = REPO
SCRIPT = ROOT / "scripts" / "make-cluster-secret.sh"
TOKEN = "leaf-sa-token-123"

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl not installed (apt: kubernetes-client)"
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _token_secret(ca_pem: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "fleetscope-collector-token", "namespace": "fleetscope"},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": _b64(TOKEN), "ca.crt": _b64(ca_pem)},
    }


def _leaf_kubeconfig(tmp_path: Path, server: str, ca_pem: str, context: str) -> Path:
    path = tmp_path / "leaf.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "leaf",
                        "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
                    }
                ],
                "users": [{"name": "admin", "user": {"token": "admin-token"}}],
                "contexts": [{"name": context, "context": {"cluster": "leaf", "user": "admin"}}],
                "current-context": context,
            }
        )
    )
    return path


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path)}  # kubectl's discovery cache stays in tmp_path
    env.pop("KUBECONFIG", None)
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_prints_labelled_secret_with_working_kubeconfig(tmp_path: Path) -> None:
    with fake_apiserver({}, token_delay=1) as api:
        api.secrets[("fleetscope", "fleetscope-collector-token")] = _token_secret(api.ca_pem)
        kubeconfig = _leaf_kubeconfig(tmp_path, api.url, api.ca_pem, "prod-eu-1")
        result = _run(tmp_path, "--leaf-kubeconfig", str(kubeconfig), "--leaf-context", "prod-eu-1")
        assert result.returncode == 0, result.stderr
        assert TOKEN not in result.stderr
        assert api.secret_reads == 3  # one empty read (token not issued yet), then token and CA

        secret = yaml.safe_load(result.stdout)
        assert secret["kind"] == "Secret"
        assert secret["metadata"]["name"] == "fleetscope-cluster-prod-eu-1"
        assert secret["metadata"]["namespace"] == "fleetscope"
        assert secret["metadata"]["labels"] == {
            "fleetscope.io/cluster": "true",
            "fleetscope.io/cluster-name": "prod-eu-1",
        }
        generated = base64.b64decode(secret["data"]["kubeconfig"]).decode()
        config = ClusterConfig("prod-eu-1", "secret", "test", yaml.safe_load(generated))
        assert config.server == api.url
        loaded = config.configuration()
        assert loaded.host == api.url
        assert loaded.api_key["BearerToken"] == f"Bearer {TOKEN}"
        assert Path(loaded.ssl_ca_cert).read_text() == api.ca_pem

        # kubectl itself authenticates with the generated kubeconfig as the service account.
        (tmp_path / "generated.kubeconfig").write_text(generated)
        check = subprocess.run(
            ["kubectl", "--kubeconfig", str(tmp_path / "generated.kubeconfig"), "-n",
             "fleetscope", "get", "secret", "fleetscope-collector-token", "-o", "name"],
            capture_output=True, text=True, env={**os.environ, "HOME": str(tmp_path)},
            timeout=30, check=False,
        )  # fmt: skip
        assert check.returncode == 0, check.stderr
        assert api.bearer_tokens == {"admin-token", TOKEN}


def test_cluster_name_option_and_server_override(tmp_path: Path) -> None:
    with fake_apiserver({}) as api:
        api.secrets[("fleetscope", "fleetscope-collector-token")] = _token_secret(api.ca_pem)
        kubeconfig = _leaf_kubeconfig(
            tmp_path, api.url, api.ca_pem, "arn:aws:eks:eu-west-1:1234:cluster/Prod"
        )
        args = ["--leaf-kubeconfig", str(kubeconfig), "--namespace", "ops"]
        bad = _run(tmp_path, *args)
        assert bad.returncode == 1
        assert "not a valid cluster name" in bad.stderr and "--cluster-name" in bad.stderr
        assert api.secret_reads == 0

        good = _run(
            tmp_path, *args, "--cluster-name", "prod_eu.1", "--server", "https://10.0.0.1:6443"
        )
        assert good.returncode == 0, good.stderr
    secret = yaml.safe_load(good.stdout)
    assert secret["metadata"]["name"] == "fleetscope-cluster-prod-eu.1"
    assert secret["metadata"]["namespace"] == "ops"
    assert secret["metadata"]["labels"]["fleetscope.io/cluster-name"] == "prod_eu.1"
    generated = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    assert generated["clusters"][0]["cluster"]["server"] == "https://10.0.0.1:6443"


def test_missing_token_secret_fails_with_a_hint(tmp_path: Path) -> None:
    with fake_apiserver({}) as api:
        kubeconfig = _leaf_kubeconfig(tmp_path, api.url, api.ca_pem, "leaf-a")
        result = _run(tmp_path, "--leaf-kubeconfig", str(kubeconfig), "--wait-s", "0")
    assert result.returncode == 1
    assert "has no token" in result.stderr and "--setup-leaf" in result.stderr
    assert result.stdout == ""
