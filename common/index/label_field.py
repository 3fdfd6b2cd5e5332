"""The `labels` field of a row member (common.index.rows): the object's labels, compact.

    [!] item item ...     item = <key code><value>  |  ,<key>=<value>

Labels are sorted by key. A well-known key is one character (`KEY_CODES`: punctuation no valid
key or value holds) directly followed by its value, so coded items need no separator; any
other key is written `,key=value` (a valid key or value holds neither `,` nor `=`). A value is
stored as a mark when it is the object's name (`@`), its namespace (`^`) or `<name>-<namespace>`
(`%`, the recommended `app.kubernetes.io/instance`), as `~` + hex for a common value
(`VALUE_CODES`), else as it is (no valid value starts with `~@^%`). A leading `!` says labels
were cut: invalid ones (leaf data is untrusted: only what the API server would accept is kept),
or past `MAX_LABELS` / `MAX_LABELS_BYTES` (keys kept in order).

Model (kubesim's fleet, docs/benchmarks.md): 8.5 labels a row (the recommended set, team, the
Flux manager's pair), ~28 stored bytes where the `k=v,...` text is ~240.
"""

from __future__ import annotations

import functools
from typing import Any

from common import labels as label_rules

MAX_LABELS = 32
"""Labels kept per row (by key order); the rest are cut and the row says `labelsTruncated`."""
MAX_LABELS_BYTES = 512
"""Bytes of the stored labels field per row at most (as MAX_LABELS)."""
NAME_MARK, NS_MARK, INSTANCE_MARK, VALUE_MARK, CUT_MARK = "@", "^", "%", "~", "!"
_KEYS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "kustomize.toolkit.fluxcd.io/name",
    "kustomize.toolkit.fluxcd.io/namespace",
    "helm.toolkit.fluxcd.io/name",
    "helm.toolkit.fluxcd.io/namespace",
    "app",
    "version",
    "team",
    "helm.sh/chart",
    "istio.io/rev",
    "fleetscope.io/team",
)
_KEY_CHARS = "#$&*+:;<>?[]{}|()"
KEY_CODES = dict(zip(_KEYS, _KEY_CHARS, strict=False))
"""Well-known keys and their one-character codes. Append only: a stored code keeps its key."""
KEY_OF = {v: k for k, v in KEY_CODES.items()}
VALUE_CODES = {
    v: f"{VALUE_MARK}{i:x}"
    for i, v in enumerate(
        (
            "flux",
            "Helm",
            "kubectl",
            "Kustomize",
            "mesh",
            "gitops",
            "gateway",
            "policy",
            "apps",
            "flux-system",
            "istio-system",
            "kustomize-controller",
            "helm-controller",
            "production",
            "staging",
            "true",
        )
    )
}
"""Common label values stored as `~` + hex. Append only."""
VALUE_OF = {v: k for k, v in VALUE_CODES.items()}


@functools.lru_cache(maxsize=4096)
def _valid_key(key: str) -> bool:
    return not label_rules.key_errors(key)


@functools.lru_cache(maxsize=4096)  # bounded like _PIECES, for the same reason
def _valid_value(value: str) -> bool:
    return label_rules.valid_value(value)


def capped(raw: Any) -> tuple[dict[str, str], bool]:
    """The labels a row keeps of an object's `metadata.labels`: the valid ones in key order, up
    to MAX_LABELS and MAX_LABELS_BYTES (as stored); whether any were cut."""
    if not isinstance(raw, dict) or not raw:
        return {}, False
    out: dict[str, str] = {}
    cut, size = False, 0
    # label_rules.valid_label, its answers cached: every object carries ~8 labels, with a few
    # dozen keys and values that repeat across a cluster (the regexes were a fifth of a row)
    valid_key, valid_value, codes = _valid_key, _valid_value, KEY_CODES
    for k in sorted(str(k) for k in raw):
        v = raw.get(k)
        if not isinstance(v, str) or not valid_key(k) or not valid_value(v):
            cut = True
            continue
        size += (1 if k in codes else len(k) + 2) + len(v)
        if len(out) >= MAX_LABELS or size > MAX_LABELS_BYTES:
            cut = True
            break
        out[k] = v
    return out, cut


_PIECES: dict[tuple[str, str], tuple[str, int, str] | None] = {}
"""(key, value) -> (stored key head, bytes it adds, stored value unless marked), None when the
pair is invalid: `of_object`'s per-label work, done once per distinct pair."""
_PIECES_MAX = 4096
"""Small on purpose. Of an L cluster's ~110,000 labels ~12,700 (key, value) pairs are distinct,
most of them one object's own. A bound of 65,536 kept every pair a process had met since its
last clear: ~0.5 MiB more per new cluster a Celery child synced (11.6 MiB after 24 L clusters),
and children's RSS crept for the whole of a 30-minute soak (docs/operations.md, the forty-fifth
run). At 4,096 the pairs many objects share are still found at once after a clear, and a miss
is cheap (`_piece` checks the value without building error messages): the same CPU for a first
sync of each of 24 L clusters, 12 MiB less held (docs/benchmarks.md, "Label pieces")."""


