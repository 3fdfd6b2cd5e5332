"""The demo's banner prints a `fleetscope` command beside each curl: run as printed (against a
real query service in the demo's `header` mode), each shows the rows its curl returns."""

from __future__ import annotations

import contextlib
import io
import itertools
import shlex

import requests

from fleetscope.demo import _print_banner
from fleetscope.demo_users import SHOWN, DemoUser
from tests.cli.tables import expected_cells, parse_table, shown_cells
from tests.support.cli import Stack


def test_banner_commands_show_what_their_curl_shows(stack: Stack, cli) -> None:
    users = [DemoUser(n, stack.users[n].groups, f"user {n}") for n in SHOWN if n in stack.users]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _print_banner(stack.base, users)
    lines = [line.strip() for line in out.getvalue().splitlines()]
    pairs = [
        (c, f)
        for c, f in itertools.pairwise(lines)
        if c.startswith("curl -s -H") and "/api/v1/objects" in c
    ]
    assert len(pairs) == len(users) >= 3
    for curl, command in pairs:
        assert command.startswith("fleetscope get ")
        words = shlex.split(curl)
        headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
        want = requests.get(words[-1], headers=headers, timeout=10).json()["items"]
        res = cli(*shlex.split(command)[1:])
        assert res.code == 0, (command, res.err)
        got = [shown_cells(c) for c in parse_table(res.out, 7)[1:]]
        assert got == [expected_cells(r) for r in want], command
    status = next(line for line in lines if line.startswith("fleetscope status "))
    assert cli(*shlex.split(status)[1:]).code == 0
    # the status curl carries an identity too (every API call needs one)
    words = shlex.split(next(line for line in lines if "/api/v1/status" in line and "curl" in line))
    headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
    assert requests.get(words[-1], headers=headers, timeout=10).status_code == 200
