"""The `fleetscope` console script's own options: `--version` prints the installed package's
version (the one pyproject.toml declares), as the installed script and as `python -m`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from common.buildinfo import version
from tests.support.paths import REPO

PYPROJECT = REPO / "pyproject.toml"


def test_version_is_the_packages() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert version() == declared


@pytest.mark.parametrize("how", ["script", "module"])
def test_version_option(how: str) -> None:
    script = shutil.which("fleetscope", path=str(Path(sys.executable).parent))
    argv = [script] if how == "script" and script else [sys.executable, "-m", "fleetscope"]
    out = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"fleetscope {version()}"
