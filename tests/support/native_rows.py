"""The row builder's answers for a corpus of objects, in this process and in a child that runs
the modules from their sources (common.native, `FLEETSCOPE_PURE=1`): what
tests/common/test_native.py and tests/security/test_compiled_rows.py compare."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import native
from common.index import label_field, rows
from common.kinds import status
from common.kinds.registry import builtin_registry

ROOT = Path(__file__).resolve().parents[2]


def _attempt(make: Callable[[], Any]) -> Any:
    try:
        return json.loads(json.dumps(make(), default=repr))
    except Exception:
        return "raised"  # both builds must raise: the type may differ


def results(corpus: list[tuple[str, str, Any]]) -> list[Any]:
    """What the row builder makes of each object: the row's member and its decoded Row (or that
    it raised), the label field of the object's labels, and its status."""
    registry = builtin_registry()
    out: list[Any] = []
    for key, api_version, obj in corpus:
        kind = registry.get(key)
        assert kind is not None
        member = functools.partial(rows.member, "c1", kind, api_version, obj)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        labels = meta.get("labels") if isinstance(meta, dict) else None
        out += [
            _attempt(member),
            _attempt(functools.partial(rows.build_row, "c1", kind, api_version, obj)),
            _attempt(lambda member=member: rows.decode("c1", member())),
            _attempt(functools.partial(label_field.of_object, labels, "n", "ns")),
            _attempt(lambda k=kind, o=obj: repr(status.evaluate(k.status_rule, o, None))),
        ]
    return out


def pure_results(corpus: list[tuple[str, str, Any]]) -> list[Any]:
    code = (
        "import sys, json\n"
        "from tests.support.native_rows import results\n"
        "print(json.dumps(results(json.load(sys.stdin))))\n"
    )
    env = {**os.environ, native.PURE_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(corpus),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    return list(json.loads(done.stdout))


ANSWERS = 5
"""What `results` gives per object."""


def same_in_both(corpus: list[tuple[str, str, Any]]) -> list[Any]:
    """`results` of the corpus here, after checking that a child running the sources gives the
    same answers for every object; returns them."""
    compiled, pure = results(corpus), pure_results(corpus)
    assert len(compiled) == len(pure) == ANSWERS * len(corpus)
    differ = [
        (corpus[i // ANSWERS][2], compiled[i], pure[i])
        for i in range(len(pure))
        if compiled[i] != pure[i]
    ]
    assert not differ, str(differ[:3])[:2000]
    return compiled
