"""labelSelector end to end: a kubesim fleet (with the recommended labels) collected by the
real collector, then lists, sorted lists, groups and facets walked over HTTP for the demo users
and compared with a reference: kubesim's own label matching, asked over HTTP with the real
kubernetes client (`labelSelector` on each leaf's list), narrowed to what the generated RBAC
(kubesim.gen.users) lets each user list. Also `namespaces` and `labelKeys` facets against an oracle
built from the user's own rows, and the 400 a malformed selector gets."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig

from common import labels
from common.index.read.facets import LABEL_VALUES_TOP
from common.kinds.registry import builtin_registry
from kubesim.gen.fleet import generate_fleet
from kubesim.gen.users import ALL, FleetUser, fleet_users
from kubesim.server import KubeSim
from tests.support import sims
from tests.support.http import make_app

REG = builtin_registry()
FLEET = generate_fleet(clusters=3, namespaces=8, seed=5, teams=3)
USERS = {u.name: u for u in fleet_users(FLEET)}
# Every demo user with at most one group: the Flask test client joins repeated X-Remote-Group
# headers into one value (one group name); the kiali service account has two.
CHOSEN = tuple(u.name for u in fleet_users(FLEET) if len(u.groups) <= 1)
SELECTORS = (
    "app.kubernetes.io/component=mesh",
    "app.kubernetes.io/component==gitops,fleetscope.io/team=team-01",
    "app.kubernetes.io/component!=gitops",
    "app.kubernetes.io/managed-by in (Helm,kubectl)",
    "app.kubernetes.io/version notin (1.0.0,1.1.1)",
    "kustomize.toolkit.fluxcd.io/name",
    "!kustomize.toolkit.fluxcd.io/name",
    "helm.toolkit.fluxcd.io/name,!app.kubernetes.io/name",
    "app.kubernetes.io/name=web,app.kubernetes.io/component in (gitops, mesh)",
    "nosuch!=x",
    "nosuch notin (x)",
    "nosuch in (x)",
)
Ident = tuple[str, str, str, str]


@pytest.fixture
def world(tmp_path: Path, redis_url: str) -> Iterator[dict[str, Any]]:
    tmp = tmp_path
    for sim in sims.running(FLEET, tmp):
        settings = sims.settings_for(tmp, redis_url)
        sims.collect(settings)
        yield {"sim": sim, "client": make_app(settings).test_client(), "dir": tmp / "clusters"}


def reference(world: dict[str, Any], selector: str) -> list[Ident]:
    """Every object of the registry's kinds matching `selector`, as each leaf lists it."""
    sim: KubeSim = world["sim"]
    out: list[Ident] = []
    for c in sim.clusters:
        api = kclient.CustomObjectsApi(
            kconfig.new_client_from_config(config_file=str(world["dir"] / f"{c}.yaml"))
        )
        for kind in REG:
            res = sim.resource(kind.resource)
            got = api.list_cluster_custom_object(
                res.group, res.version, res.plural, label_selector=selector
            )
            for obj in got["items"]:
                meta = obj["metadata"]
                out.append((c, meta.get("namespace", ""), kind.key, meta["name"]))
        api.api_client.close()
    return out


def allowed(user: FleetUser, objects: list[Ident]) -> list[Ident]:
    return sorted(
        o for o in objects if user.namespaces(o[0]) == ALL or o[1] in user.namespaces(o[0])
    )


def headers(user: FleetUser) -> dict[str, str]:
    assert len(user.groups) <= 1
    return {
        "X-Remote-User": user.name,
        **({"X-Remote-Group": user.groups[0]} if user.groups else {}),
    }


def walk(client: Any, user: FleetUser, path: str, **query: Any) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    token = None
    while True:
        q = {"limit": 13, **query, **({"continue": token} if token else {})}
        resp = client.get(path, query_string=q, headers=headers(user))
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        got += body["items"]
        token = body["continue"]
        if token is None:
            return got


def ident(row: dict[str, Any]) -> Ident:
    return row["cluster"], row["namespace"], row["kind"], row["name"]


def test_lists_match_the_leaves_own_label_matching(world: dict[str, Any]) -> None:
    for selector in SELECTORS:
        check_selector(world, selector)


