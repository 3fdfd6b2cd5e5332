"""Rows and encoded members for store, index, reader and watch tests: only the fields those tests
look at vary (`fields` sets any other field of common.index.rows.Row)."""

from __future__ import annotations

from typing import Any

from common.index import rows


def row(
    cluster: str, ns: str, kind: str, name: str, status: str = "healthy", **fields: Any
) -> rows.Row:
    out = rows.Row(
        cluster=cluster,
        namespace=ns,
        kind=kind,
        apiVersion="v1",
        name=name,
        status=status,
        suspended=False,
        reason="",
        message="",
        warnings=0,
        lastTransitionTime=None,
        revision="",
        uiUrl=None,
        labels={},
    )
    out.update(fields)  # type: ignore[typeddict-item]
    return out


def member(
    cluster: str, ns: str, kind: str, name: str, status: str = "healthy", edges: str = ""
) -> str:
    return rows.encode(row(cluster, ns, kind, name, status), edges)
