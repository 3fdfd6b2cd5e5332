"""Attacks on fleet alerts: a leaf controls a row's message and reason, so text with template
syntax, newlines, label-like text or terminal escapes must come out as inert text, in one label
value, never as another label or an evaluated template; a rules file cannot ask templates to
run anything or to overwrite the identity labels; Alertmanager credentials never appear in
what fleetscope logs or stores."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from common.alerts import deliver, rules, template
from common.index import keys
from common.kinds.registry import builtin_registry
from common.settings import Settings
from tests.support.alert_index import Harness, put, row, rules_file
from tests.support.alertmanager import Alertmanager

RULES = """
rules:
  - name: Failing
    match: {kind: Kustomization, status: unhealthy}
    labels: {why: "{{ .reason }}", said: "{{ .message }}"}
    annotations: {summary: "{{ .name }}: {{ .message }}"}
"""
EVIL = (
    '{{ .cluster }}{{ template "x" }}{{ printf "%s" 1 }}\nalertname="Other"\r\n'
    'severity: none\x1b[2J\x1b]0;owned\x07"},{"labels":{"alertname":"Injected"}}'
)


@pytest.fixture
def rb(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_leaf_text_cannot_inject_labels_or_run_templates(
    rb: redis.Redis, redis_url: str, tmp_path: Path, alertmanager: Alertmanager
) -> None:
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "ns", "Kustomization", "app", "unhealthy", EVIL, "{{ .name }}", 60))
    h.run()
    (alert,) = h.firing().values()
    labels = alert["labels"]
    assert set(labels) == {
        "alertname",
        "severity",
        "cluster",
        "namespace",
        "kind",
        "name",
        "why",
        "said",
    }
    assert labels["alertname"] == "Failing" and labels["severity"] == "warning"
    assert labels["why"] == "{{ .name }}"  # inserted as text, not evaluated
    said = labels["said"]
    assert "{{ .cluster }}" in said and "c1{{" not in said
    assert not any(ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F for ch in said)  # one line, no escapes
    summary = alert["annotations"]["summary"]
    assert "\x1b" not in summary and "\x07" not in summary and "\n" in summary

    deliver.deliver(rb, Settings(redis_url=redis_url, alertmanager_url=(alertmanager.url,)))
    (got,) = alertmanager.alerts()
    assert got["labels"] == labels  # one alert, exactly these labels: nothing injected


@pytest.mark.parametrize(
    "text",
    [
        '{{ printf "%s" .message }}',
        "{{ .message | html }}",
        '{{ template "x" }}',
        "{{ $labels.cluster }}",
        "{{ if .message }}x{{ end }}",
        "{{ .Secret }}",
        "{{ .message",
        "{{ call .x }}",
    ],
)
def test_templates_refuse_anything_but_field_substitution(text: str) -> None:
    with pytest.raises(template.TemplateError):
        template.parse(text)
    doc = f"rules:\n  - name: R\n    annotations: {{summary: {json.dumps(text)}}}\n"
    with pytest.raises(rules.RuleError, match=r"rules\[0\] \(R\): annotations\.summary: "):
        rules.parse(doc, builtin_registry())


@pytest.mark.parametrize("label", ["alertname", "cluster", "namespace", "kind", "name", "severity"])
def test_rules_cannot_overwrite_identity_labels(label: str) -> None:
    doc = f'rules:\n  - name: R\n    labels: {{{label}: "x"}}\n'
    with pytest.raises(rules.RuleError, match=f"labels.{label}: set by fleetscope"):
        rules.parse(doc, builtin_registry())


def test_alertmanager_credentials_stay_out_of_logs_and_state(
    rb: redis.Redis, redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = tmp_path / "token"
    token.write_text("TOKEN-SECRET-42")
    h = Harness(rb, rules_file(tmp_path, RULES))
    put(rb, "c1", row("c1", "ns", "Kustomization", "app", "unhealthy", "m", "r", 60))
    h.run()
    s = Settings(
        redis_url=redis_url,
        alertmanager_url=("http://u:PASS-SECRET@127.0.0.1:9",),  # nothing listens on 9
        alertmanager_bearer_token_file=str(token),
        alertmanager_timeout_s=1,
    )
    with caplog.at_level(logging.DEBUG):
        got = deliver.deliver(rb, s)
    assert got.failed
    dumped = caplog.text + json.dumps(
        {k.decode(): v.decode() for k, v in rb.hgetall(keys.ALERT_FIRING).items()}
    )
    assert "TOKEN-SECRET" not in dumped and "PASS-SECRET" not in dumped
    assert "PASS-SECRET" not in str(got.failed) and "TOKEN-SECRET" not in str(got.failed)
    assert "TOKEN-SECRET" not in repr(s)
