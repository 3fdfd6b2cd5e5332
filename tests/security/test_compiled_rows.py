"""The compiled row builder as an attack surface (common.native: rows, labels, status rules and
the dependency graph compiled to C by mypyc).

A leaf cluster's admin decides what its objects hold. Compiled code checks the declared types
of its values where the source does not, so a value of an unexpected type, size or content must
not make the compiled build do anything its source would not: each hostile object gives the same
row (the same escaping of the member format's separators, the same codes, the same labels kept
or cut) or an error in both builds, never a crash of the process. The same objects are built by
the source in a child process (`FLEETSCOPE_PURE=1`) and compared."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from common import native
from common.index import rows
from tests.support import native_rows
from tests.support.native_rows import same_in_both

HOSTILE: list[Any] = [
    rows.SEP,
    rows.REV_MARK,
    f"a{rows.SEP}b{rows.REV_MARK}c",
    "~1",  # what a coded message looks like
    "~",
    "\x1b[31mred\x1b[0m\r\n\u2028\u202e",
    "\uff12\uff10\uff12\uff16-11-20T10:00:00Z",  # full-width digits, which int() takes
    "2026-13-45T99:99:99Z",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "x" * 1_000_000,
    2**70,
    -(2**70),
    1e308,
    0.5,
    True,
    None,
    [],
    {},
    {"type": "Ready", "status": "True", "reason": 7, "message": ["m"]},
    [{"type": "Ready", "status": rows.SEP, "lastTransitionTime": 17}],
    {"app.kubernetes.io/name": rows.SEP, "k" * 300: "v", "a": "b" * 70, "": "x"},
]
FIELDS = [
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "generation"),
    ("status", "conditions"),
    ("status", "observedGeneration"),
    ("status", "lastAppliedRevision"),
    ("spec", "suspend"),
]
BASE = {
    "metadata": {"name": "apps", "namespace": "team-a", "generation": 2, "labels": {"a": "b"}},
    "spec": {"suspend": False},
    "status": {
        "observedGeneration": 2,
        "lastAppliedRevision": "main@sha1:0123456789abcdef",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "BuildFailed",
                "message": "main@sha1:0123456789abcdef failed",
                "lastTransitionTime": "2026-11-20T10:00:00Z",
            }
        ],
    },
}
KINDS = [
    ("Kustomization", "kustomize.toolkit.fluxcd.io/v1"),
    ("HelmRelease", "helm.toolkit.fluxcd.io/v2"),
    ("VirtualService", "networking.istio.io/v1"),
    ("HTTPRoute", "gateway.networking.k8s.io/v1"),
    ("AuthPolicy", "kuadrant.io/v1"),
]


def _hostile() -> list[tuple[str, str, Any]]:
    out = []
    for key, api_version in KINDS:
        for part, field in FIELDS:
            for value in HOSTILE:
                obj = copy.deepcopy(BASE)
                obj[part][field] = value
                out.append((key, api_version, obj))
            for value in HOSTILE[:6]:  # inside a condition
                obj = copy.deepcopy(BASE)
                obj["status"]["conditions"][0][field] = value
                out.append((key, api_version, obj))
    return out


@pytest.mark.skipif(not native.compiled(rows), reason="the row builder is not compiled here")
def test_hostile_objects_build_the_same_rows_compiled_and_from_source() -> None:
    corpus = _hostile()
    compiled = same_in_both(corpus)
    members = [c for c in compiled[:: native_rows.ANSWERS] if c != "raised"]
    assert len(members) > len(corpus) // 2
    # the member format's separators never come from the object: 15 fields, each clean
    assert all(m.count(rows.SEP) == 14 for m in members)


def test_a_deleted_object_with_a_separator_in_its_name_removes_its_row() -> None:
    """The watcher removes a deleted object's row by the identity it computes from the object
    alone: the same cleaned namespace and name its member was written with."""
    from collector.watch.cluster import _change
    from common.kinds.registry import builtin_registry

    kind = builtin_registry().get("Kustomization")
    assert kind is not None
    api_version = "kustomize.toolkit.fluxcd.io/v1"
    for namespace, name in [("team-a", f"a{rows.SEP}b"), (f"x{rows.REV_MARK}y", "apps")]:
        obj = {"metadata": {"name": name, "namespace": namespace}}
        added = _change("c1", kind, api_version, "ADDED", obj)
        deleted = _change("c1", kind, api_version, "DELETED", obj)
        assert deleted.member is None and deleted.identity == added.identity
