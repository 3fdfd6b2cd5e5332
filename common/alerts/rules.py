"""Alert rules: the rules file (`FLEETSCOPE_ALERT_RULES_FILE`), parsed and validated.

    rules:
      - name: HelmReleaseFailing          # the alertname: letters, digits, `_`, `:`, unique
        match:                            # the list filters, as /api/v1/objects takes them
          kind: HelmRelease               # a value or a list, for cluster, namespace, kind, status
          status: [unhealthy]
          suspended: false
          name: podinfo                   # a substring of the name
          flapping: true                  # >= FLEETSCOPE_FLAPPING_THRESHOLD transitions in 24 h
          labelSelector: "app.kubernetes.io/part-of=shop,tier notin (test)"
        for: 15m                          # how long a row keeps matching (default 0s)
        minClusters: 3                    # one alert per object matching on >= 3 clusters
        severity: critical                # default warning
        labels: {team: "{{ .namespace }}"}
        annotations: {summary: "{{ .kind }} {{ .namespace }}/{{ .name }}: {{ .message }}"}

Every error names the rule (its position and name) and the field. Match fields are a table
(`MATCH_FIELDS`): a new filter is one more entry there and in common.index.read.filter_values.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from common.alerts import template
from common.alerts.template import Template, TemplateError
from common.errors import ConfigError, InvalidInput
from common.index.read import filter_values
from common.index.read.plan import Filters
from common.kinds.registry import KindRegistry

RULE_FIELDS = ("name", "match", "for", "minClusters", "severity", "labels", "annotations")
IDENTITY_LABELS = ("alertname", "cluster", "namespace", "kind", "name", "severity")
"""Labels every alert carries, set by fleetscope: a rule's `labels` may not set them."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_:]{0,127}$")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SEVERITY = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
MAX_RULES = 500
MAX_FOR_S = 366 * 86400


class RuleError(ConfigError):
    """A rules file that cannot be used: the message names the rule and the field."""


@dataclass(frozen=True)
class Rule:
    name: str
    filters: Filters
    for_s: float = 0.0
    min_clusters: int = 0
    """0: one alert per matching row; N >= 1: one per object matching on at least N clusters."""
    severity: str = "warning"
    labels: Mapping[str, Template] = field(default_factory=dict)
    annotations: Mapping[str, Template] = field(default_factory=dict)

    @property
    def cross_cluster(self) -> bool:
        return self.min_clusters > 0


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    digest: str
    """The hash of the file's text: the evaluator recomputes everything when it changes."""

    def get(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)


EMPTY = RuleSet((), "")


def _one_or_list(value: Any, what: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v for v in items):
        raise InvalidInput(what, "a non-empty string or a list of them")
    return tuple(dict.fromkeys(items))


