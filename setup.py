"""Build script beside pyproject.toml (which holds the project's metadata): compiles the modules
common.native lists to C extensions with mypyc where the build can, and installs them as plain
Python where it cannot (no mypyc, no C compiler, or FLEETSCOPE_PURE=1), saying so. An in-place
build (`pip install -e .`) records the sources it compiled, so that a later edit runs from the
source until the next build (common.native.guard)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import native  # noqa: E402  (standard library only)

STAMP = HERE / "common" / native.STAMP


def _say(message: str) -> None:
    print(f"fleetscope build: {message}", file=sys.stderr)


def _forget_in_place() -> None:
    """Remove what an earlier in-place build left in the tree (extensions and their record), so
    that none of it outlives a build that compiles nothing or fails."""
    record = native.recorded(STAMP.parent) or {}
    STAMP.unlink(missing_ok=True)
    for module in {*native.MODULES, *record}:
        path = native.source(module, HERE)
        for extension in path.parent.glob(f"{path.stem}.*.so"):
            extension.unlink()
    for group in HERE.glob("*__mypyc.*.so"):
        group.unlink()


def _extensions() -> list[Any]:
    if native.pure_requested():
        _say(f"{native.PURE_ENV} is set: plain Python, nothing compiled")
        _forget_in_place()
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _say("mypyc is not installed: plain Python, nothing compiled")
        _forget_in_place()
        return []
    paths = [str(native.source(m, HERE).relative_to(HERE)) for m in native.MODULES]
    config = HERE / "build" / "mypyc.ini"  # pyproject's [tool.mypy] is for the whole tree
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[mypy]\npython_version = 3.11\nignore_missing_imports = True\n")
    try:
        return list(mypycify(["--config-file", str(config), *paths], opt_level="3"))
    except BaseException as e:  # mypyc exits (SystemExit) on a type error
        _say(f"mypyc could not compile ({e!r}): plain Python")
        _forget_in_place()
        return []


class BuildExt(build_ext):
    """Builds the extensions, or none: a failed compile leaves the plain Python installed."""

    def run(self) -> None:
        if self.inplace:
            _forget_in_place()
        try:
            super().run()
        except Exception as e:  # no C compiler, missing Python headers, ...
            _say(f"compiling failed ({e}): plain Python")
            if self.inplace:
                _forget_in_place()
            return
        if self.inplace and self.extensions:
            digests = {m: native.digest(native.source(m, HERE)) for m in native.MODULES}
            STAMP.write_text(json.dumps(digests, indent=1) + "\n")
            _say(f"compiled {len(native.MODULES)} modules in place")


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
