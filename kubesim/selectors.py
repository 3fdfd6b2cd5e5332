"""Label and field selectors, as kube-apiserver parses them from `labelSelector`/`fieldSelector`.

Labels: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-joined (AND).
Fields: `metadata.name` and `metadata.namespace` with `=`, `==`, `!=`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from kubesim.errors import KubeError

LabelTest = Callable[[Mapping[str, str]], bool]
_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _term(term: str) -> LabelTest:
    for op in ("!=", "==", "="):
        if op in term:
            key, _, value = (s.strip() for s in term.partition(op))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    m = _SET_RE.fullmatch(term)
    if not m:
        raise KubeError.bad_request(f"unable to parse requirement: {term!r}")
    negate, key, op, values = m.groups()
    if op:
        # As apimachinery's parser: `()` is the set holding "", and so is an empty item.
        allowed = {v.strip() for v in values.split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in allowed
        return lambda labels: labels.get(key) not in allowed
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def parse_labels(selector: str) -> LabelTest | None:
    """A predicate over a labels mapping, or None for the empty selector."""
    tests = [_term(t) for t in _split(selector)]
    if not tests:
        return None
    return lambda labels: all(t(labels) for t in tests)


def parse_fields(selector: str) -> Callable[[Mapping[str, Any]], bool] | None:
    tests: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _split(selector):
        op = "!=" if "!=" in term else "==" if "==" in term else "="
        field, _, value = (s.strip() for s in term.partition(op))
        if field not in ("metadata.name", "metadata.namespace"):
            raise KubeError.bad_request(f'field label not supported: "{field}"')
        tests.append(_field_test(field.split(".")[1], value, op == "!="))
    if not tests:
        return None
    return lambda meta: all(t(meta) for t in tests)


def _field_test(attr: str, value: str, negate: bool) -> Callable[[Mapping[str, Any]], bool]:
    def test(meta: Mapping[str, Any]) -> bool:
        return bool(meta.get(attr, "") == value) != negate

    return test


def raw_matcher(label_selector: str, field_selector: str) -> Callable[[bytes], bool] | None:
    """A predicate over an object's JSON bytes (None when both selectors are empty)."""
    labels = parse_labels(label_selector)
    fields = parse_fields(field_selector)
    if labels is None and fields is None:
        return None

    def match(raw: bytes) -> bool:
        meta = json.loads(raw).get("metadata") or {}
        if labels is not None and not labels(meta.get("labels") or {}):
            return False
        return fields is None or fields(meta)

    return match
