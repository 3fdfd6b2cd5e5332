"""Manifests mode: serve `DIR/<cluster>/*.yaml` (any objects, RBAC included, multi-document
files, `kind: List`). Namespaces that objects name are created if no manifest defines them.
Known kinds are stored at the version kubesim serves; unknown kinds are served as found.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from common.errors import ConfigError
from kubesim.catalog import NAMESPACES, Catalog
from kubesim.store import ClusterStore

SUFFIXES = (".yaml", ".yml", ".json")


class ManifestFleet:
    """Clusters read from a directory of per-cluster manifest directories."""

    def __init__(self, root: str | Path, catalog: Catalog | None = None) -> None:
        self.root = Path(root)
        self.catalog = catalog or Catalog.default()
        if not self.root.is_dir():
            raise ConfigError(f"--from {root}: not a directory of per-cluster directories")
        self.cluster_names = sorted(p.name for p in self.root.iterdir() if p.is_dir())
        if not self.cluster_names:
            raise ConfigError(f"--from {root}: no cluster directories inside")

    def documents(self, cluster: str) -> Iterator[dict[str, Any]]:
        for path in sorted((self.root / cluster).iterdir()):
            if path.suffix not in SUFFIXES:
                continue
            try:
                docs = list(yaml.safe_load_all(path.read_text()))
            except yaml.YAMLError as e:
                raise ConfigError(f"{path}: not valid YAML: {e}") from e
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind", "").endswith("List"):
                    yield from (d for d in doc.get("items") or [] if isinstance(d, dict))
                elif isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion"):
                    yield doc

    def load(self, name: str, store: ClusterStore) -> None:
        docs = list(self.documents(name))
        for doc in docs:
            ns = (doc.get("metadata") or {}).get("namespace")
            if doc["kind"] == "Namespace":
                store.upsert(NAMESPACES, "", doc)
            elif ns and store.get_raw(NAMESPACES, "", ns) is None:
                store.create(NAMESPACES, "", {"metadata": {"name": ns}})
        for doc in docs:
            if doc["kind"] == "Namespace":
                continue
            meta = doc.setdefault("metadata", {})
            res = self.catalog.ensure(doc["apiVersion"], doc["kind"], bool(meta.get("namespace")))
            ns = str(meta.get("namespace") or "default") if res.namespaced else ""
            if res.namespaced and store.get_raw(NAMESPACES, "", ns) is None:
                store.create(NAMESPACES, "", {"metadata": {"name": ns}})
            store.upsert(res, ns, doc)
        store.compact()  # loading is not history
