"""Kubernetes label selectors, parsed as k8s.io/apimachinery/pkg/labels/selector.go parses them.

`parse(text)` returns a `Selector` (a tuple of requirements, AND-ed) whose `matches(labels)`
answers for one object's labels: the predicate the list reader, the facets, the alert rules and
the watch stream share. The grammar, the lexer (whitespace, `in`/`notin` read as values where a
value is expected, `()` meaning the set holding ""), the key and value validation and the error
texts are upstream's; a `SelectorError` also says the character position where the parser
stopped. Semantics are upstream's: `!=` and `notin` match objects without the key; `>`/`<`
compare integers and need the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MAX_SELECTOR_LEN = 4096
"""Longer selectors are refused before parsing (kube-apiserver has no such limit; a URL does)."""

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
_QNAME = re.compile(QUALIFIED_NAME_FMT)
_VALUE = re.compile(LABEL_VALUE_FMT)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's validation.RegexError (its double spaces included)."""
    msg += " (e.g. "
    for i, ex in enumerate(examples):
        if i:
            msg += " or "
        msg += "'" + ex + "', "
    return msg + "regex used for validation is '" + fmt + "')"


_QNAME_MSG = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character",
    QUALIFIED_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
_SUBDOMAIN_MSG = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character",
    DNS1123_SUBDOMAIN_FMT,
    "example.com",
)
_VALUE_MSG = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character",
    LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)


def key_errors(key: str) -> list[str]:
    """validation.IsQualifiedName: what is wrong with a label key (empty: valid)."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        errs = []
        if len(prefix) > 253:
            errs.append("prefix part must be no more than 253 characters")
        if not _SUBDOMAIN.fullmatch(prefix):
            errs.append("prefix part " + _SUBDOMAIN_MSG)
        if errs:
            return errs
    else:
        return [
            "a qualified name "
            + _QNAME_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        return ["name part must be non-empty"]
    errs = []
    if len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QNAME.fullmatch(name):
        errs.append("name part " + _QNAME_MSG)
    return errs


def value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue: what is wrong with a label value (empty: valid)."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _VALUE.fullmatch(value):
        errs.append(_VALUE_MSG)
    return errs


def valid_value(value: str) -> bool:
    """`not value_errors(value)` without building the messages (run for every label a sync
    meets the first time)."""
    return len(value) <= 63 and _VALUE.fullmatch(value) is not None


def valid_label(key: str, value: str) -> bool:
    """Whether a key and value pass the API server's validation (leaf data is untrusted)."""
    return (
        isinstance(key, str)
        and isinstance(value, str)
        and not key_errors(key)
        and not (value_errors(value))
    )


class SelectorError(ValueError):
    """A malformed selector: upstream's message and the position (0-based) where it stopped."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    """`=`, `==`, `!=`, `in`, `notin`, `exists`, `!`, `>` or `<`."""
    values: frozenset[str] = frozenset()

    def canonical(self) -> str:
        """Requirement.String() upstream: `!k`, `k`, `k=v`, `k in (a,b)` (values sorted)."""
        if self.op == "!":
            return "!" + self.key
        if self.op == "exists":
            return self.key
        vals = ",".join(sorted(self.values))
        if self.op in ("in", "notin"):
            return f"{self.key} {self.op} ({vals})"
        return f"{self.key}{self.op}{vals}"

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, has = self.op, self.key in labels
        if op in ("=", "==", "in"):
            return has and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return not has or labels[self.key] not in self.values
        if op == "exists":
            return has
        if op == "!":
            return not has
        if not has:
            return False
        try:
            got, want = int(labels[self.key]), int(next(iter(self.values)))
        except ValueError:
            return False
        return got > want if op == ">" else got < want


@dataclass(frozen=True)
class Selector:
    """Requirements AND-ed, sorted by key as upstream keeps them; empty matches everything."""

    requirements: tuple[Requirement, ...] = ()
    text: str = ""
    """The selector as given (for continue tokens and logs)."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def canonical(self) -> str:
        """The selector as upstream prints it (requirements by key): equal meanings, equal text."""
        return ",".join(r.canonical() for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)


EVERYTHING = Selector()

# -- lexer (selector.go's Lexer) ----------------------------------------------------------------

_SPECIAL = frozenset("=!(),><")
_WHITE = frozenset(" \t\r\n")
_TOKENS = {
    ")": "closedpar",
    ",": "comma",
    "!": "doesnotexist",
    "==": "doubleequals",
    "=": "equals",
    ">": "gt",
    "in": "in",
    "<": "lt",
    "!=": "notequals",
    "notin": "notin",
    "(": "openpar",
}
_Item = tuple[str, str, int]  # token, literal, position


def _lex(s: str) -> list[_Item]:
    out: list[_Item] = []
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in _WHITE:
            i += 1
        if i >= n:
            out.append(("end", "", n))
            return out
        start = i
        if s[i] in _SPECIAL:
            last: tuple[str, str] | None = None
            buf = ""
            while i < n and s[i] in _SPECIAL:
                buf += s[i]
                tok = _TOKENS.get(buf)
                if tok is not None:
                    last = (tok, buf)
                elif last is not None:
                    break
                i += 1
            if last is None:
                out.append(("error", f"error expected: keyword found '{buf}'", start))
                i = start + len(buf)
            else:
                out.append((*last, start))
                i = start + len(last[1])
        else:
            while i < n and s[i] not in _SPECIAL and s[i] not in _WHITE:
                i += 1
            lit = s[start:i]
            out.append((_TOKENS.get(lit, "id") if lit in ("in", "notin") else "id", lit, start))


