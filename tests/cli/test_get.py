"""`fleetscope get` as a subprocess against a real query service on a kubesim fleet: its table
shows exactly the API's rows for each kind of user, pages are followed lazily and printed as
they arrive, json/yaml parse back to the API's items, and the filters mean what the API's do."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import pytest
import requests
import yaml

from tests.cli.tables import expected_cells, parse_table, shown_cells
from tests.support.cli import Stack, who
from tests.support.paths import REPO

USERS = ("admin-0", "dev-team-00", "solo", "nobody")


@pytest.mark.parametrize("user", USERS)
def test_table_rows_are_the_api_rows_for_each_user(stack: Stack, cli, user: str) -> None:
    want = stack.api_rows(stack.users[user])
    res = cli("get", *who(stack, user))
    assert res.code == 0, res.err
    if user == "nobody":
        assert want == [] and res.out == "" and res.err == "No resources found\n"
        return
    assert want, f"{user} should see something in this fleet"
    header, *lines = parse_table(res.out, 7)
    assert header == ["CLUSTER", "NAMESPACE", "KIND", "NAME", "STATUS", "AGE", "MESSAGE"]
    assert [shown_cells(c) for c in lines] == [expected_cells(r) for r in want]
    for cells, row in zip(lines, want, strict=True):
        assert (cells[5] == "<unknown>") == (row["lastTransitionTime"] is None)
    if user == "admin-0":
        statuses = {r["status"] for r in want}
        assert "unhealthy" in statuses, "the fixture's faults are visible"
        assert any(r["suspended"] for r in want), "and its suspended HelmRelease"


def test_wide_adds_revision_and_api_version(stack: Stack, cli) -> None:
    want = stack.api_rows(stack.users["admin-0"], kind="Kustomization")
    res = cli("get", "ks", "-o", "wide", "--no-headers", *who(stack, "admin-0"))
    assert res.code == 0, res.err
    lines = parse_table(res.out, 9)
    assert [(c[3], c[6], c[7]) for c in lines] == [
        (r["name"], r["revision"] or "<none>", r["apiVersion"]) for r in want
    ]


def test_many_small_pages_are_followed_to_the_end(stack: Stack, cli) -> None:
    want = stack.api_rows(stack.users["admin-0"])
    res = cli("get", "--chunk-size", "7", "--no-headers", "-v", "6", *who(stack, "admin-0"))
    assert res.code == 0, res.err
    assert [shown_cells(c) for c in parse_table(res.out, 7)] == [expected_cells(r) for r in want]
    requests = [line for line in res.err.splitlines() if "/api/v1/objects?" in line]
    assert len(requests) >= math.ceil(len(want) / 7) > 10
    assert all("limit=7" in line for line in requests)
    assert all("continue=" in line for line in requests[1:])


def test_limit_stops_fetching_once_enough_rows_are_printed(stack: Stack, cli) -> None:
    want = stack.api_rows(stack.users["admin-0"])[:10]
    res = cli(
        "get",
        "--limit",
        "10",
        "--chunk-size",
        "4",
        "--no-headers",
        "-v",
        "6",
        *who(stack, "admin-0"),
    )
    assert res.code == 0, res.err
    assert [shown_cells(c) for c in parse_table(res.out, 7)] == [expected_cells(r) for r in want]
    limits = [line.split("limit=")[1].split("&")[0].split()[0] for line in res.err.splitlines()]
    assert limits == ["4", "4", "2"], "three requests, the last one only for what is missing"


@pytest.mark.parametrize("args", [[], ["-o", "json", "--chunk-size", "6"]])
def test_pages_are_printed_as_they_arrive(stack: Stack, args: list[str], home) -> None:
    """stdout and stderr in one pipe: each page's rows come before the next page's request."""
    cmd = [sys.executable, "-m", "fleetscope", "get", "--chunk-size", "6", "-v", "6", *args]
    out = subprocess.run(
        [*cmd, *who(stack, "admin-0")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    marks = [i for i, line in enumerate(out.splitlines()) if line.startswith("GET ")]
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    assert len(marks) > 3 and all(g > 1 for g in gaps), out[:2000]


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "json"],
        ["-o", "yaml"],
        ["-o", "json", "--chunk-size", "5"],
        ["-o", "yaml", "--chunk-size", "5"],
    ],
)
@pytest.mark.parametrize("user", ["admin-0", "dev-team-00", "nobody"])
def test_json_and_yaml_parse_back_to_the_api_items(
    stack: Stack, cli, args: list[str], user: str
) -> None:
    res = cli("get", *args, *who(stack, user))
    assert res.code == 0, res.err
    doc = yaml.safe_load(res.out)  # JSON is YAML too; json.loads for the JSON ones below
    if args[1] == "json":
        assert doc == res.json()
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    assert doc["items"] == stack.api_rows(stack.users[user])


def test_name_output_is_what_describe_takes(stack: Stack, cli) -> None:
    want = stack.api_rows(stack.users["dev-team-00"])
    res = cli("get", "-o", "name", *who(stack, "dev-team-00"))
    assert res.code == 0, res.err
    assert res.out.splitlines() == [
        f"{r['cluster']}/{r['namespace'] or '_'}/{r['kind']}/{r['name']}" for r in want
    ]


def test_filters_mean_what_the_api_filters_mean(stack: Stack, cli) -> None:
    admin = stack.users["admin-0"]
    rows = stack.api_rows(admin)
    cluster, ns = rows[0]["cluster"], rows[0]["namespace"]
    cases = [
        (
            ["KS,hr", "-n", ns, "--cluster", cluster],
            {"kind": "Kustomization,HelmRelease", "namespace": ns, "cluster": cluster},
        ),
        (["virtualservices", "dr"], {"kind": "VirtualService,DestinationRule"}),
        (["--status", "unhealthy"], {"status": "unhealthy"}),
        (["--name", "WEB", "-A"], {"name": "web"}),
        (["--suspended"], {"suspended": "true"}),
        (["--no-suspended", "--status", "healthy"], {"suspended": "false", "status": "healthy"}),
        (
            ["-l", "app.kubernetes.io/component=mesh"],
            {"labelSelector": "app.kubernetes.io/component=mesh"},
        ),
        (
            ["hr", "--selector", "app.kubernetes.io/managed-by in (flux),!nosuch"],
            {
                "kind": "HelmRelease",
                "labelSelector": "app.kubernetes.io/managed-by in (flux),!nosuch",
            },
        ),
    ]
    for args, params in cases:
        want = stack.api_rows(admin, **params)
        assert want, f"{args}: the fleet should have rows for this filter"
        res = cli("get", "--no-headers", *args, *who(stack, "admin-0"))
        assert res.code == 0, (args, res.err)
        got = [shown_cells(c) for c in parse_table(res.out, 7)]
        assert got == [expected_cells(r) for r in want], args


def test_a_malformed_selector_is_the_servers_message(stack: Stack, cli) -> None:
    res = cli("get", "-l", "app in (web", *who(stack, "admin-0"))
    assert res.code != 0
    assert "unable to parse requirement: found '', expected: ',' or ')' (at position 11)" in res.err


def test_sort_by_groups_and_what_the_server_refuses(stack: Stack, cli) -> None:
    admin = stack.users["admin-0"]
    for field in ("-lastTransitionTime", "lastTransitionTime"):
        want = stack.api_rows(admin, sort=field)
        res = cli("get", "--no-headers", f"--sort-by={field}", *who(stack, "admin-0"))
        assert res.code == 0, res.err
        got = [shown_cells(c) for c in parse_table(res.out, 7)]
        assert got == [expected_cells(r) for r in want], field
        assert want != stack.api_rows(admin), "sorted differs from the default order"
    bad = cli("get", "--sort-by", "name", *who(stack, "admin-0"))
    assert bad.code == 2 and "this server sorts by" in bad.err
    # Groups: the table holds the API's groups in its order (most unhealthy first).
    resp = requests.get(
        stack.base + "/api/v1/groups",
        params={"limit": "500", "status": "unhealthy,healthy"},
        headers=admin.headers(),
        timeout=10,
    )
    resp.raise_for_status()
    want_groups = resp.json()["items"]
    groups = cli("groups", "--no-headers", "--status", "unhealthy,healthy", *who(stack, "admin-0"))
    assert groups.code == 0, groups.err
    got_groups = [line.split() for line in groups.out.splitlines()]
    assert [g[:4] for g in got_groups] == [
        [g["namespace"] or "<none>", g["kind"], g["name"], str(g["total"])] for g in want_groups
    ]
    assert want_groups and want_groups[0]["statuses"]["unhealthy"] > 0
    # Suspension is beside the health on this server: both filters combine.
    health = stack.api_rows(stack.users["admin-0"], suspended="true")[0]["status"]
    both = cli("get", "--suspended", "--status", health, "--no-headers", *who(stack, "admin-0"))
    want = stack.api_rows(stack.users["admin-0"], suspended="true", status=health)
    assert both.code == 0 and want
    assert [shown_cells(c) for c in parse_table(both.out, 7)] == [expected_cells(r) for r in want]
