"""Bounded answers. Routes that page (objects, groups) are passed their `continue`; answers the
API gives whole (status, access, relations) are cut into pages here, with a `continue` of our
own that names the arguments it belongs to. A live object too large for one answer keeps its
identity and loses its largest parts, said in `truncated`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from fleetscope.mcp.fleet import bad_input

T = TypeVar("T")
MAX_CHARS = 60_000
"""The most JSON text one live object may take in an answer (about 15k tokens)."""


def _digest(key: Any) -> str:
    text = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def offset_page(
    items: Sequence[T], key: Any, token: str | None, limit: int
) -> tuple[list[T], str | None]:
    """`limit` items after `token`'s position, and the token for the rest (None: no more).
    `key`: the arguments the pages are of (a token from other arguments is refused)."""
    start = 0
    if token:
        offset, _, digest = token.partition(".")
        if not offset.isdigit() or digest != _digest(key):
            raise bad_input("continue: not a token of this tool with these arguments")
        start = int(offset)
    end = start + limit
    after = f"{end}.{_digest(key)}" if end < len(items) else None
    return list(items[start:end]), after


def size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def shrink(obj: dict[str, Any], budget: int = MAX_CHARS) -> tuple[dict[str, Any], list[str]]:
    """`obj` within `budget` characters of JSON: the last-applied annotation goes first, then
    the largest parts of spec and status, each replaced by a note. The paths dropped."""
    if size(obj) <= budget:
        return obj, []
    out = json.loads(json.dumps(obj))
    dropped: list[str] = []
    annotations = (out.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        last = "kubectl.kubernetes.io/last-applied-configuration"
        if annotations.pop(last, None) is not None:
            dropped.append(f"metadata.annotations.{last}")
    while size(out) > budget:
        path = _largest(out)
        if path is None:
            break
        parent = out
        for step in path[:-1]:
            parent = parent[step]
        chars = size(parent[path[-1]])
        parent[path[-1]] = f"<{chars} characters omitted>"
        dropped.append(".".join(path))
    return out, dropped


def _largest(obj: dict[str, Any]) -> list[str] | None:
    """The path of the largest entry below the object's top-level parts (None: none is larger
    than the note that would replace it)."""
    best: tuple[int, list[str]] | None = None

    def walk(node: Any, path: list[str]) -> None:
        nonlocal best
        if not isinstance(node, dict):
            return
        for k, v in node.items():
            here = [*path, str(k)]
            n = size(v)
            if n > 64 and len(here) > 1 and (best is None or n > best[0]):
                best = (n, here)
            walk(v, here)

    walk(obj, [])
    return best[1] if best is not None else None
