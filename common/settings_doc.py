"""Renders the settings table of docs/configuration.md from `Settings`' source and docstrings.

`python -m common.settings_doc` rewrites the table between the markers in the doc; a test
checks the doc is current, so every setting is documented exactly once.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from common import settings

BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"
DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def table() -> str:
    cls = next(
        n
        for n in ast.parse(inspect.getsource(settings)).body
        if isinstance(n, ast.ClassDef) and n.name == "Settings"
    )
    lines = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for node, after in zip(cls.body, [*cls.body[1:], None], strict=True):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name == "extra":
            continue
        doc = ""
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            doc = str(after.value.value)
        default = ast.unparse(node.value) if node.value is not None else ""
        env = settings.env_name(name)
        if name in settings.SECRET_SETTINGS:
            doc += f" Or read from the file named by `{env}{settings.FILE_SUFFIX}`."
        lines.append(f"| `{env}` | {ast.unparse(node.annotation)} | `{default}` | {doc} |")
    return "\n".join(lines)


def render(doc_text: str) -> str:
    head, rest = doc_text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


if __name__ == "__main__":
    DOC.write_text(render(DOC.read_text()))
    sys.stdout.write(f"wrote {DOC}\n")
