"""What the watcher keeps of a cluster's objects between recomputations (Istio config,
Services, RBAC objects), packed as JSON bytes: a parsed object is a tree of dicts and strings
costing several times its JSON, and these are read whole only when the cluster's config is
validated again or its grants recompiled (each already linear in the cluster's objects). Each is
filed under one string (`key_of`), not a tuple of two: at fleet L a replica holds ~10^5 of them."""

from __future__ import annotations

import json
from typing import Any

import orjson

from common.index import rows
from common.leaf.client import loads

Packed = bytes
"""An object's JSON; a slimmed object's row labels field (its `rows.SLIM_LABELS` key, a tuple,
which JSON cannot hold) rides in its metadata under `LABELS_KEY`, not beside it in a tuple."""
Key = str
"""`namespace/name` (neither holds a slash)."""
LABELS_KEY = "fleetscope.labels"  # no Kubernetes metadata field is named so


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def pack(obj: dict[str, Any]) -> Packed:
    meta = obj.get("metadata")
    labels = meta.get(rows.SLIM_LABELS) if isinstance(meta, dict) else None
    if isinstance(labels, str):
        meta = {k: v for k, v in meta.items() if k != rows.SLIM_LABELS}  # type: ignore[union-attr]
        meta[LABELS_KEY] = labels
        return _dumps({**obj, "metadata": meta})
    return _dumps(obj)


def unpack(packed: Packed) -> dict[str, Any]:
    obj = dict(loads(packed))
    meta = obj.get("metadata")
    if isinstance(meta, dict) and LABELS_KEY in meta:
        meta[rows.SLIM_LABELS] = meta.pop(LABELS_KEY)
    return obj


def _dumps(obj: dict[str, Any]) -> bytes:
    try:
        raw = orjson.dumps(obj)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, as the leaf's JSON may hold
        return json.dumps(obj, separators=(",", ":")).encode()
    # orjson's answer keeps the whole buffer it wrote into (4 KiB at least, ~8x a slimmed
    # object's JSON: 382 MiB at fleet M); a copy holds only the bytes.
    return bytes(memoryview(raw))
