"""The test tree's own shape: no test imports a test module (`test_*`) or a conftest (what tests
share lives in named helper modules, most in tests/support), and a conftest holds fixtures and
hooks only (no public helper functions or classes for tests to import). Offenders are named by
file and line."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _module_of(path: Path) -> str:
    """The dotted module name of a file under tests/ (`tests.common.index.test_keys`)."""
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_forbidden(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """Every module `node` may import: the modules named and, for `from X import a`, `X.a`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the importing module's package, `level - 1` packages up
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_offences(source: str, module: str, is_package: bool = False) -> list[str]:
    """`line: module` for each import of a test module or a conftest in `source`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = _imported(node, module, is_package)
            bad = [n for n in names if n.split(".")[0] == "tests" and _is_forbidden(n)]
            if bad:
                out.append(f"{node.lineno}: imports {bad[0]}")
    return out


def _is_fixture(node: ast.FunctionDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if ast.unparse(target) in ("pytest.fixture", "fixture"):
            return True
    return False


def conftest_offences(source: str) -> list[str]:
    """`line: name` for each public function that is no fixture or hook, and each public class,
    defined at a conftest's top level."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out.append(f"{node.lineno}: class {node.name}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            private = node.name.startswith(("_", "pytest_"))
            if not private and not (isinstance(node, ast.FunctionDef) and _is_fixture(node)):
                out.append(f"{node.lineno}: def {node.name}")
    return out


def _offenders(check) -> list[str]:  # type: ignore[no-untyped-def]
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for offence in check(path):
            found.append(f"{path.relative_to(TESTS.parent)}:{offence}")
    return found


def test_no_test_module_and_no_conftest_is_imported() -> None:
    def check(path: Path) -> list[str]:
        return import_offences(path.read_text(), _module_of(path), path.name == "__init__.py")

    offenders = _offenders(check)
    assert offenders == [], "move what they share into a helper module:\n" + "\n".join(offenders)


def test_conftests_hold_fixtures_and_hooks_only() -> None:
    def check(path: Path) -> list[str]:
        return conftest_offences(path.read_text()) if path.name == "conftest.py" else []

    offenders = _offenders(check)
    assert offenders == [], "move these into a helper module:\n" + "\n".join(offenders)


def test_the_guards_name_what_they_find() -> None:
    source = (
        "import tests.query.test_api\n"
        "from tests.query import conftest, fleet\n"
        "from tests.watch.test_events import row_of\n"
        "from . import test_x\n"
        "from .conftest import thing\n"
        "def f():\n"
        "    from tests.cli.conftest import Stack\n"
        "from tests.support import topology\n"
        "from common.index import test_like_name\n"
    )
    assert import_offences(source, "tests.common.index.test_y") == [
        "1: imports tests.query.test_api",
        "2: imports tests.query.conftest",
        "3: imports tests.watch.test_events",
        "4: imports tests.common.index.test_x",
        "5: imports tests.common.index.conftest",
        "7: imports tests.cli.conftest",
    ]
    conftest = (
        "import pytest\n"
        "@pytest.fixture\n"
        "def stack(): ...\n"
        "@pytest.fixture(scope='package')\n"
        "def fleet(): ...\n"
        "def pytest_configure(config): ...\n"
        "def _prepare(): ...\n"
        "def headers(user): ...\n"
        "class Stack: ...\n"
    )
    assert conftest_offences(conftest) == ["8: def headers", "9: class Stack"]
