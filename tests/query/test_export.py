"""CSV exports (`Accept: text/csv` on /api/v1/objects and /api/v1/groups) end to end over real
HTTP: a kubesim fleet collected by the real collector, asked by the fleet's generated users.
Each CSV is compared with the JSON walk of the same query by the same user (same rows, same
order, none twice), parsed back with Python's csv module (RFC 4180: quoting, CRLF); the row
limit answers a JSON 422 before the first byte; a bad token is a JSON 400, not a broken stream."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from common.settings import Settings
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import fleet_users
from kubesim.server import KubeSim
from query.app import create_app
from query.export import GROUP_COLUMNS, OBJECT_COLUMNS, cell
from tests.support import sims
from tests.support.http import serve

FLEET = generate_fleet(clusters=3, namespaces=8, seed=11, teams=3)
USERS = {u.name: u for u in fleet_users(FLEET)}
CSV = {"Accept": "text/csv"}


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[KubeSim]:
    yield from sims.running(FLEET, tmp_path)


@pytest.fixture
def settings(sim: KubeSim, tmp_path: Path, redis_url: str) -> Settings:
    s = sims.settings_for(tmp_path, redis_url)
    sims.collect(s)
    return s


@pytest.fixture
def url(settings: Settings) -> Iterator[str]:
    with serve(create_app(settings)) as host:
        yield f"http://{host}"


def headers(user: str, accept: str = "application/json") -> dict[str, str]:
    u = USERS[user]
    assert len(u.groups) <= 1  # one X-Remote-Group value is one group
    groups = {"X-Remote-Group": u.groups[0]} if u.groups else {}
    return {"X-Remote-User": u.name, **groups, "Accept": accept}


def json_walk(url: str, user: str, path: str, **query: Any) -> list[dict[str, Any]]:
    out, token = [], None
    while True:
        q = {"limit": 7, **query, **({"continue": token} if token else {})}
        resp = requests.get(url + path, params=q, headers=headers(user), timeout=30)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        out += body["items"]
        token = body["continue"]
        if not token:
            return out


def csv_records(url: str, user: str, path: str, **query: Any) -> list[list[str]]:
    resp = requests.get(
        url + path, params=query, headers=headers(user, "text/csv"), timeout=30, stream=True
    )
    assert resp.status_code == 200, resp.text
    assert resp.headers["Content-Type"].startswith("text/csv")
    assert resp.headers["Content-Disposition"].startswith("attachment;")
    raw = resp.content
    assert raw.endswith(b"\r\n")  # RFC 4180 line ends
    records = list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))
    return records


def as_record(row: dict[str, Any]) -> list[str]:
    labels = ",".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))
    return [labels if c == "labels" else cell(row.get(c)) for c in OBJECT_COLUMNS]


@pytest.mark.parametrize("user", ["admin-0", "dev-team-00", "solo", "nobody"])
def test_an_object_export_is_the_json_walk(url: str, user: str) -> None:
    for query in (
        {},
        {"status": "unhealthy,progressing"},
        {"sort": "-lastTransitionTime"},
        {"labelSelector": "fleetscope.io/team in (team-00,team-01)"},
    ):
        records = csv_records(url, user, "/api/v1/objects", **query)
        assert records[0] == list(OBJECT_COLUMNS)
        want = [as_record(r) for r in json_walk(url, user, "/api/v1/objects", **query)]
        assert records[1:] == want, (user, query)
        ids = [tuple(r[:5]) for r in records[1:]]
        assert len(ids) == len(set(ids))
    if user != "nobody":
        assert len(records) > 1  # the comparison is not between two empty walks


@pytest.mark.parametrize("by", ["object", "namespace"])
def test_a_group_export_is_the_json_walk(url: str, by: str) -> None:
    for user in ("admin-0", "dev-team-00"):
        records = csv_records(url, user, "/api/v1/groups", by=by, clusterLimit=2)
        assert records[0] == list(GROUP_COLUMNS)
        groups = json_walk(url, user, "/api/v1/groups", by=by, clusterLimit=2)
        assert len(records) - 1 == len(groups) > 0
        for rec, g in zip(records[1:], groups, strict=True):
            got = dict(zip(GROUP_COLUMNS, rec, strict=True))
            assert (got["namespace"], got["kind"], got["name"]) == (
                g["namespace"],
                g.get("kind", ""),
                g.get("name", ""),
            )
            assert int(got["total"]) == g["total"] and int(got["suspended"]) == g["suspended"]
            assert {s: int(got[s]) for s in g["statuses"]} == g["statuses"]
            assert got["objects"] == str(g.get("objects", ""))
            shown = [f"{m['cluster']}={m['status']}" for m in g["clusters"]]
            assert got["clusters"].split() == shown
            revs = [f"{r['revision']}={r['clusters']}" for r in g.get("revisions", [])]
            other = g.get("otherRevisions", {}).get("revisions")
            if other:
                revs.append(f"+{other}={g['otherRevisions']['clusters']}")
            assert got["revisions"].split() == revs


def test_a_drift_export_is_the_drift_walk(url: str) -> None:
    records = csv_records(url, "admin-0", "/api/v1/groups", drift="true")
    groups = json_walk(url, "admin-0", "/api/v1/groups", drift="true")
    assert groups and len(records) - 1 == len(groups)
    for rec, g in zip(records[1:], groups, strict=True):
        got = dict(zip(GROUP_COLUMNS, rec, strict=True))
        assert (got["namespace"], got["kind"], got["name"]) == (
            g["namespace"],
            g["kind"],
            g["name"],
        )
        assert len(got["revisions"].split()) >= 2


def test_fields_are_quoted_as_rfc_4180_says(sim: KubeSim, settings: Settings, url: str) -> None:
    cluster = FLEET.cluster_names[0]
    ks = next(o for o in sim.list(cluster, "Kustomization"))
    meta = ks["metadata"]
    message = 'apply failed: "web", "api",\nand more'
    sim.set_ready(cluster, "Kustomization", meta["namespace"], meta["name"], False, "", message)
    sims.collect(settings, cluster)
    records = csv_records(url, "admin-0", "/api/v1/objects", name=meta["name"])
    got = [dict(zip(OBJECT_COLUMNS, r, strict=True)) for r in records[1:]]
    mine = [g for g in got if (g["cluster"], g["namespace"]) == (cluster, meta["namespace"])]
    (shown,) = (g["message"] for g in mine if g["kind"] == "Kustomization")
    (row,) = (
        r
        for r in json_walk(url, "admin-0", "/api/v1/objects", name=meta["name"])
        if (r["cluster"], r["namespace"], r["kind"]) == (cluster, meta["namespace"], ks["kind"])
    )
    assert shown == row["message"] and '"web", "api",' in shown  # quotes and commas survive
    line = next(x for x in csv_text(url, meta["name"]).split("\r\n") if "apply failed" in x)
    assert '"apply failed: ""web"", ""api"",' in line  # quoted, quotes doubled


def csv_text(url: str, name: str) -> str:
    resp = requests.get(
        url + "/api/v1/objects",
        params={"name": name},
        headers=headers("admin-0", "text/csv"),
        timeout=30,
    )
    return resp.content.decode()


def test_json_stays_the_default_and_csv_must_be_asked_for(url: str) -> None:
    for accept in ("*/*", "application/json", "text/csv;q=0.5, application/json"):
        resp = requests.get(url + "/api/v1/objects", headers=headers("admin-0", accept), timeout=30)
        assert resp.headers["Content-Type"].startswith("application/json"), accept
    resp = requests.get(
        url + "/api/v1/objects", headers=headers("admin-0", "text/csv, */*;q=0.1"), timeout=30
    )
    assert resp.headers["Content-Type"].startswith("text/csv")


def test_a_bad_token_is_a_json_400_not_a_broken_stream(url: str) -> None:
    for path in ("/api/v1/objects", "/api/v1/groups"):
        resp = requests.get(
            url + path,
            params={"continue": "not-a-token"},
            headers=headers("admin-0", "text/csv"),
            timeout=30,
        )
        assert resp.status_code == 400 and resp.json()["error"] == "invalid_parameter", path


def test_past_the_row_limit_the_export_is_refused_before_the_first_byte(
    settings: Settings,
) -> None:
    rows = len(json_walk_app(settings, "admin-0"))
    assert rows > 3
    for limit, status in ((rows, 200), (rows - 1, 422)):
        app = create_app(Settings(**{**settings.__dict__, "export_max_rows": limit}))
        with serve(app) as host:
            resp = requests.get(
                f"http://{host}/api/v1/objects", headers=headers("admin-0", "text/csv"), timeout=30
            )
        assert resp.status_code == status, (limit, resp.text[:200])
        if status == 422:
            body = resp.json()
            assert body["error"] == "export_too_large"
            assert str(rows) in body["message"] and "FLEETSCOPE_EXPORT_MAX_ROWS" in body["message"]
        else:
            assert len(resp.content.decode().splitlines()) == rows + 1


def json_walk_app(settings: Settings, user: str) -> list[dict[str, Any]]:
    with serve(create_app(settings)) as host:
        return json_walk(f"http://{host}", user, "/api/v1/objects")