def _suspended(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(what, "true or false")
    return value


def _flapping(value: Any, what: str) -> bool:
    """`true`: rows with at least FLEETSCOPE_FLAPPING_THRESHOLD transitions in the last 24 h."""
    if value is not True:
        raise InvalidInput(what, "true (leave it out for any row)")
    return True


MatchParser = Callable[[Any, str], Any]
MATCH_FIELDS: dict[str, MatchParser] = {
    "cluster": _one_or_list,
    "namespace": _one_or_list,
    "kind": _one_or_list,
    "status": _one_or_list,
    "suspended": _suspended,
    "name": lambda v, what: v if isinstance(v, str) else _bad(what, "a string"),
    "flapping": _flapping,
    "labelSelector": lambda v, what: v if isinstance(v, str) else _bad(what, "a string"),
}
"""`match` fields and how each value is read (`labelSelector`: Kubernetes' selector syntax,
checked by common.index.read.filter_values as the API checks it)."""


def _detail(e: InvalidInput) -> str:
    """What an InvalidInput says, without the parameter name it starts with."""
    return e.message.removeprefix(f"{e.param}: ")


def _bad(what: str, accepts: str) -> Any:
    raise InvalidInput(what, accepts)


def parse_duration(value: Any, what: str = "for") -> float:
    """Prometheus' duration form (`90s`, `15m`, `1h30m`, `2d`) or a number of seconds."""
    if isinstance(value, bool):
        raise InvalidInput(what, "a duration like 30s, 15m or 1h30m")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.fullmatch(str(value).strip()) if isinstance(value, str) else None
        if not m or not value.strip() or not any(m.groups()):
            raise InvalidInput(what, f"{str(value)[:40]!r} is not a duration like 30s, 15m, 1h30m")
        d, h, mi, s = (int(g or 0) for g in m.groups())
        seconds = float(((d * 24 + h) * 60 + mi) * 60 + s)
    if not 0 <= seconds <= MAX_FOR_S:
        raise InvalidInput(what, "from 0s to 366d")
    return seconds


def _filters(match: Any, registry: KindRegistry, flapping_threshold: int) -> Filters:
    if match is None:
        return Filters()
    if not isinstance(match, dict):
        raise InvalidInput("match", "a mapping of list filters (cluster, namespace, kind, ...)")
    got: dict[str, Any] = {}
    for key, value in match.items():
        parser = MATCH_FIELDS.get(str(key))
        if parser is None:
            raise InvalidInput(
                f"match.{str(key)[:40]}", f"unknown filter; {', '.join(MATCH_FIELDS)}"
            )
        got[key] = parser(value, f"match.{key}")
    try:
        return filter_values.build(
            registry,
            clusters=got.get("cluster", ()),
            namespaces=got.get("namespace", ()),
            kinds=got.get("kind", ()),
            statuses=got.get("status", ()),
            name=got.get("name", ""),
            suspended=got.get("suspended"),
            flapping=flapping_threshold if got.get("flapping") else 0,
            label_selector=got.get("labelSelector", ""),
        )
    except InvalidInput as e:
        raise InvalidInput(f"match.{e.param}", _detail(e)) from None


def _templates(value: Any, what: str, labels: bool) -> dict[str, Template]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(what, "a mapping of names to templates")
    out: dict[str, Template] = {}
    for key, text in value.items():
        name = str(key)
        if not _LABEL_NAME.fullmatch(name):
            raise InvalidInput(f"{what}.{name[:40]}", "a label name ([A-Za-z_][A-Za-z0-9_]*)")
        if labels and name in IDENTITY_LABELS:
            raise InvalidInput(
                f"{what}.{name}", f"set by fleetscope ({', '.join(IDENTITY_LABELS)})"
            )
        try:
            out[name] = template.parse(text if isinstance(text, str) else str(text))
        except TemplateError as e:
            raise InvalidInput(f"{what}.{name}", str(e)) from None
    return out


def parse_rule(raw: Any, registry: KindRegistry, flapping_threshold: int = 4) -> Rule:
    if not isinstance(raw, dict):
        raise InvalidInput("rule", "a mapping with name, match, for, ...")
    for key in raw:
        if key not in RULE_FIELDS:
            raise InvalidInput(str(key)[:40], f"unknown field; a rule has {', '.join(RULE_FIELDS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput("name", "required: letters, digits, '_' and ':' (<= 128)")
    min_clusters = raw.get("minClusters", 0)
    bad = isinstance(min_clusters, bool) or not isinstance(min_clusters, int) or min_clusters < 1
    if "minClusters" in raw and bad:
        raise InvalidInput("minClusters", "an integer >= 1 (leave it out for one per row)")
    severity = raw.get("severity", "warning")
    if not isinstance(severity, str) or not _SEVERITY.fullmatch(severity):
        raise InvalidInput("severity", "a word such as critical, warning or info")
    return Rule(
        name=name,
        filters=_filters(raw.get("match"), registry, flapping_threshold),
        for_s=parse_duration(raw.get("for", 0)),
        min_clusters=int(min_clusters),
        severity=severity,
        labels=_templates(raw.get("labels"), "labels", True),
        annotations=_templates(raw.get("annotations"), "annotations", False),
    )


def parse(
    text: str, registry: KindRegistry, source: str = "rules", flapping_threshold: int = 4
) -> RuleSet:
    """The rules of a file's text; a RuleError names the rule and field that are wrong.
    `flapping: true` means `flapping_threshold` transitions in 24 h (part of the digest: a
    changed threshold re-evaluates every cluster, as a changed file does)."""
    try:
        doc = yaml.safe_load(text) if text.strip() else {"rules": []}
    except yaml.YAMLError as e:
        raise RuleError(f"{source}: not YAML: {str(e)[:300]}") from None
    if not isinstance(doc, dict) or set(doc) - {"rules"} or not isinstance(doc.get("rules"), list):
        raise RuleError(f"{source}: a mapping with one key, `rules:`, holding a list of rules")
    if len(doc["rules"]) > MAX_RULES:
        raise RuleError(f"{source}: at most {MAX_RULES} rules")
    out: list[Rule] = []
    for i, raw in enumerate(doc["rules"]):
        named = raw.get("name") if isinstance(raw, dict) else None
        where = f"{source}: rules[{i}]" + (f" ({str(named)[:80]})" if named else "")
        try:
            rule = parse_rule(raw, registry, flapping_threshold)
        except InvalidInput as e:
            raise RuleError(f"{where}: {e.param}: {_detail(e)}") from None
        if any(r.name == rule.name for r in out):
            raise RuleError(f"{where}: name: {rule.name} is used by an earlier rule")
        out.append(rule)
    if any(r.filters.flapping for r in out):
        text = f"{text}\n# flapping threshold {flapping_threshold}"
    return RuleSet(tuple(out), hashlib.sha256(text.encode()).hexdigest()[:16])