def check_selector(world: dict[str, Any], selector: str) -> None:
    objects = reference(world, selector)
    for name in CHOSEN:
        user = USERS[name]
        expected = allowed(user, objects)
        for sort in ("", "-lastTransitionTime"):
            query = {"labelSelector": selector, **({"sort": sort} if sort else {})}
            rows = walk(world["client"], user, "/api/v1/objects", **query)
            got = [ident(r) for r in rows]
            assert len(got) == len(set(got)), (name, selector, sort)
            assert sorted(got) == expected, (name, selector, sort)
        counts = world["client"].get(
            "/api/v1/facets", query_string={"labelSelector": selector}, headers=headers(user)
        )
        facets = counts.get_json()
        assert facets["total"] == len(expected), (name, selector)
        assert facets["clusters"] == dict(Counter(o[0] for o in expected))
        assert facets["namespaces"] == dict(Counter(o[1] or "_" for o in expected))
        groups = walk(world["client"], user, "/api/v1/groups", labelSelector=selector)
        by_object = Counter((o[1], o[2], o[3]) for o in expected)
        assert {(g["namespace"], g["kind"], g["name"]): g["total"] for g in groups} == dict(
            by_object
        ), (name, selector)
        for g in groups[:2]:  # one group's rows: the clusters where the selector holds
            path = f"/api/v1/groups/{g['namespace'] or '_'}/{g['kind']}/{g['name']}"
            one = world["client"].get(
                path, query_string={"labelSelector": selector}, headers=headers(user)
            )
            items = one.get_json()["items"]
            assert len(items) == g["total"], (name, selector, path)
            assert all(labels.parse(selector).matches(r["labels"]) for r in items)
    if selector == SELECTORS[0]:
        assert allowed(USERS["dev-team-00"], objects), "the selector should match something"


def test_the_fleet_carries_the_recommended_labels(world: dict[str, Any]) -> None:
    rows = walk(world["client"], USERS["admin-0"], "/api/v1/objects", kind="HelmRelease")
    assert rows
    labelled = [r for r in rows if "app.kubernetes.io/name" in r["labels"]]
    assert labelled
    for key in ("instance", "version", "component", "part-of", "managed-by"):
        assert all(f"app.kubernetes.io/{key}" in r["labels"] for r in labelled), key
    assert all(r["labels"]["app.kubernetes.io/name"] == r["name"] for r in labelled)
    assert any("fleetscope.io/team" in r["labels"] for r in labelled)


@pytest.mark.parametrize("who", ["admin-0", "dev-team-00"])
def test_namespace_and_label_value_facets_equal_the_users_rows(
    world: dict[str, Any], who: str
) -> None:
    user = USERS[who]
    keys = ("app.kubernetes.io/version", "app.kubernetes.io/instance", "nosuch")
    cut = False
    for query in ({}, {"status": "healthy"}, {"kind": "HelmRelease,VirtualService"}):
        rows = walk(world["client"], user, "/api/v1/objects", **query)
        assert rows
        resp = world["client"].get(
            "/api/v1/facets",
            query_string={**query, "labelKeys": ",".join(keys)},
            headers=headers(user),
        )
        facets = resp.get_json()
        assert facets["total"] == len(rows)
        assert facets["namespaces"] == dict(Counter(r["namespace"] or "_" for r in rows))
        plain = world["client"].get("/api/v1/facets", query_string=query, headers=headers(user))
        assert plain.get_json()["namespaces"] == facets["namespaces"]  # from the counts
        for k in keys:
            values = Counter(r["labels"][k] for r in rows if k in r["labels"])
            ranked = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
            assert facets["labels"][k] == dict(ranked[:LABEL_VALUES_TOP]), k
            rest = ranked[LABEL_VALUES_TOP:]
            if rest:
                assert facets["labelsOmitted"][k] == {
                    "values": len(rest),
                    "rows": sum(n for _v, n in rest),
                }
            else:
                assert k not in facets["labelsOmitted"]
            cut = cut or bool(rest)
    assert cut or who != "admin-0", "the top-N cut should be exercised"


MALFORMED = [
    ("a in (x", "unable to parse requirement: found '', expected: ',' or ')' (at position 7)"),
    ("a,", "found '', expected: identifier after ',' (at position 2)"),
    ("a=b c", "found 'c', expected: ',' or 'end of string' (at position 4)"),
]


def test_a_malformed_selector_is_a_400_naming_the_problem(world: dict[str, Any]) -> None:
    for (selector, message), path in itertools.product(
        MALFORMED, ("/api/v1/objects", "/api/v1/groups", "/api/v1/facets", "/api/v1/groups/x")
    ):
        resp = world["client"].get(
            path, query_string={"labelSelector": selector}, headers=headers(USERS["admin-0"])
        )
        assert resp.status_code == 400
        assert resp.get_json() == {
            "error": "invalid_parameter",
            "message": f"labelSelector: {message}",
        }


def test_label_facets_bodies_follow_the_keys_asked(world: dict[str, Any]) -> None:
    """The rendered body is kept per answer and keys asked: asking other keys of the same
    (remembered) answer does not get the first keys' body."""
    user = USERS["admin-0"]

    def ask(k: str) -> dict[str, Any]:
        got = (
            world["client"]
            .get("/api/v1/facets", query_string={"labelKeys": k}, headers=headers(user))
            .get_json()
        )
        got.pop("freshness")
        return dict(got)

    version, instance = "app.kubernetes.io/version", "app.kubernetes.io/instance"
    a, b, again = ask(version), ask(instance), ask(version)
    assert set(a["labels"]) == {version} and set(b["labels"]) == {instance}
    assert again == a and a["labels"] != b["labels"]
