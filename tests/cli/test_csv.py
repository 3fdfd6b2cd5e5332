"""`fleetscope get -o csv` as a subprocess against a real query service on a kubesim fleet: the
records are the server's export (the API's rows, in order, for each kind of user), parse back
as RFC 4180 CSV, and `--limit`, `--no-headers` and the filters apply."""

from __future__ import annotations

import csv
import io

import pytest

from query.export import OBJECT_COLUMNS, cell
from tests.support.cli import Stack

USERS = ("admin-0", "dev-team-00", "nobody")


def who(stack: Stack, name: str) -> list[str]:
    return ["--server", stack.base, *stack.users[name].flags()]


def records(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def as_record(row: dict) -> list[str]:
    """A JSON row as its CSV record: `labels` as `k=v,k2=v2` by key, the rest by `cell`."""
    labels = ",".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))
    return [labels if c == "labels" else cell(row.get(c)) for c in OBJECT_COLUMNS]


@pytest.mark.parametrize("user", USERS)
def test_csv_records_are_the_api_rows(stack: Stack, cli, user: str) -> None:
    want = stack.api_rows(stack.users[user])
    res = cli("get", "-o", "csv", *who(stack, user))
    assert res.code == 0, res.err
    got = records(res.out)
    assert got[0] == list(OBJECT_COLUMNS)
    assert got[1:] == [as_record(r) for r in want]
    assert (res.err == "No resources found\n") == (not want)


def test_limit_headers_and_filters_apply(stack: Stack, cli) -> None:
    want = stack.api_rows(stack.users["admin-0"], kind="Kustomization", status="unhealthy")
    assert want
    res = cli(
        "get", "ks", "--status", "unhealthy", "-o", "csv", "--no-headers", "--limit", "1",
        *who(stack, "admin-0"),
    )  # fmt: skip
    assert res.code == 0, res.err
    assert records(res.out) == [as_record(want[0])]
