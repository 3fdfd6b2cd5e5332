"""Generated fleets are consistent (issue 15): every reference names a generated object except
the ones annotated `kubesim.fleetscope.io/dangling`, managed-by labels name the real managing
Kustomization or HelmRelease, and failures propagate along Flux references with the reasons
and messages the Flux controllers write. Checked with `refs_check`, which reads the objects
alone (upstream API semantics), never kubesim's generator.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from kubesim.catalog import Catalog
from kubesim.gen.fleet import PRESETS, GeneratedFleet, generate_fleet
from kubesim.store import ClusterStore
from tests.kubesim.refs_check import (
    FLUX_GROUPS,
    HELM,
    KUSTOMIZE,
    SOURCE,
    Key,
    Obj,
    conditions,
    dangling,
    expected_failure,
    has_artifact,
    helm_chart_of,
    key,
    references,
)

BLOCKED = {"ArtifactFailed", "DependencyNotReady", "SourceNotReady", "SourceUnavailable",
           "NoSourceArtifact", "SourceManagerFailed"}  # fmt: skip
FLUX_KINDS = set(FLUX_GROUPS) | {"ImagePolicy", "ImageUpdateAutomation", "Alert", "Receiver"}


def load(fleet: GeneratedFleet, cluster: str) -> dict[Key, Obj]:
    store = ClusterStore(cluster, Catalog.default())
    fleet.load(cluster, store)
    objs = (json.loads(raw) for table in store.tables.values() for raw in table.items.values())
    return {key(o): o for o in objs}


@pytest.fixture(scope="module")
def demo() -> dict[str, dict[Key, Obj]]:
    clusters, namespaces = PRESETS["S"]  # what `fleetscope demo` serves (seed 1)
    fleet = generate_fleet(clusters, namespaces, seed=1)
    return {c: load(fleet, c) for c in fleet.cluster_names}


@pytest.fixture(scope="module")
def big() -> dict[Key, Obj]:
    """One cluster of fleet L's size (2,000 app namespaces)."""
    return load(generate_fleet(1, 2000, seed=3), "cluster-000")


def clusters(demo: dict[str, dict[Key, Obj]], big: dict[Key, Obj]) -> list[dict[Key, Obj]]:
    return [*demo.values(), big]


def flux(objs: dict[Key, Obj], kind: str) -> list[Obj]:
    return [o for k, o in objs.items() if k[1] == kind and k[0] == FLUX_GROUPS.get(kind, k[0])]


def ready(obj: Obj) -> Obj:
    return conditions(obj)["Ready"]


# -- references resolve -------------------------------------------------------------------


def test_every_reference_resolves_except_the_annotated_dangling_ones(
    demo: dict[str, dict[Key, Obj]], big: dict[Key, Obj]
) -> None:
    for objs in clusters(demo, big):
        for k, obj in objs.items():
            missing = {r.path for r in references(obj) if not r.resolves(objs)}
            assert missing == dangling(obj), (k, missing, dangling(obj))


def test_the_checker_sees_each_kind_of_reference(big: dict[Key, Obj]) -> None:
    """Guards the test above against a checker that reads nothing."""
    seen = Counter(
        (k[1], r.path if r.path.startswith("metadata") else r.path.split("[")[0])
        for k, o in big.items()
        for r in references(o)
    )
    for kind, path in [
        ("Kustomization", "spec.sourceRef"),
        ("Kustomization", "spec.dependsOn"),
        ("HelmRelease", "spec.chart.spec.sourceRef"),
        ("HelmRelease", "spec.chartRef"),
        ("HelmRelease", "spec.dependsOn"),
        ("HelmChart", "spec.sourceRef"),
        ("ImagePolicy", "spec.imageRepositoryRef"),
        ("ImageUpdateAutomation", "spec.sourceRef"),
        ("Alert", "spec.providerRef"),
        ("Receiver", "spec.resources"),
        ("VirtualService", "spec.gateways"),
        ("HTTPRoute", "spec.parentRefs"),
        ("HTTPRoute", "spec.rules"),
        ("Gateway", "spec.gatewayClassName"),
        ("AuthPolicy", "spec.targetRef"),
        ("VirtualService", f"metadata.labels[{HELM}]"),
        ("HelmChart", f"metadata.labels[{HELM}]"),
        ("AuthorizationPolicy", f"metadata.labels[{KUSTOMIZE}]"),
    ]:
        assert seen[(kind, path)], (kind, path)
    cross = [r for k, o in big.items() if k[1] == "Kustomization" for r in references(o)
             if r.path.startswith("spec.dependsOn") and r.target[2] != k[2]]  # fmt: skip
    assert cross  # a dependsOn into another namespace (flux-system/infrastructure)