# -- parser (selector.go's Parser) --------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def _at(self, values: bool, k: int) -> tuple[str, str]:
        tok, lit, _ = self.items[k]
        if values and tok in ("in", "notin"):
            tok = "id"
        return tok, lit

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        return self._at(values, self.pos)

    def consume(self, values: bool = True) -> tuple[str, str]:
        self.pos += 1
        return self._at(values, self.pos - 1)

    def fail(self, message: str, back: int = 1) -> SelectorError:
        """An error at the token consumed last (`back` 1) or looked at (0)."""
        k = min(max(self.pos - back, 0), len(self.items) - 1)
        return SelectorError(message, self.items[k][2])

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok == "end":
                return reqs
            if tok not in ("id", "doesnotexist"):
                raise self.fail(
                    f"found '{lit}', expected: !, identifier, or 'end of string'", back=0
                )
            try:
                reqs.append(self.requirement())
            except SelectorError as e:
                raise SelectorError(f"unable to parse requirement: {e.message}", e.position) from e
            t, lit = self.consume()
            if t == "end":
                return reqs
            if t != "comma":
                raise self.fail(f"found '{lit}', expected: ',' or 'end of string'")
            t2, l2 = self.lookahead()
            if t2 not in ("id", "doesnotexist"):
                raise self.fail(f"found '{l2}', expected: identifier after ','", back=0)

    def requirement(self) -> Requirement:
        key, op = self.key_and_operator()
        if op in ("exists", "!"):
            return Requirement(key, op)
        tok, lit = self.consume(values=False)
        ops = {
            "in": "in",
            "notin": "notin",
            "equals": "=",
            "doubleequals": "==",
            "notequals": "!=",
            "gt": ">",
            "lt": "<",
        }
        if tok not in ops:
            raise self.fail(f"found '{lit}', expected: '=', '!=', '==', 'in', notin'")
        op = ops[tok]
        start = self.items[self.pos][2]
        vals = self.values() if op in ("in", "notin") else self.exact_value()
        return _new_requirement(key, op, vals, start)

    def key_and_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self.consume()
        if tok == "doesnotexist":
            op = "!"
            tok, lit = self.consume()
        if tok != "id":
            raise self.fail(f"found '{lit}', expected: identifier")
        errs = key_errors(lit)
        if errs:
            raise self.fail(f'<nil>: Invalid value: "{lit}": {"; ".join(errs)}')
        if self.lookahead()[0] in ("end", "comma") and op != "!":
            op = "exists"
        return lit, op

    def values(self) -> list[str]:
        tok, lit = self.consume()
        if tok != "openpar":
            raise self.fail(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in ("id", "comma"):
            out = self.identifiers()
            if self.consume()[0] != "closedpar":
                raise self.fail(f"found '{lit}', expected: ')'")
            return out
        if tok == "closedpar":  # "()" is the set holding "" upstream
            self.consume()
            return [""]
        raise self.fail(f"found '{lit}', expected: ',', ')' or identifier", back=0)

    def identifiers(self) -> list[str]:
        out: dict[str, None] = {}
        while True:
            tok, lit = self.consume()
            if tok == "id":
                out[lit] = None
                tok2, lit2 = self.lookahead()
                if tok2 == "comma":
                    continue
                if tok2 == "closedpar":
                    return sorted(out)
                raise self.fail(f"found '{lit2}', expected: ',' or ')'", back=0)
            if tok == "comma":
                if not out:
                    out[""] = None
                tok2 = self.lookahead()[0]
                if tok2 == "closedpar":
                    out[""] = None
                    return sorted(out)
                if tok2 == "comma":
                    self.consume()
                    out[""] = None
                continue
            raise self.fail(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        tok, lit = self.lookahead()
        if tok in ("end", "comma"):
            return [""]
        tok, lit = self.consume()
        if tok == "id":
            return [lit]
        raise self.fail(f"found '{lit}', expected: identifier")


def _new_requirement(key: str, op: str, vals: list[str], position: int) -> Requirement:
    """selector.go's NewRequirement checks (the key was checked by the parser)."""
    errs: list[str] = []
    if op in (">", "<"):
        for i, v in enumerate(vals):
            if not re.fullmatch(r"[+-]?[0-9]+", v) or not -(2**63) <= int(v) < 2**63:
                errs.append(
                    f'values[{i}]: Invalid value: "{v}": '
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for i, v in enumerate(vals):
        bad = value_errors(v)
        if bad:
            errs.append(f'values[{i}][{key}]: Invalid value: "{v}": {"; ".join(bad)}')
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]", position)
    return Requirement(key, op, frozenset(vals))


def parse(text: str) -> Selector:
    """The selector `text` means; raises SelectorError as kube-apiserver would refuse it."""
    if len(text) > MAX_SELECTOR_LEN:
        raise SelectorError(f"must be at most {MAX_SELECTOR_LEN} characters", MAX_SELECTOR_LEN)
    reqs = _Parser(text).parse()
    return Selector(tuple(sorted(reqs, key=lambda r: r.key)), text)


def format_labels(labels: Mapping[str, str]) -> str:
    """Labels as a selector-like `k=v,k2=v2`, sorted by key (labels.Set.String())."""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))
