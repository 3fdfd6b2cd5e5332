"""The management cluster: the only module that reads from it (for the cluster registry).

Requests go through the `kubernetes` client (its kubeconfig or in-cluster loader, TLS, auth and
token refresh, its urllib3 pool) as raw GETs with JSON answers, as common.leaf does for leaves. Lists are paginated and remembered until
`forget()`, so sources that need the same Secrets in one registry round read them once. Failures
become `ClusterUnreachable` (network, timeout, 5xx, 429) or `ClusterError` (401/403: the message
names the resource, so the missing RBAC rule is obvious); nothing read is ever logged.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
import yaml
from kubernetes.client import Configuration
from kubernetes.client.rest import RESTClientObject

from common.errors import ClusterError, ClusterUnreachable, ConfigError
from common.leaf.client import ClusterConfig, bearer_token
from common.settings import Settings

log = logging.getLogger(__name__)
PAGE_SIZE = 500
Obj = dict[str, Any]


class Management:
    """Reads objects from the management cluster; `requests` counts what was sent."""

    def __init__(self, configuration: Configuration, timeout_s: float = 10.0) -> None:
        self._configuration = configuration
        self._pool = RESTClientObject(configuration).pool_manager
        self._host = configuration.host.rstrip("/")
        self.timeout_s = timeout_s
        self.requests = 0
        self._lists: dict[tuple[str, str, str, str], list[Obj]] = {}
        self._groups: dict[str, Obj | None] = {}

    @classmethod
    def connect(cls, settings: Settings) -> Management:
        """From `FLEETSCOPE_MANAGEMENT_KUBECONFIG`, else the pod's service account."""
        from kubernetes import config

        configuration = Configuration()
        try:
            if settings.management_kubeconfig:
                configuration = _operator_kubeconfig(settings)
            else:
                config.load_incluster_config(configuration)  # type: ignore[no-untyped-call]
        except (
            config.ConfigException, OSError, KeyError, TypeError, ValueError, yaml.YAMLError
        ) as e:  # fmt: skip
            raise ConfigError(
                f"cannot load the management cluster config: {type(e).__name__}; set "
                "FLEETSCOPE_MANAGEMENT_KUBECONFIG or run in-cluster"
            ) from None
        return cls(configuration, settings.leaf_timeout_s)

    def close(self) -> None:
        self._pool.clear()

    def forget(self) -> None:
        """Drop remembered answers: the next reads see the cluster as it is now."""
        self._lists.clear()
        self._groups.clear()

    def served_version(self, group: str, preferred: Sequence[str]) -> str | None:
        """The version of `group` to read: the first of `preferred` the server serves, else the
        server's preferred one; None when the group is not served (its CRDs not installed)."""
        if group not in self._groups:
            self._groups[group] = self._get(f"/apis/{group}", {}, what=f"API group {group}")
        doc = self._groups[group]
        if doc is None:
            return None
        served = [str(v.get("version")) for v in doc.get("versions") or []]
        for version in preferred:
            if version in served:
                return version
        pref = (doc.get("preferredVersion") or {}).get("version")
        return str(pref) if pref else (served[0] if served else None)

    def list_objects(
        self, api_version: str, plural: str, namespace: str = "", label_selector: str = ""
    ) -> list[Obj]:
        """Every object of a resource, in one namespace or all (remembered until `forget`)."""
        key = (api_version, plural, namespace, label_selector)
        if key not in self._lists:
            self._lists[key] = self._list_pages(*key)
        return self._lists[key]

    def _list_pages(
        self, api_version: str, plural: str, namespace: str, label_selector: str
    ) -> list[Obj]:
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        where = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
        path = f"{prefix}{where}/{plural}"
        what = f"{plural} in {f'namespace {namespace}' if namespace else 'all namespaces'}"
        items: list[Obj] = []
        token = ""
        while True:
            query = {"limit": str(PAGE_SIZE)}
            if label_selector:
                query["labelSelector"] = label_selector
            if token:
                query["continue"] = token
            page = self._get(path, query, what=what)
            if page is None:
                return []  # the resource went away between discovery and the list
            items.extend(page.get("items") or [])
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return items

    def _get(self, path: str, query: dict[str, str], what: str) -> Obj | None:
        """One GET; None on 404."""
        headers = {"Accept": "application/json"}
        token = bearer_token(self._configuration)  # under either key the loader has used
        if token:
            headers["Authorization"] = token
        url = self._host + path + (f"?{urlencode(query)}" if query else "")
        self.requests += 1
        try:
            resp = self._pool.request(
                "GET",
                url,
                headers=headers,
                timeout=urllib3.Timeout(connect=self.timeout_s, read=self.timeout_s),
                retries=False,
            )
        except urllib3.exceptions.HTTPError as e:  # no credentials in the type name
            raise ClusterUnreachable(
                f"cannot reach the management cluster to list {what}: {type(e).__name__}"
            ) from None
        if resp.status == 404:
            return None
        if resp.status in (401, 403):
            raise ClusterError(
                f"the management cluster refused to list {what} (HTTP {resp.status}): "
                "check fleetscope's RBAC there (docs/operations.md)"
            )
        if resp.status >= 400:
            raise ClusterUnreachable(
                f"the management cluster answered HTTP {resp.status} to a list of {what}"
            )
        try:
            data = json.loads(resp.data)
        except ValueError:
            raise ClusterUnreachable(f"the management cluster sent no JSON for {what}") from None
        return data if isinstance(data, dict) else {}


def _operator_kubeconfig(settings: Settings) -> Configuration:
    """`FLEETSCOPE_MANAGEMENT_KUBECONFIG`, loaded as an operator's kubeconfig file is (its exec
    plugin, if any, through common.leaf.exec_plugin: scrubbed environment, timeout)."""
    path = os.path.abspath(settings.management_kubeconfig)
    with open(path, "rb") as f:
        kubeconfig = yaml.safe_load(f)
    if not isinstance(kubeconfig, dict):
        raise ValueError("not a YAML mapping")
    cfg = ClusterConfig(
        "management",
        "dir",
        path,
        kubeconfig,
        os.path.dirname(path),
        exec_timeout_s=settings.exec_timeout_s,
    )
    try:
        return cfg.configuration()
    except ClusterError as e:
        raise ValueError(str(e)) from None
