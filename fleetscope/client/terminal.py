"""Text from the fleet made safe for a terminal: leaf clusters write condition messages, names
and errors, and none of it may reach the user's terminal as a control sequence (`ESC ]52;`
writes the clipboard, `ESC [2K` erases a line, CR overwrites it, BEL rings).

`escape` is for human output (tables, `status`, `access`, headers): each C0 or C1 control
character and DEL becomes a visible `\\xNN`. `json_text` keeps `-o json` exact: the same
characters as JSON `\\uNNNN` escapes, which only occur inside strings. YAML needs nothing:
PyYAML writes these characters as escapes in double-quoted scalars.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_JSON_LEFT = re.compile("[\x7f-\x9f]")  # json.dumps escapes C0 in strings; its newlines are its own


def escape(text: str, keep: str = "") -> str:
    """`text` with every control character shown as `\\xNN` (a line of human output), but
    those in `keep` (e.g. the whitespace a table cell folds itself)."""
    return _CONTROL.sub(
        lambda m: m.group() if m.group() in keep else f"\\x{ord(m.group()):02x}", text
    )


def json_text(text: str) -> str:
    """JSON text (from json.dumps) whose control characters in strings are all `\\uNNNN`
    escapes: the same document, and nothing a terminal acts on (json.dumps escapes C0 but, with
    ensure_ascii=False, leaves DEL and the C1 controls, e.g. U+009B, the 8-bit CSI, as they are)."""
    return _JSON_LEFT.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
