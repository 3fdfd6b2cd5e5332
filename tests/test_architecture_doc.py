"""docs/architecture.md stays true to the tree: its package table names every package with every
module it holds and nothing that is gone, its "where each concept lives" table and its prose name
only modules that exist, and its table of import contracts is the one in pyproject.toml.

The package table's `modules` cell is a `;`-separated list of entries, each starting with its
module names in backticks (`a`, `b` and `c`) and then saying what they hold.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
ROOTS = ("common", "collector", "query", "kubesim", "fleetscope")
PACKAGES_HEADER = "| package | modules | holds | imports |"
CONCEPTS_HEADER = "| concept | home |"
CONTRACTS_HEADER = "| contract (its `name`) | type | keeps |"
_TICKED = re.compile(r"`([^`]+)`")
_LEADING_NAMES = re.compile(r"\s*((?:`[^`]+`(?:,\s*|\s+and\s+)?)+)")
_ALTS = "|".join(ROOTS)
_PATH = re.compile(rf"(?<![\w./-])((?:{_ALTS}|tests)/[\w./-]*\w/?)")
_DOTTED = re.compile(rf"^(?:{_ALTS})(?:\.\w+)+$")


def _table(header: str) -> list[list[str]]:
    """The rows (cells, stripped) of the table under `header`; fails when there is none."""
    lines = DOC.read_text().splitlines()
    if header not in lines:
        pytest.fail(f"{DOC.name} has no table headed {header!r}: restore it (this test reads it)")
    rows = []
    for line in lines[lines.index(header) + 2 :]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        rows.append([c.strip() for c in cells])
    return rows


def _package_rows() -> dict[str, list[str]]:
    """Package directory (as `common/index/read`) -> the module names its row lists."""
    out: dict[str, list[str]] = {}
    for cells in _table(PACKAGES_HEADER):
        package = cells[0].strip("`").rstrip("/")
        names: list[str] = []
        for entry in cells[1].split(";"):
            lead = _LEADING_NAMES.match(entry)
            assert lead, (
                f"{DOC.name}, package table, row {cells[0]}: the modules entry {entry.strip()!r} "
                "does not start with a module name in backticks; write it as "
                "`module` (or `a`, `b` and `c`) followed by what it holds"
            )
            names += _TICKED.findall(lead.group(1))
        out[package] = names
    return out


def _packages_on_disk() -> set[str]:
    return {
        init.parent.relative_to(REPO).as_posix()
        for root in ROOTS
        for init in (REPO / root).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_every_package_on_disk_has_a_row() -> None:
    missing = sorted(_packages_on_disk() - set(_package_rows()))
    assert not missing, (
        f"{DOC.name}: the package table has no row for {', '.join(missing)} (a directory with "
        "an __init__.py): add one (`| `pkg/` | `module` what it holds; ... | holds | imports |`)"
    )


def test_every_package_in_the_table_exists() -> None:
    gone = sorted(p for p in _package_rows() if not (REPO / p / "__init__.py").is_file())
    assert not gone, (
        f"{DOC.name}: the package table names {', '.join(gone)}, which is not a package (no "
        "__init__.py there): rename the row to where the package lives now, or drop it"
    )


def test_package_rows_list_their_modules_as_they_are() -> None:
    problems = []
    for package, listed in _package_rows().items():
        on_disk = {p.stem for p in (REPO / package).glob("*.py") if p.name != "__init__.py"}
        if not on_disk and not (REPO / package).is_dir():
            continue  # not a package at all: test_every_package_in_the_table_exists says so
        gone = sorted(set(listed) - on_disk)
        if gone:
            problems.append(
                f"row `{package}/` lists {', '.join(gone)}, which is no module there (no "
                f"{package}/<name>.py): write the module's current name, or move it to the row "
                "of the package that holds it now"
            )
        unlisted = sorted(on_disk - set(listed))
        if unlisted:
            problems.append(
                f"row `{package}/` does not list {', '.join(unlisted)}: add each name and what "
                "it holds to the row's modules cell"
            )
        twice = sorted({m for m in listed if listed.count(m) > 1})
        if twice:
            problems.append(f"row `{package}/` lists {', '.join(twice)} twice")
    assert not problems, f"{DOC.name}, package table: " + "; ".join(problems)


def _missing_path(ref: str) -> bool:
    """True when `ref` (`common/index/keys.py`, `common/alerts/`, `tests/watch`) names nothing."""
    path = REPO / ref.rstrip("/")
    return not (path.exists() or path.with_name(path.name + ".py").exists())


def _missing_dotted(ref: str) -> str:
    """Why the dotted name `ref` (`query.state.caller`) names nothing; "" when it resolves: a
    package path, then a module, then (at most) one name defined at the module's top level."""
    parts = ref.split(".")
    path = REPO / parts[0]
    for i, part in enumerate(parts[1:], 1):
        if (path / part / "__init__.py").is_file():
            path = path / part
            continue
        module = path / f"{part}.py"
        if not module.is_file():
            return f"{'.'.join(parts[: i + 1])} is no module"
        rest = parts[i + 1 :]
        if rest and rest[0] not in _top_level_names(module):
            return f"{module.relative_to(REPO)} defines no {rest[0]}"
        return ""
    return ""


def _top_level_names(module: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_concept_homes_exist() -> None:
    rows = _table(CONCEPTS_HEADER)
    assert rows, f"{DOC.name}: the concept table is empty"
    problems = []
    for concept, home in rows:
        where = ""  # the directory last named in the cell: a bare `name.py` is looked up there
        for ref in _TICKED.findall(home):
            if _PATH.fullmatch(ref):
                if _missing_path(ref):
                    problems.append(f"{concept!r}: {ref} does not exist")
                where = ref if ref.endswith("/") else ref.rsplit("/", 1)[0] + "/"
            elif re.fullmatch(r"\w+\.py", ref):
                if not where:
                    problems.append(f"{concept!r}: {ref} has no directory before it; give its path")
                elif _missing_path(where + ref):
                    problems.append(f"{concept!r}: {ref} is not in {where}")
            elif _DOTTED.match(ref) and (why := _missing_dotted(ref)):
                problems.append(f"{concept!r}: {ref} ({why})")
    assert not problems, (
        f"{DOC.name}, where each concept lives: "
        + "; ".join(problems)
        + ": point each concept at the module that holds it now"
    )


def test_paths_in_the_text_exist() -> None:
    problems = [
        f"line {n}: {ref}"
        for n, line in enumerate(DOC.read_text().splitlines(), 1)
        for ref in _PATH.findall(line)
        if _missing_path(ref)
    ]
    assert not problems, (
        f"{DOC.name} names paths that do not exist ({'; '.join(problems)}): write where each "
        "module lives now"
    )


def test_contracts_table_is_pyprojects() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = {c["name"]: c["type"] for c in config["tool"]["importlinter"]["contracts"]}
    documented = {cells[0]: cells[1] for cells in _table(CONTRACTS_HEADER)}
    retyped = sorted(
        n for n in documented.keys() & contracts.keys() if documented[n] != contracts[n]
    )
    assert documented == contracts, (
        f"{DOC.name}'s table of import contracts differs from pyproject.toml's "
        f"[tool.importlinter] (only in the doc: {sorted(documented.keys() - contracts.keys())}; "
        f"only in pyproject.toml: {sorted(contracts.keys() - documented.keys())}; another type: "
        f"{retyped}): give each contract a row with its exact `name` and `type`, and say what "
        "it keeps"
    )
