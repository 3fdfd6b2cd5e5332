"""Output of `fleetscope get`, written page by page as pages arrive.

table / wide: aligned columns per page (as kubectl does when it reads in chunks), headers on
the first page only. name: `cluster/namespace/kind/name`, what `describe` takes. json / yaml: a
kubectl-style List (`apiVersion: v1`, `kind: List`, `items`) whose items are the API's rows,
streamed item by item when asked, else written at the end; either way one valid document.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Protocol, TextIO

import yaml

from fleetscope.client.table import NONE, age_since, cell, write_table
from fleetscope.client.terminal import escape, json_text

Row = dict[str, Any]
COLUMNS = ("CLUSTER", "NAMESPACE", "KIND", "NAME", "STATUS", "AGE")
WIDE = ("REVISION", "APIVERSION")
FORMATS = ("table", "wide", "json", "yaml", "name")
CLUSTER_SCOPED = "_"  # the namespace of a cluster-scoped object in paths and names


class Printer(Protocol):
    def page(self, rows: Sequence[Row]) -> None: ...

    def done(self) -> None: ...


def object_name(row: Row) -> str:
    """`cluster/namespace/kind/name` (`_` for no namespace): the argument `describe` takes."""
    ns = row.get("namespace") or CLUSTER_SCOPED
    return f"{row.get('cluster')}/{ns}/{row.get('kind')}/{row.get('name')}"


def status_text(row: Row) -> str:
    """The status, plus `,suspended` when the row says so (kubectl's `Ready,SchedulingDisabled`)."""
    status = str(row.get("status") or "")
    return f"{status},suspended" if row.get("suspended") is True else status


def blocked_text(value: Any) -> str:
    if isinstance(value, dict):
        ns = value.get("namespace") or CLUSTER_SCOPED
        where = f"{value['cluster']}/" if value.get("cluster") else ""
        return f"{where}{ns}/{value.get('kind')}/{value.get('name')}"
    return cell(value)


class TablePrinter:
    def __init__(self, out: TextIO, wide: bool, blocked_by: bool, headers: bool = True) -> None:
        self.out, self.wide, self.blocked_by, self.headers = out, wide, blocked_by, headers
        self.rows = 0
        self.widths: list[int] = []

    def columns(self) -> list[str]:
        extra = [*WIDE, *(["BLOCKED-BY"] if self.blocked_by else [])] if self.wide else []
        return [*COLUMNS, *extra, "MESSAGE"]

    def cells(self, row: Row) -> list[str]:
        out = [cell(row.get(k)) for k in ("cluster", "namespace", "kind", "name")]
        out += [cell(status_text(row)), age_since(row.get("lastTransitionTime"))]
        if self.wide:
            out += [cell(row.get("revision")), cell(row.get("apiVersion"))]
            if self.blocked_by:
                out.append(blocked_text(row.get("blockedBy")))
        message = cell(row.get("message"))
        return [*out, "" if message == NONE else message]

    def page(self, rows: Sequence[Row]) -> None:
        if not rows:
            return
        header = self.columns() if self.headers and self.rows == 0 else None
        self.widths = write_table(self.out, header, [self.cells(r) for r in rows], self.widths)
        self.rows += len(rows)
        self.out.flush()

    def done(self) -> None:
        pass


class NamePrinter:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def page(self, rows: Sequence[Row]) -> None:
        self.out.writelines(escape(object_name(r)) + "\n" for r in rows)
        self.out.flush()

    def done(self) -> None:
        pass


class ListPrinter:
    """A List document; with `stream`, each page's items are written as the page arrives.

    Output always stops at the end of a line: in JSON, the last item seen is held back until
    the next one (or the end) says whether a comma follows it.
    """

    def __init__(self, out: TextIO, fmt: str, stream: bool) -> None:
        self.out, self.fmt, self.stream = out, fmt, stream
        self.pending: list[Row] = []
        self.written = 0
        self.started = False

    def page(self, rows: Sequence[Row]) -> None:
        self.pending.extend(rows)
        if self.stream:
            self._flush(keep_last=self.fmt == "json")

    def done(self) -> None:
        self._flush(keep_last=False)
        if self.fmt == "json":
            self.out.write("    ]\n}\n")
        elif not self.written:
            self.out.write("items: []\n")
        self.out.flush()

    def _flush(self, keep_last: bool) -> None:
        if not self.started:
            self.out.write(_JSON_HEAD if self.fmt == "json" else _YAML_HEAD)
            self.started = True
        ready = self.pending[:-1] if keep_last else self.pending
        for i, item in enumerate(ready):
            more = keep_last or i < len(ready) - 1
            self.out.write(self._item(item, more))
            self.written += 1
        self.pending = self.pending[-1:] if keep_last else []
        self.out.flush()

    def _item(self, item: Row, more: bool) -> str:
        if self.fmt == "json":
            text = json_text(json.dumps(item, indent=4, ensure_ascii=False))
            body = "\n".join("        " + line for line in text.splitlines())
            return body + (",\n" if more else "\n")
        lead = "" if self.written else "items:\n"
        return lead + dump_yaml([item])


_JSON_HEAD = (
    '{\n    "apiVersion": "v1",\n    "kind": "List",\n'
    '    "metadata": {\n        "resourceVersion": ""\n    },\n    "items": [\n'
)
_YAML_HEAD = 'apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: ""\n'


class _Dumper(yaml.SafeDumper):
    """SafeDumper, but a string holding NEL, LS or PS is written double-quoted: PyYAML would
    otherwise write them raw in a plain or single-quoted scalar, where YAML folds them (the
    document would load as another string)."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = '"' if any(c in text for c in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    """YAML as kubectl writes it: keys in the given order, long strings not folded; exact for
    every string (control characters are escapes in double-quoted scalars)."""
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=2**31 - 1,
    )
    return text


def print_document(body: Any, fmt: str, out: TextIO | None = None) -> None:
    """An API answer as it came, in JSON or YAML."""
    out = out or sys.stdout
    out.write(
        json_text(json.dumps(body, indent=4, ensure_ascii=False)) + "\n"
        if fmt == "json"
        else dump_yaml(body)
    )


def make_printer(
    fmt: str, out: TextIO, *, stream: bool, headers: bool, blocked_by: bool
) -> Printer:
    if fmt in ("table", "wide"):
        return TablePrinter(out, fmt == "wide", blocked_by, headers)
    if fmt == "name":
        return NamePrinter(out)
    return ListPrinter(out, fmt, stream)
