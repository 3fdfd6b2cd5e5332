"""Shell completion: `completion bash|zsh` print scripts that load, `__complete` lists what the
API shows the caller (clusters, kinds, namespaces) and what the flags take, and the bash and zsh
functions, run for real, offer those candidates for a partly typed command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Stack

ADMIN = ["--as", "admin-0", "--as-group", "fleet-admins"]


def test_scripts_are_printed_and_parse(cli) -> None:
    bash = cli("completion", "bash")
    assert bash.code == 0 and "complete -o default -F _fleetscope_complete fleetscope" in bash.out
    subprocess.run(["bash", "-n"], input=bash.out, text=True, check=True)
    zsh = cli("completion", "zsh")
    assert zsh.code == 0 and zsh.out.startswith("#compdef fleetscope")
    if shutil.which("zsh"):
        subprocess.run(["zsh", "-n"], input=zsh.out, text=True, check=True)


def test_complete_lists_the_fleet_as_the_caller_sees_it(stack: Stack, cli) -> None:
    s = ["--server", stack.base]
    clusters = cli("__complete", "clusters", *s, *ADMIN)
    assert (clusters.code, clusters.out.split()) == (0, stack.sim.clusters)
    kinds = cli("__complete", "kinds", *s, *ADMIN).out.split()
    assert {"kustomization", "ks", "helmrelease", "hr", "virtualservice", "vs"} <= set(kinds)
    team = stack.users["dev-team-00"]
    ns = cli("__complete", "namespaces", *s, *team.flags()).out.split()
    assert set(ns) == {r["namespace"] for r in stack.api_rows(team)}
    assert cli("__complete", "clusters", *s, "--as", "nobody").out == ""
    assert cli("__complete", "clusters", "--server", "http://127.0.0.1:9").out == ""


def test_complete_words(stack: Stack, cli) -> None:
    env = {"FLEETSCOPE_SERVER": stack.base}

    def words(*w: str) -> list[str]:
        res = cli("__complete", "words", "--", *w, env=env)
        assert res.code == 0, res.err
        return res.out.splitlines()

    assert words("") == ["get", "describe", "status", "access", "groups", "completion"]
    assert words("get", *ADMIN, "--cluster", "") == stack.sim.clusters
    assert set(words("get", *ADMIN, "ks,he")) == {
        "ks,helmchart",
        "ks,helmrelease",
        "ks,helmrepository",
        "ks,helmrepo",
    }
    assert words("get", "-o", "") == ["table", "wide", "json", "yaml", "name", "csv"]
    assert "--chunk-size" in words("get", "--c")
    row = stack.api_rows(stack.users["admin-0"], kind="Kustomization")[0]
    c, ns, name = row["cluster"], row["namespace"], row["name"]
    assert f"{c}/" in words("describe", *ADMIN, "")
    assert f"{c}/{ns}/Kustomization/" in words("describe", *ADMIN, f"{c}/{ns}/")
    assert words("describe", *ADMIN, f"{c}/{ns}/Kustomization/{name[:2]}") == [
        f"{c}/{ns}/Kustomization/{name}"
    ]


def program() -> str:
    found = Path(sys.executable).parent / "fleetscope"
    if not found.exists():
        pytest.skip("the fleetscope console script is not installed next to this python")
    return str(found)


def test_bash_function_completes_clusters(stack: Stack, cli) -> None:
    script = cli("completion", "bash").out
    line = " ".join([program(), "get", *ADMIN, "--cluster", "''"])
    shell = f"{script}\nCOMP_WORDS=({line}); COMP_CWORD=7\n_fleetscope_complete\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    env = {**os.environ, "FLEETSCOPE_SERVER": stack.base}
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == stack.sim.clusters


def test_zsh_function_completes_describe_paths(stack: Stack, cli) -> None:
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed")
    script = cli("completion", "zsh").out
    c = stack.sim.clusters[0]
    words = " ".join([program(), "describe", *ADMIN, f"{c}/"])
    shell = f'{script}\ncompadd() {{ print -r -- "$*" }}\nwords=({words}); CURRENT=7; _fleetscope\n'
    env = {**os.environ, "FLEETSCOPE_SERVER": stack.base}
    out = subprocess.run(
        ["zsh", "-f", "-c", shell], capture_output=True, text=True, env=env, check=True
    )
    rows = stack.api_rows(stack.users["admin-0"], cluster=c)
    namespaces = {r["namespace"] or "_" for r in rows}  # `_`: cluster-scoped (GatewayClass)
    assert "_" in namespaces
    line = out.stdout.strip()
    assert line.startswith("-Q -S  -- "), line  # no space after a path segment
    assert {p.rstrip("/").split("/")[1] for p in line.split()[3:]} == namespaces
