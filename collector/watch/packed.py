"""What the watcher keeps of a cluster's objects between recomputations (Istio config,
Services, RBAC objects), packed as JSON bytes: a parsed object is a tree of dicts and strings
costing several times its JSON, and these are read whole only when the cluster's config is
validated again or its grants recompiled (each already linear in the cluster's objects)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from common.index import rows
from common.leaf.client import loads

Packed = bytes | tuple[bytes, str]
"""An object's JSON, with the row's labels field beside it when it holds one (a slimmed
object's `rows.SLIM_LABELS` key is a tuple, which JSON cannot hold)."""


def pack(obj: dict[str, Any]) -> Packed:
    meta = obj.get("metadata")
    labels = meta.get(rows.SLIM_LABELS) if isinstance(meta, dict) else None
    if isinstance(labels, str):
        meta = {k: v for k, v in meta.items() if k != rows.SLIM_LABELS}  # type: ignore[union-attr]
        return _dumps({**obj, "metadata": meta}), labels
    return _dumps(obj)


def unpack(packed: Packed) -> dict[str, Any]:
    if isinstance(packed, bytes):
        return dict(loads(packed))
    raw, labels = packed
    obj = dict(loads(raw))
    obj["metadata"] = {**obj.get("metadata", {}), rows.SLIM_LABELS: labels}
    return obj


def _dumps(obj: dict[str, Any]) -> bytes:
    try:
        raw = orjson.dumps(obj)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, as the leaf's JSON may hold
        return json.dumps(obj, separators=(",", ":")).encode()
    # orjson's answer keeps the whole buffer it wrote into (4 KiB at least, ~8x a slimmed
    # object's JSON: 382 MiB at fleet M); a copy holds only the bytes.
    return bytes(memoryview(raw))
