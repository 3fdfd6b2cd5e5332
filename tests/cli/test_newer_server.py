"""Against a server whose OpenAPI document offers what today's API does not yet (a `suspended`
filter, `sort`, `/api/v1/groups`, relations, `blockedBy` rows, namespace facets), the client
uses them: the requests it sends and what it prints. The document is the real one, extended."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from tests.cli.tables import parse_table
from tests.support.cli import Stack
from tests.support.fakeapi import FakeApi

ROWS = [
    {
        "cluster": "c1",
        "namespace": "apps",
        "kind": "Kustomization",
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "name": "web",
        "status": "healthy",
        "suspended": True,
        "reason": "",
        "message": "Applied",
        "lastTransitionTime": "2020-01-01T00:00:00Z",
        "revision": "main@1",
        "uiUrl": None,
        "blockedBy": None,
    },
    {
        "cluster": "c1",
        "namespace": "apps",
        "kind": "HelmRelease",
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "name": "db",
        "status": "unhealthy",
        "suspended": False,
        "reason": "",
        "message": "dependency 'apps/web' is not ready",
        "lastTransitionTime": None,
        "revision": "",
        "uiUrl": None,
        "blockedBy": {"cluster": "c1", "namespace": "apps", "kind": "Kustomization", "name": "web"},
    },
]
GROUPS = [
    {
        "namespace": "apps",
        "kind": "Kustomization",
        "name": "web",
        "total": 3,
        "statuses": {"healthy": 2, "unhealthy": 1, "progressing": 0},
    },
]
RELATIONS = {
    "upstream": [
        {
            "relation": "source",
            "cluster": "c1",
            "namespace": "flux-system",
            "kind": "GitRepository",
            "name": "repo",
            "exists": True,
            "status": "healthy",
            "depth": 1,
        }
    ],
    "downstream": [],
    "hidden": 2,
}
DETAIL = {"cluster": "c1", "object": {"kind": "Kustomization", "metadata": {"name": "web"}}}


def newer(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    paths = doc["paths"]
    objects = paths["/api/v1/objects"]["get"]["parameters"]
    objects += [
        {"name": "suspended", "in": "query", "schema": {"type": "boolean"}},
        {
            "name": "sort",
            "in": "query",
            "schema": {"type": "string", "enum": ["lastTransitionTime", "-lastTransitionTime"]},
        },
    ]
    paths["/api/v1/groups"] = {"get": {"parameters": objects, "responses": {}}}
    detail = "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}"
    depth = {"name": "depth", "in": "query", "schema": {"type": "integer"}}
    paths[detail + "/relations"] = {"get": {"parameters": [depth], "responses": {}}}
    doc["components"]["schemas"]["Row"]["properties"]["blockedBy"] = {"type": "object"}
    doc["components"]["schemas"]["Facets"]["properties"]["namespaces"] = {"type": "object"}
    return doc


@pytest.fixture(scope="module")
def api(stack: Stack) -> Iterator[FakeApi]:
    doc = requests.get(stack.base + "/api/v1/openapi.json", timeout=10).json()
    fake = FakeApi(
        {
            "/api/v1/openapi.json": (200, newer(doc)),
            "/api/v1/objects": (200, {"items": ROWS, "continue": None, "freshness": {}}),
            "/api/v1/groups": (200, {"items": GROUPS, "continue": None, "freshness": {}}),
            "/api/v1/objects/c1/apps/Kustomization/web": (200, DETAIL),
            "/api/v1/objects/c1/apps/Kustomization/web/relations": (200, RELATIONS),
            "/api/v1/facets": (
                200,
                {
                    "clusters": {"c1": 2},
                    "kinds": {},
                    "statuses": {},
                    "namespaces": {"apps": 2, "infra": 1},
                },
            ),
        }
    )
    yield fake
    fake.close()


def sent(api: FakeApi, path: str) -> dict[str, list[str]]:
    return next(q for p, q, _ in reversed(api.requests) if p == path)


def test_suspended_and_sort_use_the_new_parameters(api: FakeApi, cli) -> None:
    res = cli(
        "get",
        "--suspended",
        "--sort-by=-lastTransitionTime",
        "--status",
        "unhealthy",
        "--server",
        api.url,
    )
    assert res.code == 0, res.err
    query = sent(api, "/api/v1/objects")
    assert query["suspended"] == ["true"] and query["status"] == ["unhealthy"]
    assert query["sort"] == ["-lastTransitionTime"]
    assert cli("get", "--no-suspended", "--server", api.url).code == 0
    assert sent(api, "/api/v1/objects")["suspended"] == ["false"]
    bad = cli("get", "--sort-by", "name", "--server", api.url)
    assert bad.code == 2 and "this server sorts by lastTransitionTime" in bad.err


def test_wide_shows_what_a_row_is_blocked_by(api: FakeApi, cli) -> None:
    res = cli("get", "-o", "wide", "--server", api.url)
    assert res.code == 0, res.err
    header, web, db = parse_table(res.out, 10)
    assert header[6:9] == ["REVISION", "APIVERSION", "BLOCKED-BY"]
    assert web[4] == "healthy,suspended" and web[8] == "<none>"
    assert db[8] == "c1/apps/Kustomization/web" and db[5] == "<unknown>"


def test_groups_table_and_yaml(api: FakeApi, cli) -> None:
    res = cli("groups", "ks", "--status", "unhealthy", "--server", api.url)
    assert res.code == 0, res.err
    assert sent(api, "/api/v1/groups")["kind"] == ["Kustomization"]
    assert [line.split() for line in res.out.splitlines()] == [
        ["NAMESPACE", "KIND", "NAME", "CLUSTERS", "STATUSES"],
        ["apps", "Kustomization", "web", "3", "healthy=2,unhealthy=1"],
    ]
    as_yaml = cli("groups", "-o", "yaml", "--server", api.url)
    assert yaml.safe_load(as_yaml.out)["items"] == GROUPS


def test_describe_adds_relations_as_yaml_comments(api: FakeApi, cli) -> None:
    res = cli("describe", "c1/apps/ks/web", "--depth", "2", "--server", api.url)
    assert res.code == 0, res.err
    assert yaml.safe_load(res.out) == DETAIL["object"]  # comments do not change the document
    assert sent(api, "/api/v1/objects/c1/apps/Kustomization/web/relations")["depth"] == ["2"]
    comments = [line for line in res.out.splitlines() if line.startswith("#")]
    assert comments[1] == "# Relations:"
    assert comments[2].split()[1:4] == ["DIRECTION", "RELATION", "CLUSTER"]
    assert comments[3].split()[1:6] == ["upstream", "source", "c1", "flux-system", "GitRepository"]
    assert comments[-1] == "#   and 2 related object(s) you may not list"


def test_namespace_completion_from_facets(api: FakeApi, cli) -> None:
    res = cli("__complete", "namespaces", "--server", api.url)
    assert (res.code, res.out) == (0, "apps\ninfra\n")
