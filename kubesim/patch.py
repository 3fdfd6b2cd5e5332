"""The PATCH bodies Kubernetes accepts: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
and strategic merge patch, applied here as a merge patch (lists replaced, not merged by key:
good enough for kubectl's client-side apply of the objects kubesim serves).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubesim.errors import KubeError

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch" or key.startswith("$setElementOrder/") or key.startswith("$retainKeys"):
            continue  # strategic-merge directives
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise KubeError.bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _get(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        parent[last] = value
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        del parent[int(last)]
    else:
        del parent[last]
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise KubeError.bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    try:
        for op in ops:
            name, parts = op["op"], _pointer(op["path"])
            if name == "add":
                doc = _add(doc, parts, op["value"])
            elif name == "remove":
                doc = _remove(doc, parts)
            elif name == "replace":
                _get(doc, parts)
                doc = _add(_remove(doc, parts), parts, op["value"]) if parts else op["value"]
            elif name in ("move", "copy"):
                src = _pointer(op["from"])
                value = copy.deepcopy(_get(doc, src))
                if name == "move":
                    doc = _remove(doc, src)
                doc = _add(doc, parts, value)
            elif name == "test":
                if _get(doc, parts) != op["value"]:
                    raise KubeError(422, "Invalid", f"test operation failed at {op['path']}")
            else:
                raise KubeError.bad_request(f"unknown JSON patch operation {name!r}")
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise KubeError(422, "Invalid", f"the JSON patch cannot be applied: {e!r}") from e
    return doc


def apply_patch(content_type: str, doc: Any, body: bytes) -> Any:
    """`doc` with the PATCH body applied, by the body's content type."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == APPLY:
        raise KubeError(415, "UnsupportedMediaType", "kubesim does not support server-side apply")
    try:
        patch = json.loads(body or b"null")
    except ValueError as e:
        raise KubeError.bad_request(f"the patch body is not JSON: {e}") from e
    if kind == JSON_PATCH:
        return json_patch(doc, patch)
    if kind in (MERGE, STRATEGIC):
        return merge_patch(doc, patch)
    raise KubeError(415, "UnsupportedMediaType", f"the body of type {kind!r} is not supported")
