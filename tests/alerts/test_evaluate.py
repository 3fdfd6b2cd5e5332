"""Alert evaluation over a real Redis index with plain calls: `for` from the row's transition
time or first observation, resolution, `minClusters`, templates, incremental reads (a count
guard on Redis commands), rules changes and a refused rules file keeping the previous rules."""

from __future__ import annotations

import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from common.alerts import evaluate
from common.index import keys, rows
from common.index.read import reader
from common.index.write import store_events
from tests.support.alert_index import Harness, put, row, rules_file
from tests.support.costs import commands

RULES = """
rules:
  - name: KustomizationFailing
    match: {kind: Kustomization, status: unhealthy}
    for: 10m
    severity: critical
    labels: {team: "{{ .namespace }}"}
    annotations:
      summary: "{{ .kind }} {{ .namespace }}/{{ .name }} on {{ .cluster }}: {{ .message }}"
  - name: HelmReleaseFailingWidely
    match: {kind: HelmRelease, status: [unhealthy]}
    minClusters: 2
    annotations: {summary: "{{ .name }} fails on {{ .clusters }} clusters: {{ .clusterNames }}"}
"""


@pytest.fixture
def rb(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_a_rule_fires_only_after_for_and_resolves(rb: redis.Redis, tmp_path: Path) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "unhealthy", "boom"))
    t0 = time.time()
    h.run(t0)
    assert h.firing() == {}
    h.run(t0 + 599)
    assert h.firing() == {}
    out = h.run(t0 + 600)
    assert out.fired == 1 and out.changed == 0 and out.due == 1  # no cluster re-read
    (alert,) = h.firing().values()
    assert alert["labels"] == {
        "alertname": "KustomizationFailing",
        "severity": "critical",
        "cluster": "c1",
        "namespace": "team-a",
        "kind": "Kustomization",
        "name": "apps",
        "team": "team-a",
    }
    assert alert["annotations"]["summary"] == "Kustomization team-a/apps on c1: boom"
    assert alert["generatorURL"] == (
        "http://fs.example/?cluster=c1&namespace=team-a&kind=Kustomization&name=apps"
    )
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "healthy"))
    out = h.run(t0 + 700)
    assert out.resolved == 1 and h.firing() == {}
    (gone,) = h.resolved().values()
    assert gone["endsAt"] and gone["labels"]["name"] == "apps"


def test_for_counts_from_the_last_transition(rb: redis.Redis, tmp_path: Path) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "team-a", "Kustomization", "old", "unhealthy", ago_s=3600))
    put(rb, "c2", row("c2", "team-a", "Kustomization", "new", "unhealthy", ago_s=60))
    h.run()
    assert [a["name"] for a in h.firing().values()] == ["old"]


def test_min_clusters_counts_clusters(rb: redis.Redis, tmp_path: Path) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "apps", "HelmRelease", "podinfo", "unhealthy"))
    put(rb, "c2", row("c2", "apps", "HelmRelease", "podinfo", "healthy"))
    put(rb, "c3", row("c3", "apps", "HelmRelease", "other", "unhealthy"))
    h.run()
    assert h.firing() == {}  # one cluster each: below minClusters
    put(rb, "c2", row("c2", "apps", "HelmRelease", "podinfo", "unhealthy"))
    h.run()
    (alert,) = h.firing().values()
    assert alert["clusters"] == ["c1", "c2"] and "cluster" not in alert["labels"]
    assert alert["annotations"]["summary"] == "podinfo fails on 2 clusters: c1,c2"
    assert alert["generatorURL"].endswith(
        "/?namespace=apps&kind=HelmRelease&name=podinfo&group=object"
    )
    put(rb, "c3", row("c3", "apps", "HelmRelease", "podinfo", "unhealthy"))
    h.run()
    (alert,) = h.firing().values()
    assert alert["clusters"] == ["c1", "c2", "c3"]
    put(rb, "c1")
    put(rb, "c2")
    h.run()
    assert h.firing() == {} and len(h.resolved()) == 1


@pytest.mark.standalone_only
def test_evaluation_reads_only_changed_clusters(rb: redis.Redis, tmp_path: Path) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    for c in range(20):
        put(
            rb,
            f"c{c}",
            *(row(f"c{c}", "team-a", "Kustomization", f"k{i}", "unhealthy") for i in range(20)),
        )
    h.run()
    rb.config_resetstat()
    out = h.run()
    idle = commands(rb)
    assert out.changed == 0
    assert sum(idle.values()) <= 12, idle  # no cluster read: generations, state, one write
    assert "evalsha" not in idle and "zrangebylex" not in idle
    put(rb, "c7", row("c7", "team-a", "Kustomization", "k0", "unhealthy"))
    rb.config_resetstat()
    out = h.run()
    one = commands(rb)
    assert out.changed == 1
    assert sum(one.values()) <= 30, one  # one cluster's reads on top, whatever the fleet size


def test_a_changed_rules_file_re_reads_everything(rb: redis.Redis, tmp_path: Path) -> None:
    path = rules_file(tmp_path, RULES)
    h = Harness(rb, path)
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "unhealthy", ago_s=3600))
    h.run()
    assert len(h.firing()) == 1
    path.write_text(RULES.replace("KustomizationFailing", "KsDown"))
    out = h.run()
    assert out.changed == 1 and out.resolved == 1
    assert [a["rule"] for a in h.firing().values()] == ["KsDown"]


