"""Leaf-written text never reaches the terminal as control sequences: a condition message
with OSC 52 (clipboard write), `ESC [2K` (erase line), CR, BEL and the 8-bit CSI, set on a
kubesim object and collected, is printed escaped by `fleetscope get` (table, wide, name) and
`describe`, while `-o json` and `-o yaml` still parse back to exactly the API's data; `status`
escapes what a server says about clusters (a stand-in server: the last error of a sync)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import requests
import yaml

from collector.jobs import Collector, collect_once
from kubesim.server import KubeSim
from tests.support.fakeapi import FakeApi
from tests.support.http import make_app, serve

EVIL = "boom\x1b]52;c;ZXZpbA==\x07\x1b[2K\rall good\x9b31m\x7f\x00end\x85"
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # any control character but the newline
AS = ["--as", "admin-0", "--as-group", "fleet-admins"]


@pytest.fixture
def server(sim: KubeSim, collector: Collector, settings) -> Iterator[tuple[str, str]]:
    meta = sim.list("cluster-000", "Kustomization")[0]["metadata"]
    sim.set_ready(
        "cluster-000", "Kustomization", meta["namespace"], meta["name"], False, message=EVIL
    )
    assert all(o.ok for o in collect_once(collector))
    with serve(make_app(settings)) as h:
        yield f"http://{h}", f"cluster-000/{meta['namespace']}/Kustomization/{meta['name']}"


def api_items(base: str) -> list[dict]:
    resp = requests.get(
        base + "/api/v1/objects",
        params={"kind": "Kustomization", "limit": "500"},
        headers={"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"},
        timeout=10,
    )
    return resp.json()["items"]


def test_get_prints_leaf_messages_escaped(server: tuple[str, str], cli) -> None:
    base, _ = server
    assert any("\x1b]52;" in r["message"] for r in api_items(base)), "the attack is in the row"
    for fmt in ("table", "wide", "name"):
        res = cli("get", "ks", "-o", fmt, "--server", base, *AS)
        assert res.code == 0, res.err
        assert not RAW.search(res.out), (fmt, res.out)
        if fmt != "name":
            shown = "boom\\x1b]52;c;ZXZpbA==\\x07\\x1b[2K all good\\x9b31m\\x7f end"
            assert "\\x85" not in res.out  # NEL is whitespace: folded like CR
            assert shown in res.out  # CR and NUL became blanks on the way (cells fold them)


def test_json_and_yaml_stay_exact(server: tuple[str, str], cli) -> None:
    base, _ = server
    want = api_items(base)
    for fmt, load in (("json", json.loads), ("yaml", yaml.safe_load)):
        res = cli("get", "ks", "-o", fmt, "--server", base, *AS)
        assert res.code == 0, res.err
        assert not RAW.search(res.out), fmt
        assert load(res.out)["items"] == want, fmt


def test_describe_prints_the_object_escaped_and_exact(server: tuple[str, str], cli) -> None:
    base, ref = server
    for fmt, load in (("yaml", yaml.safe_load), ("json", json.loads)):
        res = cli("describe", ref, "-o", fmt, "--server", base, *AS)
        assert res.code == 0, res.err
        assert not RAW.search(res.out), fmt
        conditions = load(res.out)["status"]["conditions"]
        assert EVIL in [c.get("message") for c in conditions], fmt


@pytest.fixture
def stand_in() -> Iterator[FakeApi]:
    status = {
        "state": "degraded\x1b[2K",
        "message": EVIL,
        "collected": 1,
        "total": 2,
        "clusters": [
            {"cluster": "c1\x1b]0;title\x07", "state": "error", "lastError": EVIL, "objects": 3}
        ],
        "registry": {"notReady": [{"cluster": "c2", "source": "secret", "reason": EVIL}]},
    }
    api = FakeApi({"/api/v1/status": (200, status)})
    yield api
    api.close()


def test_status_escapes_what_the_server_says(stand_in: FakeApi, cli) -> None:
    res = cli("status", "--server", stand_in.url)
    assert res.code == 0, res.err
    assert not RAW.search(res.out), res.out
    assert res.out.count("boom\\x1b]52;") == 3  # message, last error, registry reason
    res = cli("status", "-o", "json", "--server", stand_in.url)
    assert json.loads(res.out)["clusters"][0]["lastError"] == EVIL
