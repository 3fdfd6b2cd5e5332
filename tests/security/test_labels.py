"""Labels and label selectors as an attack surface.

- A leaf cluster's admin writes hostile labels (control characters, quotes, JSON and CSV
  syntax, a `=` or `,` inside a value, thousands of labels, over-long keys): only labels the
  API server itself would accept are stored, within the caps, the row says some were cut, and
  the JSON and CSV answers stay well-formed with no control character.
- A caller's label facets (`labelKeys`) and selector counts never reveal a value, or the
  existence, of a row the caller may not list: a team member asking for the values of the team
  label sees only their own team's.
- A hostile or huge selector is a 400, never a 500."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim
from query.export import OBJECT_COLUMNS
from tests.support import sims
from tests.support.http import make_app

FLEET = generate_fleet(clusters=2, namespaces=6, seed=5, teams=3)
USERS = {u.name: u for u in fleet_users(FLEET)}
TEAM = "fleetscope.io/team"
HOSTILE = {
    "ok": "fine",
    "esc": "\x1b[2J\x1b]0;pwned\x07",
    "quote": 'a"b',
    "newline": "a\nb",
    "comma": "a,b=c",
    "formula": "=HYPERLINK(1)",
    "Bad Key": "x",
    "x/" + "k" * 70: "too-long-name",
    "nul": "a\x00b",
    **{f"bulk-{i:04d}": "v" for i in range(2000)},
}


def headers(name: str, accept: str = "application/json") -> dict[str, str]:
    u = USERS[name]
    assert len(u.groups) <= 1
    group = {"X-Remote-Group": u.groups[0]} if u.groups else {}
    return {"X-Remote-User": u.name, **group, "Accept": accept}


@pytest.fixture
def client(tmp_path: Path, redis_url: str) -> Iterator[tuple[KubeSim, object]]:
    for sim in sims.running(FLEET, tmp_path):
        cluster = FLEET.cluster_names[0]
        target = sim.list(cluster, "Kustomization")[0]
        target["metadata"]["labels"] = HOSTILE
        sim.apply(cluster, target)
        settings = sims.settings_for(tmp_path, redis_url)
        sims.collect(settings)
        yield sim, make_app(settings).test_client()


def test_hostile_leaf_labels_are_dropped_capped_and_said(client) -> None:
    _sim, c = client
    resp = c.get("/api/v1/objects", query_string={"limit": 500, "labelSelector": "bulk-0000=v"},
                 headers=headers("admin-0"))  # fmt: skip
    assert resp.status_code == 200
    text = resp.get_data(as_text=True)
    assert not any(ord(ch) < 0x20 for ch in text.rstrip("\n"))  # no control character at all
    (row,) = json.loads(text)["items"]
    assert row["labelsTruncated"] is True
    assert "ok" not in row["labels"]  # kept in key order: the bulk labels filled the cap
    for bad in ("esc", "quote", "newline", "comma", "formula", "Bad Key", "nul"):
        assert bad not in row["labels"], bad
    assert len(row["labels"]) <= 32
    exported = c.get(
        "/api/v1/objects", query_string={"labelSelector": "bulk-0000=v"},
        headers=headers("admin-0", "text/csv"),
    )  # fmt: skip
    records = list(csv.reader(io.StringIO(exported.get_data(as_text=True), newline="")))
    got = dict(zip(OBJECT_COLUMNS, records[1], strict=True))["labels"]
    assert got.startswith("bulk-0000=v,") and "=HYPERLINK" not in got
    assert got == ",".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))


@pytest.mark.parametrize("who", ["dev-team-00", "solo"])
def test_label_facets_show_only_what_the_caller_may_list(client, who: str) -> None:
    _sim, c = client
    mine = c.get("/api/v1/objects", query_string={"limit": 500}, headers=headers(who)).get_json()
    own_teams = {r["labels"][TEAM] for r in mine["items"] if TEAM in r["labels"]}
    admin = c.get("/api/v1/facets", query_string={"labelKeys": TEAM}, headers=headers("admin-0"))
    assert len(admin.get_json()["labels"][TEAM]) > len(own_teams)  # other teams exist
    resp = c.get("/api/v1/facets", query_string={"labelKeys": TEAM}, headers=headers(who))
    facets = resp.get_json()
    assert set(facets["labels"][TEAM]) == own_teams
    for other in set(admin.get_json()["labels"][TEAM]) - own_teams:
        sel = {"labelSelector": f"{TEAM}={other}"}
        assert (
            c.get("/api/v1/facets", query_string=sel, headers=headers(who)).get_json()["total"] == 0
        )
        groups = c.get("/api/v1/groups", query_string=sel, headers=headers(who)).get_json()
        assert groups["items"] == []
        listed = c.get("/api/v1/objects", query_string=sel, headers=headers(who)).get_json()
        assert listed["items"] == []


@pytest.mark.parametrize(
    "selector",
    [
        "a" * 5000,
        "x in (" + ",".join(["v"] * 3000) + ")",
        "é=1",
        "a=\x00",
        "a=\x1b[2J",
        "a in ((b))",
        "))))",
        "!!!a",
        "a notin",
    ],
)
def test_hostile_selectors_are_a_400(client, selector: str) -> None:
    _sim, c = client
    for path in ("/api/v1/objects", "/api/v1/facets", "/api/v1/groups"):
        resp = c.get(path, query_string={"labelSelector": selector}, headers=headers("admin-0"))
        assert resp.status_code == 400, (path, selector)
        body = resp.get_json()
        assert body["error"] == "invalid_parameter"
        assert body["message"].startswith("labelSelector: ")
        assert "unknown parameter" not in body["message"]  # refused by the parser, not unread
    bad_keys = c.get(
        "/api/v1/facets", query_string={"labelKeys": "a b"}, headers=headers("admin-0")
    )
    assert bad_keys.status_code == 400
    assert bad_keys.get_json()["message"].startswith("labelKeys: 'a b' is not a label key")
