"""Pre-serialized object templates: an object shape is json.dumps'ed once with `@@slot@@`
placeholders, then each object is a join of byte fragments and slot values (no json.dumps per
object). Slot values must not need JSON escaping (kubesim's generated names never do).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_MARK = "@@"


class Template:
    """`render(values)` -> the JSON bytes of the shape with every `@@slot@@` filled."""

    def __init__(self, shape: Mapping[str, Any]) -> None:
        text = json.dumps(shape, separators=(",", ":"))
        # "@@#slot@@" marks a number: drop the quotes around it.
        text = text.replace('"@@#', "@@").replace('#@@"', "@@")
        parts = text.replace("{", "{{").replace("}", "}}").split(_MARK)
        self.slots = parts[1::2]
        parts[1::2] = ["{" + name + "}" for name in self.slots]
        self.format = "".join(parts)

    def render(self, values: Mapping[str, str]) -> bytes:
        return self.format.format_map(values).encode()


def slot(name: str) -> str:
    return f"@@{name}@@"


def num(name: str) -> str:
    """A slot rendered without quotes: a number, or any JSON text (see `raw`)."""
    return f"@@#{name}#@@"


def raw(name: str) -> str:
    """A slot filled with pre-serialized JSON (a list whose length varies per object)."""
    return num(name)


def metadata(labels: Mapping[str, str] | None = None, namespaced: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": slot("name")}
    if namespaced:
        meta["namespace"] = slot("ns")
    meta.update(
        {
            "uid": slot("uid"),
            "resourceVersion": slot("rv"),
            "creationTimestamp": slot("created"),
        }
    )
    if labels:
        meta["labels"] = dict(labels)
    return meta
