"""The generated users `fleetscope demo` shows off, read from kubesim's users file."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

# One identity of each kind, so RBAC filtering is visible at once.
SHOWN = ("admin-0", "dev-team-00", "solo", "nobody")


@dataclass(frozen=True)
class DemoUser:
    name: str
    groups: tuple[str, ...]
    description: str

    def headers(self) -> list[tuple[str, str]]:
        return [("X-Remote-User", self.name)] + [("X-Remote-Group", g) for g in self.groups]

    def curl(self, url: str) -> str:
        flags = " ".join(f"-H {shlex.quote(f'{k}: {v}')}" for k, v in self.headers())
        return f"curl -s {flags} {shlex.quote(url)}"

    def fleetscope(self, command: str, base: str, *args: str) -> str:
        """The same request from the command line: --as/--as-group send the same headers."""
        ident = ["--as", self.name] + [f for g in self.groups for f in ("--as-group", g)]
        words = ["fleetscope", command, *args, "--server", base, *ident]
        return " ".join(shlex.quote(w) for w in words)


def users_file(kubeconfig_dir: Path) -> Path:
    """Where `fleetscope kubesim` writes its users: next to the kubeconfig directory."""
    return kubeconfig_dir.resolve().parent / "kubesim-users.json"


def pick_demo_users(kubeconfig_dir: Path) -> list[DemoUser]:
    doc = json.loads(users_file(kubeconfig_dir).read_text())
    by_name = {u["name"]: u for u in doc["users"]}
    return [
        DemoUser(n, tuple(by_name[n]["groups"]), by_name[n]["description"])
        for n in SHOWN
        if n in by_name
    ]
