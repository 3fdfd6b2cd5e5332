"""The modules the build compiles to C with mypyc, and the guard that keeps a stale compiled
module from running.

Building a fleet's rows is a Python loop per object (a row, its label field, its status, the
stored form of its references, and the graph that settles `blockedBy`). These modules are typed
as they are written, and mypyc (mypy's compiler) turns them into C extension modules beside
their sources: the same code, 14 % less collector CPU per object in a full collection at fleet L
and 21 % less in a re-sync that rebuilds every row (docs/benchmarks.md, "collection: fleet L").
`setup.py` compiles them where it can (mypyc is a build requirement; a C compiler on the
machine) and otherwise installs them as plain Python, which behaves the same;
`FLEETSCOPE_PURE=1` in the environment runs the plain Python even where the extensions are built
(to compare, or to rule them out).

A build into a source tree (`pip install -e .`, what `./dev` does) leaves each extension beside
the source it came from, and Python imports an extension before a source of the same name: an
edit to one of these files would not run until the next build. So such a build records each
module's source digest (`STAMP`), and `guard()` (run when `common` is imported) imports every
listed module from its source when any of them differs from what was compiled, or when
`FLEETSCOPE_PURE` is set: all of them, since compiled modules call each other directly, not
through the module objects. A wheel's install holds no stamp: its sources and extensions come
from the same build.

Standard library only: `setup.py` imports this before fleetscope's dependencies are installed."""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

MODULES = (
    "common.index.rows",
    "common.index.label_field",
    "common.index.edges",
    "common.index.graph",
    "common.kinds.status",
)
PURE_ENV = "FLEETSCOPE_PURE"
STAMP = "native-sources.json"
"""Beside this file, written by an in-place build: {module: sha256 of the source compiled}."""
ROOT = Path(__file__).resolve().parent.parent


def source(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pure_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """`FLEETSCOPE_PURE` (a setting: common.settings) is true; its other values leave the
    extensions on here, and settings refuse a value that is not a boolean at start-up."""
    return environ.get(PURE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def stale(record: dict[str, str], root: Path = ROOT) -> list[str]:
    """The modules whose extension must not run: a listed module whose source is not what the
    in-place build compiled (changed, missing, or not compiled at all), and a module the build
    compiled that is no longer listed."""
    out = [m for m in record if m not in MODULES]
    for module in MODULES:
        path = source(module, root)
        if not path.is_file() or record.get(module) != digest(path):
            out.append(module)
    return out


def recorded(directory: Path = Path(__file__).parent) -> dict[str, str] | None:
    """What the in-place build in `directory` compiled ({module: source digest}); None when
    nothing was built there, {} when its record cannot be read."""
    stamp = directory / STAMP
    if not stamp.is_file():
        return None
    try:
        record = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return {}
    ok = isinstance(record, dict) and all(isinstance(v, str) for v in record.values())
    return record if ok else {}


def compiled(module: ModuleType) -> bool:
    """Whether `module` runs as a C extension (not from its source)."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Finds the listed modules' sources, ahead of the extensions beside them."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        leaf = fullname.rpartition(".")[2] + ".py"
        for entry in path or ():
            candidate = Path(entry) / leaf
            if candidate.is_file():
                return importlib.util.spec_from_file_location(fullname, candidate)
        return None


def guard() -> str:
    """Run the listed modules (and any the build compiled before) from their sources where the
    extensions must not run; returns why ("pure": asked for; "stale": a source changed since
    the in-place build, or the list did) or "" (the extensions, where built, run)."""
    record = recorded()
    if pure_requested():
        reason = "pure"
    elif record is None:
        return ""  # a wheel's install, or nothing compiled here
    else:
        reason = "stale" if not record or stale(record) else ""
    if reason and not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst([*MODULES, *(record or {})]))
    return reason