def test_dangling_references_are_a_realistic_share(big: dict[Key, Obj]) -> None:
    by_path: Counter[str] = Counter()
    dangling_paths: Counter[str] = Counter()
    for k, obj in big.items():
        if k[1] not in FLUX_KINDS:
            continue
        for ref in references(obj):
            if not ref.path.startswith("metadata"):
                path = f"{k[1]}:{ref.path.split('[')[0]}"
                by_path[path] += 1
                dangling_paths[path] += ref.path in dangling(obj)
    share = sum(dangling_paths.values()) / sum(by_path.values())
    assert 0.005 < share < 0.03, share
    for path in ("Kustomization:spec.sourceRef", "Kustomization:spec.dependsOn",
                 "HelmRelease:spec.chart.spec.sourceRef", "HelmRelease:spec.dependsOn"):  # fmt: skip
        assert dangling_paths[path], path
    traffic = Counter(
        (k[1], path.split("[")[0]) for k, o in big.items() if k[1] not in FLUX_KINDS
        for path in dangling(o)
    )  # fmt: skip
    assert (
        traffic[("VirtualService", "spec.gateways")] and traffic[("AuthPolicy", "spec.targetRef")]
    )


def test_managed_by_labels_cover_most_app_objects(big: dict[Key, Obj]) -> None:
    rows = {(res.group, res.kind) for res in Catalog.default() if res.status_rule}
    app = [o for k, o in big.items() if k[2].startswith("app-") and k[:2] in rows]
    managed = [o for o in app if any(r.path.startswith("metadata") for r in references(o))]
    assert 0.85 < len(managed) / len(app) < 0.99
    helm = [o for o in app if f"{HELM}/name" in o["metadata"].get("labels", {})]
    assert {o["kind"] for o in helm} >= {"VirtualService", "HTTPRoute", "HelmChart"}
    for release in flux(big, "HelmRelease"):
        if "chart" in release["spec"]:  # helm-controller made and labelled the HelmChart
            chart = big[helm_chart_of(release)]
            labels = chart["metadata"]["labels"]
            assert (labels[f"{HELM}/name"], labels[f"{HELM}/namespace"]) == key(release)[3:1:-1]
            assert release["status"]["helmChart"] == f"{key(chart)[2]}/{key(chart)[3]}"


# -- failures propagate ------------------------------------------------------------------


def test_flux_objects_fail_as_their_controllers_write_it(
    demo: dict[str, dict[Key, Obj]], big: dict[Key, Obj]
) -> None:
    blocked: Counter[tuple[str, str]] = Counter()
    for objs in clusters(demo, big):
        for k, obj in objs.items():
            if k[0] not in (SOURCE, KUSTOMIZE, HELM) and k[1] not in FLUX_KINDS:
                continue
            if k[1] in ("Alert", "Provider") or obj["spec"].get("suspend"):
                continue  # no status; a suspended object keeps its last one
            want = expected_failure(obj, objs)
            got = ready(obj)
            if want is None:
                assert got["reason"] not in BLOCKED, (k, got)
                continue
            assert (got["status"], got["reason"], got["message"]) == ("False", *want), k
            blocked[(k[1], want[0])] += 1
    assert set(blocked) >= {
        ("Kustomization", "ArtifactFailed"),
        ("Kustomization", "DependencyNotReady"),
        ("HelmRelease", "SourceNotReady"),
        ("HelmRelease", "DependencyNotReady"),
        ("HelmChart", "NoSourceArtifact"),
        ("HelmChart", "SourceUnavailable"),
    }, blocked