def test_a_bad_rules_file_keeps_the_previous_rules(rb: redis.Redis, tmp_path: Path) -> None:
    path = rules_file(tmp_path, RULES)
    h = Harness(rb, path)
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "unhealthy", ago_s=3600))
    h.run()
    path.write_text(RULES.replace("status: unhealthy", "status: broken"))
    h.run()
    assert [a["rule"] for a in h.firing().values()] == ["KustomizationFailing"]
    error = rb.hget(keys.ALERT_META, "error").decode()
    assert "rules[0] (KustomizationFailing): match.status: unknown status 'broken'" in error
    # A restarted evaluator facing the bad file runs the last good rules from Redis.
    again = Harness(rb, path)
    put(rb, "c1", row("c1", "team-a", "Kustomization", "apps", "healthy"))
    assert again.run().resolved == 1
    path.write_text(RULES)
    again.run()
    assert rb.hget(keys.ALERT_META, "error") is None


def flip(rb: redis.Redis, cluster: str, name: str, times: int) -> None:
    """`times` status transitions of one Kustomization, through the watcher's writer."""
    for i in range(times):
        status = "unhealthy" if i % 2 == 0 else "healthy"
        member = rows.encode(row(cluster, "team-a", "Kustomization", name, status))
        store_events.apply_changes(rb, cluster, [store_events.Change.of(member)])


def test_a_flapping_rule_fires_and_resolves_as_transitions_age_out(
    rb: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = Harness(
        rb, rules_file(tmp_path, "rules:\n  - name: Flapping\n    match: {flapping: true}\n")
    )
    for c in ("c1", "c2", "c3"):
        put(rb, c, *(row(c, "team-a", "Kustomization", f"k{i}") for i in range(5)))
    flip(rb, "c1", "k0", 4)  # the default threshold: 4 transitions in 24 h
    flip(rb, "c2", "k1", 3)  # one short
    out = h.run()
    assert [a["labels"]["cluster"] for a in h.firing().values()] == ["c1"]
    out = h.run()  # nothing written: only the cluster holding flapping rows is read again
    assert out.changed == 1 and len(h.firing()) == 1
    later = time.time() + 86400 + 60  # a day on, nothing written: k0 stops flapping
    monkeypatch.setattr(
        reader, "time", types.SimpleNamespace(time=lambda: later, monotonic=time.monotonic)
    )
    out = h.run(later)
    assert out.resolved == 1 and h.firing() == {}


def test_a_big_read_is_spread_over_evaluations_and_every_cluster_gets_its_turn(
    rb: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CPU budget, made tiny: each evaluation reads one chunk of clusters and leaves the
    rest to the next, which starts where it stopped; alerts then match a full read's."""
    h = Harness(rb, rules_file(tmp_path, RULES))
    names = [f"c{c:02d}" for c in range(12)]
    for c in names:
        put(rb, c, row(c, "team-a", "Kustomization", "apps", "unhealthy", ago_s=3600))
    monkeypatch.setattr(evaluate, "CPU_BUDGET_S", -1.0)  # past the budget after one chunk
    outs = [h.run() for _ in range(3)]
    assert [(o.changed, o.deferred) for o in outs] == [(5, 7), (5, 2), (2, 0)]
    assert sorted(a["labels"]["cluster"] for a in h.firing().values()) == names
    assert h.run().changed == 0  # everything read: nothing left
    # A fleet written faster than one budget reads is still read in turn, not from the start.
    for c in names:
        put(rb, c, row(c, "team-a", "Kustomization", "apps", "unhealthy", "again", ago_s=3600))
    first = h.run()
    put(
        rb, names[0], row(names[0], "team-a", "Kustomization", "apps", "unhealthy", "x", ago_s=3600)
    )
    second = h.run()
    assert (first.changed, second.changed) == (5, 5)
    assert rb.hget(keys.ALERT_GENS, "#next") == names[10].encode()  # c00 waits for its turn


def test_a_label_selector_narrows_a_rule(rb: redis.Redis, tmp_path: Path) -> None:
    doc = """
rules:
  - name: ShopFailing
    match: {status: unhealthy, labelSelector: "app.kubernetes.io/part-of=shop,tier notin (test)"}
"""
    h = Harness(rb, rules_file(tmp_path, doc))
    shop, test_tier, other, bare = (
        row("c1", "team-a", "Kustomization", n, "unhealthy", "boom") for n in "abcd"
    )
    shop["labels"] = {"app.kubernetes.io/part-of": "shop", "tier": "web"}
    test_tier["labels"] = {"app.kubernetes.io/part-of": "shop", "tier": "test"}
    other["labels"] = {"app.kubernetes.io/part-of": "blog"}
    put(rb, "c1", shop, test_tier, other, bare)
    h.run(time.time())
    assert sorted(a["labels"]["name"] for a in h.firing().values()) == ["a"]
    shop_b = dict(other, labels={"app.kubernetes.io/part-of": "shop"})  # relabelled: now shop
    put(rb, "c1", shop, test_tier, shop_b, bare)  # type: ignore[arg-type]
    h.run(time.time() + 1)
    assert sorted(a["labels"]["name"] for a in h.firing().values()) == ["a", "c"]
