"""What a kubeconfig from the management cluster may hold: inline material only.

Registry sources (GitopsCluster, Cluster API, Argo CD, fleetscope's own Secrets) are written by
whoever may write in their namespaces, so their kubeconfigs are data: `check` walks one against
an allow-list of keys (server, CA data, client certificate and key data, bearer token, basic
auth, TLS server name, proxy URL, `insecure-skip-tls-verify`, names and extensions) and names
the first field outside it. `exec`, `auth-provider`, `tokenFile` and every file path
(`certificate-authority`, `client-certificate`, `client-key`) are refused that way, before the
kubernetes client ever sees the dict; only an `exec` whose command is in the operator's
allow-list (`FLEETSCOPE_EXEC_COMMANDS`, for Argo CD) passes. Field names in messages use list
indexes, never the (untrusted) names.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

TOP = frozenset(
    {"apiVersion", "kind", "clusters", "contexts", "users", "current-context", "preferences"}
)
CLUSTER = frozenset(
    {
        "server",
        "certificate-authority-data",
        "tls-server-name",
        "insecure-skip-tls-verify",
        "proxy-url",
        "disable-compression",
        "extensions",
    }
)
USER = frozenset(
    {"token", "username", "password", "client-certificate-data", "client-key-data", "extensions"}
)
CONTEXT = frozenset({"cluster", "user", "namespace", "extensions"})
EXEC = frozenset({"command", "args", "env", "apiVersion", "installHint", "interactiveMode"})
RUNS = frozenset({"exec", "auth-provider"})
READS = frozenset({"tokenFile", "certificate-authority", "client-certificate", "client-key"})
SECTIONS = (
    ("clusters", "cluster", CLUSTER),
    ("users", "user", USER),
    ("contexts", "context", CONTEXT),
)


def check(kubeconfig: Mapping[str, Any], exec_commands: Collection[str] = ()) -> str:
    """Why `kubeconfig` is refused ("" when it holds inline material only). An `exec` passes
    only when its command is one of `exec_commands` (absolute paths)."""
    if not isinstance(kubeconfig, Mapping):
        return "the kubeconfig is not a mapping"
    for key in kubeconfig:
        if key not in TOP:
            return _refused(str(key), str(key))
    for section, inner, allowed in SECTIONS:
        entries = kubeconfig.get(section) or []
        if not isinstance(entries, list):
            return f"kubeconfig field {section} is not a list"
        for i, entry in enumerate(entries):
            where = f"{section}[{i}]"
            if not isinstance(entry, Mapping):
                return f"kubeconfig field {where} is not a mapping"
            for key in entry:
                if key not in ("name", inner):
                    return _refused(str(key), f"{where}.{key}")
            body = entry.get(inner) or {}
            if not isinstance(body, Mapping):
                return f"kubeconfig field {where}.{inner} is not a mapping"
            for key, value in body.items():
                field = f"{where}.{inner}.{key}"
                if key == "exec" and inner == "user":
                    reason = _check_exec(value, field, exec_commands)
                    if reason:
                        return reason
                elif key not in allowed:
                    return _refused(str(key), field)
    return ""


def _check_exec(spec: Any, field: str, exec_commands: Collection[str]) -> str:
    if not isinstance(spec, Mapping):
        return f"kubeconfig field {field} is not a mapping"
    command = str(spec.get("command") or "")
    if not exec_commands or command not in exec_commands:
        return (
            f"kubeconfig field {field} is refused: it runs a command, and kubeconfigs from the "
            "management cluster may hold inline credentials only"
            + (" (FLEETSCOPE_EXEC_COMMANDS does not list it)" if exec_commands else "")
        )
    for key in spec:
        if key not in EXEC:
            return _refused(str(key), f"{field}.{key}")
    return ""


def _refused(key: str, field: str) -> str:
    field = _printable(field)
    if key in RUNS:
        why = "it runs a command"
    elif key in READS:
        why = "it names a local file"
    else:
        why = "it is not an inline credential fleetscope accepts"
    return (
        f"kubeconfig field {field} is refused: {why}, and kubeconfigs from the management "
        "cluster may hold inline credentials only (server, CA data, client certificate and key "
        "data, token, basic auth, TLS server name, proxy URL)"
    )


def _printable(text: str) -> str:
    cleaned = "".join(c if c.isprintable() else "?" for c in text)
    return cleaned if len(cleaned) <= 80 else cleaned[:79] + "\u2026"
