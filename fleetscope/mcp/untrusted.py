"""Leaf data is untrusted text: strings that reach the model keep their words but lose control
characters (terminal escapes, NUL, bidirectional overrides), which become visible `\\uXXXX`
escapes. Tabs and newlines stay: they are plain layout, and JSON encodes them anyway."""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL and the C1 controls, line/paragraph separators,
# the bidirectional embeddings, overrides and isolates, and zero-width format characters.
CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)


def clean_text(text: str) -> str:
    """`text` with every control character spelled as `\\uXXXX`."""
    return CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def clean(value: Any) -> Any:
    """A JSON value with every string in it (keys too) cleaned."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value
