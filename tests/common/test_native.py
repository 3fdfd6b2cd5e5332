"""The modules compiled with mypyc (common.native): built where the machine can build them, the
same rows as their sources for the generator's objects and for damaged copies of them, and never
run when a source changed since the build."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import common
from common import buildinfo, native
from common.index import edges, graph, label_field, rows
from common.kinds import status
from common.kinds.registry import builtin_registry
from kubesim.catalog import Catalog
from kubesim.gen.fleet import generate_fleet
from tests.support.native_rows import same_in_both

ROOT = Path(__file__).resolve().parents[2]
MODULES = {"common.index.rows": rows, "common.index.label_field": label_field}
MODULES |= {"common.index.edges": edges, "common.index.graph": graph}
MODULES |= {"common.kinds.status": status}
DAMAGE: list[Any] = [None, 7, -1, 2.5, True, "", "x", [], {}, ["a"], {"a": 1}, [{"type": 3}]]


def _can_compile() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None and not native.pure_requested()


def test_every_listed_module_is_the_one_tested_here() -> None:
    assert set(MODULES) == set(native.MODULES)


@pytest.mark.skipif(not _can_compile(), reason="no C compiler here (or FLEETSCOPE_PURE is set)")
def test_the_build_compiled_the_row_builder() -> None:
    """Where a C compiler is, the install (./dev, .ci/run) compiled every listed module: a
    build that fell back to plain Python silently would measure something else."""
    assert common.NATIVE_OFF == ""
    assert buildinfo.row_builder() == "compiled"  # what fleetscope_build_info says
    assert {name: native.compiled(m) for name, m in MODULES.items()} == dict.fromkeys(MODULES, True)


def _corpus(seed: int = 7) -> list[tuple[str, str, Any]]:
    """(kind key, apiVersion, object): one small cluster's objects of every registry kind, and
    copies of them with one value somewhere replaced by a value of another type, as a leaf's
    JSON may hold (nothing checks a custom resource's status)."""
    registry = builtin_registry()
    fleet = generate_fleet(1, 20, seed=1)
    plain: list[tuple[str, str, Any]] = []
    for res, _, _, body in fleet.objects(0, Catalog.default()):
        kind = registry.get(res.kind)
        if kind is not None:
            api_version = f"{res.group}/{res.version}" if res.group else res.version
            plain.append((kind.key, api_version, orjson.loads(body)))
    rng = random.Random(seed)
    damaged = []
    for _ in range(10):
        for key, api_version, obj in plain:
            copy = json.loads(json.dumps(obj))
            # what the row builder reads: metadata and status, and the top level itself
            paths = [(copy, field) for field in copy]
            for part in ("metadata", "status"):
                if isinstance(copy.get(part), dict):
                    paths += _paths(copy[part])
            parent, field = rng.choice(paths)
            parent[field] = rng.choice(DAMAGE)
            damaged.append((key, api_version, copy))
    return plain + damaged


def _paths(node: Any) -> Iterator[tuple[Any, Any]]:
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for field, value in list(items):
        yield node, field
        if isinstance(value, dict | list):
            yield from _paths(value)


@pytest.mark.skipif(not native.compiled(rows), reason="the row builder is not compiled here")
def test_compiled_and_source_build_the_same_rows_even_from_damaged_objects() -> None:
    corpus = _corpus()
    assert len(corpus) > 500
    answers = same_in_both(corpus)
    assert answers.count("raised") < len(answers) // 4  # the corpus is mostly rows, not errors


def test_pure_runs_the_sources() -> None:
    code = (
        "import common, common.native as n, common.index.rows as r, common.buildinfo as b\n"
        "print(common.NATIVE_OFF, n.compiled(r), r.__file__.endswith('.py'), b.row_builder())\n"
    )
    env = {**os.environ, native.PURE_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["pure", "False", "True", "python"]


def test_a_source_changed_since_the_build_runs_from_the_source(tmp_path: Path) -> None:
    """A copy of the tree as an in-place build left it, one listed source then edited: every
    listed module imports from its source (compiled modules call each other directly, so one
    stale module makes them all untrustworthy); with the source as compiled, the extensions
    (where built) run."""
    shutil.copytree(ROOT / "common", tmp_path / "common")
    for group in ROOT.glob("*__mypyc.*.so"):
        shutil.copy(group, tmp_path)
    recorded = {m: native.digest(native.source(m)) for m in native.MODULES}
    (tmp_path / "common" / native.STAMP).write_text(json.dumps(recorded))
    code = (
        "import common, common.native as n, common.index.rows as r, common.kinds.status as s\n"
        "print(common.NATIVE_OFF or '-', n.compiled(r), n.compiled(s))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    env["PYTHONPATH"] = str(tmp_path)

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.split()

    built = str(native.compiled(rows))
    assert run() == ["-", built, built]
    source = tmp_path / "common" / "index" / "rows.py"
    source.write_text(source.read_text() + "\nEDITED = True\n")
    assert run() == ["stale", "False", "False"]
    assert native.stale(recorded, tmp_path) == ["common.index.rows"]


def test_a_module_compiled_before_but_no_longer_listed_is_not_run() -> None:
    """Its extension may still lie in the tree (a build from an older list): it counts as
    stale, so every module runs from its source until the next build removes it."""
    current = {m: native.digest(native.source(m)) for m in native.MODULES}
    assert native.stale(current) == []
    assert native.stale({**current, "common.kinds.relations": "0" * 64}) == [
        "common.kinds.relations"
    ]
