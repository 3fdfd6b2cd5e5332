"""What the watcher keeps of a cluster's objects between recomputations (Istio config,
Services, RBAC objects): a parsed object is a tree of dicts and strings costing several times its
JSON, and these are read whole only when the cluster's config is validated again or its grants
recompiled (each already linear in the cluster's objects). So a resource's objects are kept as a
`Table`: the bulk as one compressed JSON document, the changes since as each object's JSON bytes
(`pack`), filed under one string (`key_of`). A cluster's objects are much alike: together they
compress ~13x (at fleet L a cluster's 4,800 Istio objects and Services, 1.5 MB of JSON, take
~120 KB), apart they compressed ~6x at best with a shared dictionary, at twice the CPU."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
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
    return _dumps(_jsonable(obj))


def unpack(packed: Packed) -> dict[str, Any]:
    return _restored(dict(loads(packed)))


FOLD_MIN = 64
"""A table folds its changes into the bulk when it holds more than this many plus an eighth of
the bulk's objects (so changes never cost more than ~1/8 of the bulk's plain JSON on top)."""


class Table:
    """One resource's objects of a cluster by `key_of`: the bulk as one zlib-compressed JSON
    object, the changes since (an object's JSON, or None when it was deleted) beside it.
    `objects()` reads the bulk with the changes folded in, and stores that as the new bulk once
    the changes are many. Not thread-safe: the caller's lock guards it."""

    __slots__ = ("_bulk", "_changes", "_size")

    def __init__(self, objs: Iterable[dict[str, Any]] = ()) -> None:
        self._store({key_of(o): _jsonable(o) for o in objs})

    def put(self, obj: dict[str, Any]) -> None:
        """An object added or changed (later wins, as in a dict)."""
        self._changes[key_of(obj)] = pack(obj)

    def delete(self, key: Key) -> None:
        """The object filed under `key` (`key_of`) deleted, if it was held."""
        self._changes[key] = None

    def objects(self) -> list[dict[str, Any]]:
        """Every object held, in the order a dict filed with the same lists and events has."""
        merged: dict[Key, dict[str, Any]] = (
            dict(loads(zlib.decompress(self._bulk))) if self._bulk else {}
        )
        for key, packed in self._changes.items():
            if packed is None:
                merged.pop(key, None)
            else:
                merged[key] = dict(loads(packed))
        if len(self._changes) > FOLD_MIN + self._size // 8:
            self._store(merged)
        return [_restored(o) for o in merged.values()]

    def _store(self, objs: dict[Key, dict[str, Any]]) -> None:
        self._bulk = zlib.compress(_json(objs), 1) if objs else b""
        self._size = len(objs)
        self._changes: dict[Key, Packed | None] = {}


def _jsonable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get(rows.SLIM_LABELS) if isinstance(meta, dict) else None
    if isinstance(labels, str):
        meta = {k: v for k, v in meta.items() if k != rows.SLIM_LABELS}  # type: ignore[union-attr]
        meta[LABELS_KEY] = labels
        return {**obj, "metadata": meta}
    return obj


def _restored(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and LABELS_KEY in meta:
        meta[rows.SLIM_LABELS] = meta.pop(LABELS_KEY)
    return obj


def _json(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, as the leaf's JSON may hold
        return json.dumps(obj, separators=(",", ":")).encode()


def _dumps(obj: Any) -> bytes:
    """`_json` to keep: orjson's answer keeps the whole buffer it wrote into (4 KiB at least,
    ~8x a slimmed object's JSON: 382 MiB at fleet M); a copy holds only the bytes."""
    return bytes(memoryview(_json(obj)))
