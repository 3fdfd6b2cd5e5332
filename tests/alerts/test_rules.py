"""The rules file: the shipped example parses; every mistake is refused with the rule (position
and name) and the field named; durations read as Prometheus writes them; `flapping` is refused
until the per-object history exists; templates substitute fields and nothing else."""

from __future__ import annotations

import pytest

from common.alerts import rules, template
from common.kinds.registry import builtin_registry
from tests.support.paths import REPO

REG = builtin_registry()
EXAMPLE = REPO / "k8s" / "examples" / "alerts" / "rules.yaml"


def test_the_shipped_example_parses() -> None:
    got = rules.parse(EXAMPLE.read_text(), REG)
    assert len(got.rules) >= 3
    wide = got.get("FluxHelmReleaseFailingFleetWide")
    assert wide is not None and wide.min_clusters == 3 and wide.for_s == 600


def test_a_rule_reads_into_filters() -> None:
    doc = """
rules:
  - name: R
    match: {cluster: [a, b], namespace: _, kind: HelmRelease, status: unhealthy,
            suspended: false, name: Pod, labelSelector: "team in (a, b),!canary"}
    for: 1h30m
    severity: critical
"""
    (r,) = rules.parse(doc, REG).rules
    f = r.filters
    assert (f.clusters, f.namespaces, f.kinds, f.statuses) == (
        ("a", "b"),
        ("",),
        ("HelmRelease",),
        ("unhealthy",),
    )
    assert (f.suspended, f.name, r.for_s, r.min_clusters, r.severity) == (
        False,
        "pod",
        5400.0,
        0,
        "critical",
    )
    assert f.labels.canonical() == "!canary,team in (a,b)"


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ("rules: {}", "a mapping with one key, `rules:`"),
        ("other: []", "a mapping with one key, `rules:`"),
        ("rules: [", "not YAML"),
        ("rules:\n  - match: {}\n", "rules[0]: name: required"),
        ("rules:\n  - name: A\n  - name: A\n", "rules[1] (A): name: A is used by an earlier rule"),
        ("rules:\n  - name: A\n    expr: up\n", "rules[0] (A): expr: unknown field"),
        (
            "rules:\n  - name: A\n    match: {kind: Nope}\n",
            "rules[0] (A): match.kind: unknown kind",
        ),
        ("rules:\n  - name: A\n    match: {status: bad}\n", "match.status: unknown status 'bad'"),
        ("rules:\n  - name: A\n    match: {namespace: Bad_NS}\n", "match.namespace: 'Bad_NS'"),
        ("rules:\n  - name: A\n    match: {suspended: maybe}\n", "match.suspended: true or false"),
        ("rules:\n  - name: A\n    match: {labels: x}\n", "match.labels: unknown filter"),
        (
            "rules:\n  - name: A\n    match: {labelSelector: 'a in (x'}\n",
            "rules[0] (A): match.labelSelector: unable to parse requirement: found '', "
            "expected: ',' or ')' (at position 7)",
        ),
        ("rules:\n  - name: A\n    match: {labelSelector: [a]}\n", "match.labelSelector: a string"),
        ("rules:\n  - name: A\n    for: soon\n", "rules[0] (A): for: 'soon' is not a duration"),
        ("rules:\n  - name: A\n    minClusters: 0\n", "minClusters: an integer >= 1"),
        ("rules:\n  - name: A\n    severity: 'a b'\n", "severity: a word"),
        ("rules:\n  - name: A\n    labels: {'bad-name': x}\n", "labels.bad-name: a label name"),
        (
            "rules:\n  - name: A\n    annotations: {s: '{{ .secret }}'}\n",
            "annotations.s: unknown field .secret",
        ),
    ],
)
def test_mistakes_name_the_rule_and_field(doc: str, said: str) -> None:
    with pytest.raises(rules.RuleError) as e:
        rules.parse(doc, REG, "rules.yaml")
    assert said in str(e.value) and str(e.value).startswith("rules.yaml: ")


def test_flapping_is_the_threshold_of_the_settings() -> None:
    doc = "rules:\n  - name: F\n    match: {flapping: true}\n"
    (rule,) = rules.parse(doc, REG, flapping_threshold=6).rules
    assert rule.filters.flapping == 6
    assert rules.parse(doc, REG).digest != rules.parse(doc, REG, flapping_threshold=6).digest
    for bad in ("false", "'true'", "4"):
        with pytest.raises(rules.RuleError, match=r"rules\[0\] \(F\): match.flapping: true"):
            rules.parse(f"rules:\n  - name: F\n    match: {{flapping: {bad}}}\n", REG)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("15m", 900), ("1h30m", 5400), ("2d", 172800), (90, 90)]
)
def test_durations(text: object, seconds: float) -> None:
    assert rules.parse_duration(text) == seconds


def test_templates_substitute_fields_once() -> None:
    t = template.parse("{{ .kind }} {{.namespace}}/{{- .name -}}: {{ .message }}")
    values = {"kind": "K", "namespace": "ns", "name": "n", "message": "{{ .kind }}\nnext"}
    assert t.render(values) == "K ns/n: {{ .kind }}\nnext"
    assert t.render(values, label=True) == "K ns/n: {{ .kind }} next"
    assert template.parse("no fields").render({}) == "no fields"