def test_every_user_of_a_failing_source_fails(big: dict[Key, Obj]) -> None:
    sources = {k for k, o in big.items() if k[0] == SOURCE and ready(o)["status"] == "False"}
    assert sources
    users = 0
    for k, obj in big.items():
        if k[1] not in ("Kustomization", "HelmChart", "HelmRelease"):
            continue
        upstream = helm_chart_of(obj) if k[1] == "HelmRelease" else None
        names = {r.target for r in references(obj) if r.path == "spec.sourceRef"} | {upstream}
        if names & sources and not obj["spec"].get("suspend"):
            users += 1
            assert ready(obj)["status"] == "False", k
    assert users
    assert not any(has_artifact(big[k]) for k in sources)  # why its users cannot fall back


def test_failing_flux_objects_stay_a_small_share(big: dict[Key, Obj]) -> None:
    objs = [o for k, o in big.items() if k[0].endswith("toolkit.fluxcd.io") and "status" in o]
    failing = [o for o in objs if conditions(o).get("Ready", {}).get("status") == "False"]
    assert 0.01 < len(failing) / len(objs) < 0.05, len(failing) / len(objs)


def test_every_propagation_story_in_every_demo_cluster(demo: dict[str, dict[Key, Obj]]) -> None:
    for cluster, objs in demo.items():
        kustomizations = {key(o): o for o in flux(objs, "Kustomization")}
        reasons = {k: ready(o)["reason"] for k, o in kustomizations.items()}
        # a failing GitRepository, its Kustomizations and, through a HelmChart, a HelmRelease
        failing = {
            k for k, o in objs.items() if k[1] == "GitRepository" and ready(o)["status"] == "False"
        }
        users = Counter(
            r.target for o in kustomizations.values() for r in references(o)
            if r.path == "spec.sourceRef" and r.target in failing and reasons[key(o)] == "ArtifactFailed"
        )  # fmt: skip
        assert max(users.values(), default=0) >= 2, cluster
        charts = {
            key(o) for o in flux(objs, "HelmChart") if ready(o)["reason"] == "NoSourceArtifact"
        }
        releases = [o for o in flux(objs, "HelmRelease") if ready(o)["reason"] == "SourceNotReady"]
        assert any(helm_chart_of(o) in charts for o in releases), cluster
        # a sourceRef that names no object
        assert any("spec.sourceRef" in dangling(o) for o in kustomizations.values()), cluster
        # a chain c -> b -> a failing at its root, and a cycle
        depends = {k: [r.target for r in references(o) if r.path.startswith("spec.dependsOn")]
                   for k, o in kustomizations.items()}  # fmt: skip
        chains = [
            (c, b, a) for c, bs in depends.items() for b in bs for a in depends.get(b, [])
            if reasons[c] == reasons[b] == "DependencyNotReady" and a in reasons
            and reasons[a] not in BLOCKED and ready(kustomizations[a])["status"] == "False"
        ]  # fmt: skip
        cycles = [(a, b) for a, bs in depends.items() for b in bs if a in depends.get(b, [])]
        assert chains and cycles, cluster
        assert all(reasons[a] == "DependencyNotReady" for pair in cycles for a in pair)


# -- determinism and cost ------------------------------------------------------------------


def test_a_cluster_is_the_same_whatever_was_generated_before() -> None:
    """Templates are shared across clusters: the order of generation must not matter."""
    first = generate_fleet(2, 60, seed=4)
    load(first, "cluster-000")
    after = load(first, "cluster-001")
    alone = load(generate_fleet(2, 60, seed=4), "cluster-001")
    assert after == alone
    other = load(generate_fleet(2, 60, seed=5), "cluster-001")
    assert {k for k, o in other.items() if dangling(o)} != {
        k for k, o in alone.items() if dangling(o)
    }


def test_rows_per_namespace_stay_as_before(big: dict[Key, Obj]) -> None:
    """Fleet L stays ~1.5 M rows: consistency must not add many objects."""
    rows = {(res.group, res.kind) for res in Catalog.default() if res.status_rule}
    count = sum(1 for k in big if k[:2] in rows)
    assert 3.7 < count / 2000 < 4.0, count / 2000
