"""Renders the deployment files with the real tools, for tests/deploy (skips when one is missing).

The same tools as `.ci/validate-deploy`: `kubectl kustomize`, `kubernetes-validate` (schemas
ship in the package, so it works offline) and `docker-compose config`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO

ROOT = REPO
K8S_VERSIONS = ("1.27", "latest")  # the oldest Kubernetes we support, and the newest schema


def kustomize(path: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize <path>` renders."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not installed (apt: kubernetes-client): kustomize not checked")
    out = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def compose_config(env: dict[str, str] | None = None) -> dict[str, Any]:
    """docker-compose.yml as `docker-compose config` resolves it (validates it, too)."""
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose not installed (apt: docker-compose): compose not checked")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCOPE_")}
    out = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**full_env, **(env or {})}, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    config: dict[str, Any] = yaml.safe_load(out.stdout)
    return config


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]
