"""What a server offers, read from its OpenAPI document: the kinds and statuses it accepts, the
list parameters (is there `sort`? `suspended`?), optional routes (groups, relations) and the
row fields (is there `blockedBy`?). Lets one client work against older and newer servers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OBJECTS = "/api/v1/objects"
DETAIL = "/api/v1/objects/{cluster}/{namespace}/{kind}/{name}"
RELATIONS = DETAIL + "/relations"
GROUPS = "/api/v1/groups"


@dataclass(frozen=True)
class Features:
    paths: frozenset[str] = frozenset()
    params: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # path: name: enum
    row_fields: frozenset[str] = frozenset()
    facet_fields: frozenset[str] = frozenset()
    known: bool = False  # False: the server published no document; assume the basics
    csv_paths: frozenset[str] = frozenset()  # routes that answer `Accept: text/csv`

    @classmethod
    def from_openapi(cls, doc: dict[str, Any]) -> Features:
        paths = doc.get("paths")
        if not isinstance(paths, dict) or OBJECTS not in paths:
            return cls()
        params = {path: _params(item) for path, item in paths.items() if isinstance(item, dict)}
        schemas = doc.get("components", {}).get("schemas", {})
        return cls(
            frozenset(paths),
            params,
            frozenset(schemas.get("Row", {}).get("properties", {})),
            frozenset(schemas.get("Facets", {}).get("properties", {})),
            True,
            frozenset(path for path, item in paths.items() if _answers_csv(item)),
        )

    def offers(self, path: str) -> bool:
        return path in self.paths

    def has_param(self, path: str, name: str) -> bool:
        return name in self.params.get(path, {})

    def enum(self, name: str, path: str = OBJECTS) -> tuple[str, ...]:
        """The values the list route accepts for `name` ((): any, or not known)."""
        return self.params.get(path, {}).get(name, ())

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.enum("kind")

    @property
    def statuses(self) -> tuple[str, ...]:
        return self.enum("status")


def _params(item: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for p in item.get("get", {}).get("parameters", []):
        if not isinstance(p, dict) or "name" not in p:
            continue
        schema = p.get("schema", {})
        schema = schema.get("items", schema) if schema.get("type") == "array" else schema
        out[str(p["name"])] = tuple(str(v) for v in schema.get("enum", []))
    return out


def _answers_csv(item: Any) -> bool:
    ok = item.get("get", {}).get("responses", {}).get("200", {}) if isinstance(item, dict) else {}
    return isinstance(ok, dict) and "text/csv" in (ok.get("content") or {})
