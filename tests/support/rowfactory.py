"""Encoded rows for store, index and watch tests: only the fields those tests look at vary."""

from __future__ import annotations

from common.index import rows


def row(cluster: str, ns: str, kind: str, name: str, status: str = "healthy") -> rows.Row:
    return rows.Row(
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


def member(
    cluster: str, ns: str, kind: str, name: str, status: str = "healthy", edges: str = ""
) -> str:
    return rows.encode(row(cluster, ns, kind, name, status), edges)
