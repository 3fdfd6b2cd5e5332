"""Alert label and annotation templates: Go-template-like `{{ .field }}` substitution, and
nothing else. A template is parsed once when the rules are loaded (anything but `{{ .field }}`
with a known field is refused there); rendering replaces each placeholder with the field's
value in one pass over the template, never over the values, so leaf data (a message holding
`{{ ... }}`) is inserted as text and never evaluated. Values are cleaned of control characters
(labels: every one, and capped; annotations keep line breaks and tabs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

FIELDS = (
    "cluster",
    "namespace",
    "kind",
    "name",
    "status",
    "reason",
    "message",
    "revision",
    "lastTransitionTime",
    "clusters",
    "clusterNames",
    "rule",
    "severity",
)
"""What a template may name: the row's fields, and for cross-cluster rules `clusters` (how many
clusters match) and `clusterNames` (their names, comma-separated)."""
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)
_FIELD = re.compile(r"^\.([A-Za-z][A-Za-z0-9]*)$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
LABEL_VALUE_MAX = 1024
ANNOTATION_MAX = 8192


class TemplateError(ValueError):
    """A template that is not plain `{{ .field }}` substitution."""


@dataclass(frozen=True)
class Template:
    """A parsed template: literal text and field names, alternating (text first)."""

    parts: tuple[str, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        return self.parts[1::2]

    def render(self, values: Mapping[str, object], label: bool = False) -> str:
        out: list[str] = []
        for i, part in enumerate(self.parts):
            if i % 2 == 0:
                out.append(part)
            else:
                out.append(clean(str(values.get(part, "")), label))
        text = "".join(out)
        return clean(text, label)


def parse(text: str) -> Template:
    """`text` parsed; a TemplateError says what is not supported."""
    if not isinstance(text, str):
        raise TemplateError(f"a template is a string, not {type(text).__name__}")
    parts: list[str] = []
    pos = 0
    for m in _ACTION.finditer(text):
        field = _FIELD.fullmatch(m.group(1))
        if field is None:
            raise TemplateError(
                f"{m.group(0)[:60]!r}: only field substitution like {{{{ .cluster }}}} is "
                "supported (no functions, pipelines, variables or conditions)"
            )
        if field.group(1) not in FIELDS:
            raise TemplateError(f"unknown field .{field.group(1)}; fields: {', '.join(FIELDS)}")
        parts += [text[pos : m.start()], field.group(1)]
        pos = m.end()
    rest = text[pos:]
    if "{{" in rest or "}}" in rest:
        raise TemplateError("unbalanced '{{' or '}}'")
    parts.append(rest)
    return Template(tuple(parts))


def clean(value: str, label: bool) -> str:
    """`value` without control characters (labels: none at all, as one line), capped."""
    if label:
        return _CONTROL.sub(" ", value)[:LABEL_VALUE_MAX]
    return _CONTROL_BUT_LINES.sub(" ", value)[:ANNOTATION_MAX]