def _head(k: str) -> tuple[str, int] | None:
    """A key's stored head and its bytes, None when the key is invalid."""
    if not _valid_key(k):
        return None
    code = KEY_CODES.get(k)
    return (code, 1) if code is not None else (f",{k}=", len(k) + 2)


def _piece(k: str, v: str) -> tuple[str, int, str] | None:
    key_head = _head(k)
    if key_head is None or not label_rules.valid_value(v):
        return None
    return key_head[0], key_head[1] + len(v), VALUE_CODES.get(v, v)


def of_object(raw: Any, name: str, namespace: str = "") -> str:
    """`encode(*capped(raw), ...)` in one pass: the stored field of an object's
    `metadata.labels` (this runs once per collected object).

    A value that is the object's name, namespace or `<name>-<namespace>` is stored as its mark
    and checked here, not through `_PIECES`: those pairs are the object's own (two of an L
    object's ~8.5 labels), and looking them up there only missed and pushed the shared pairs out
    (docs/benchmarks.md, "collection")."""
    if not isinstance(raw, dict) or not raw:
        return ""
    coded: list[str] = []
    plain: list[str] = []
    cut, size, kept = False, 0, 0
    pieces = _PIECES
    instance = f"{name}-{namespace}" if namespace else None
    checked: dict[str, bool] = {}  # mark -> whether its value is a valid label value
    try:
        keys = sorted(raw)  # a JSON object's keys are all str
    except TypeError:
        keys = sorted(str(k) for k in raw)
    for k in keys:
        v = raw.get(k)
        if not isinstance(v, str):
            cut = True
            continue
        if v and v in (name, namespace, instance):
            key_head = _head(k)
            stored = NAME_MARK if v == name else NS_MARK if v == namespace else INSTANCE_MARK
            valid = checked.get(stored)
            if valid is None:
                valid = checked[stored] = label_rules.valid_value(v)
            if key_head is None or not valid:
                cut = True
                continue
            head, added = key_head
            added += len(v)
        else:
            try:
                got = pieces[k, v]
            except KeyError:
                if len(pieces) >= _PIECES_MAX:
                    pieces.clear()
                got = pieces[k, v] = _piece(k, v)
            if got is None:
                cut = True
                continue
            head, added, stored = got
        size += added
        if kept >= MAX_LABELS or size > MAX_LABELS_BYTES:
            cut = True
            break
        kept += 1
        (coded if len(head) == 1 else plain).append(head + stored)
    return (CUT_MARK if cut else "") + "".join(coded) + "".join(plain)


def _value(v: str, name: str, namespace: str) -> str:
    if v == name and v:
        return NAME_MARK
    if namespace and v == namespace:
        return NS_MARK
    if namespace and v == f"{name}-{namespace}":
        return INSTANCE_MARK
    return VALUE_CODES.get(v, v)


def encode(labels: dict[str, str], name: str, namespace: str = "", cut: bool = False) -> str:
    """The stored field of a row's labels (already `capped`)."""
    coded, plain = [], []
    for k, v in sorted(labels.items()):
        code = KEY_CODES.get(k)
        if code is not None:
            coded.append(code + _value(v, name, namespace))
        else:
            plain.append(f",{k}={_value(v, name, namespace)}")
    return (CUT_MARK if cut else "") + "".join(coded) + "".join(plain)


def decode(field: str, name: str, namespace: str = "") -> tuple[dict[str, str], bool]:
    """(labels, cut) of a stored field."""
    if not field:
        return {}, False
    cut = field[0] == CUT_MARK
    marks = {NAME_MARK: name, NS_MARK: namespace, INSTANCE_MARK: f"{name}-{namespace}"}
    out: dict[str, str] = {}
    key, start, plain = "", -1, False
    for i in range(1 if cut else 0, len(field) + 1):
        ch = field[i] if i < len(field) else ","
        if ch not in KEY_OF and ch != ",":
            continue
        if start >= 0:
            text = field[start:i]
            if plain:
                key, _, text = text.partition("=")
            v = marks.get(text) or (VALUE_OF.get(text, text) if text[:1] == VALUE_MARK else text)
            out[key] = v
        if i < len(field):
            key, start, plain = KEY_OF.get(ch, ""), i + 1, ch == ","
    return dict(sorted(out.items())), cut


@functools.lru_cache(maxsize=1024)
def needles(selector: label_rules.Selector) -> tuple[tuple[bytes, ...], ...]:
    """A quick test of stored members against `selector`, before any is parsed: per
    requirement that needs its key, byte strings of which a matching member holds at least one
    (the stored key with the value, or with a mark). A member holding none cannot match; one
    that holds them is then tested for real (other fields may hold the same bytes)."""
    out = []
    for r in selector.requirements:
        code = KEY_CODES.get(r.key)
        head = code if code is not None else f",{r.key}="
        if r.op in ("=", "==", "in"):
            stored = {VALUE_CODES.get(v, v) for v in r.values}
            alts = {head + s for s in stored} | {
                head + m for m in (NAME_MARK, NS_MARK, INSTANCE_MARK)
            }
            out.append(tuple(sorted(a.encode() for a in alts)))
        elif r.op in ("exists", ">", "<"):
            out.append((head.encode(),))
    return tuple(out)
