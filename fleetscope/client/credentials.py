"""Bearer tokens: given (FLEETSCOPE_TOKEN or the context's `token`), read from a file, or printed
by a command, as kubectl's exec credential plugins do (so OIDC helpers such as kubelogin work).

A command may print kubectl's ExecCredential JSON (`status.token` is used) or a bare token. It
runs at most once per invocation, with stdin and stderr passed through (a helper may open a
browser or ask for a code) and KUBERNETES_EXEC_INFO set. A token is never printed or logged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fleetscope.client.errors import BadInput, Unauthenticated

EXEC_API_VERSION = "client.authentication.k8s.io/v1"
EXEC_FIELDS = {
    "command",
    "args",
    "env",
    "apiVersion",
    "installHint",
    "interactiveMode",
    "provideClusterInfo",
}


class Credential(Protocol):
    def token(self) -> str | None:
        """The bearer token to send, or None for no Authorization header."""


class NoCredential:
    def token(self) -> str | None:
        return None


@dataclass(frozen=True)
class StaticToken:
    value: str = field(repr=False)
    source: str = ""

    def token(self) -> str | None:
        return self.value.strip() or None


@dataclass
class TokenFile:
    path: Path
    _cached: str = field(default="", repr=False)

    def token(self) -> str | None:
        if not self._cached:
            try:
                self._cached = self.path.read_text().strip()
            except OSError as e:
                raise Unauthenticated(f"cannot read token file {self.path}: {e.strerror}") from e
            if not self._cached:
                raise Unauthenticated(f"token file {self.path} is empty")
        return self._cached


@dataclass(frozen=True)
class ExecConfig:
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_version: str = EXEC_API_VERSION
    install_hint: str = ""


def parse_exec_config(raw: Any, where: str, base: Path) -> ExecConfig:
    """A context's `exec:` block, kubeconfig-style (`env` as [{name, value}] or a mapping)."""
    if not isinstance(raw, dict) or not raw.get("command"):
        raise BadInput(f"{where}: exec needs a `command`")
    unknown = set(raw) - EXEC_FIELDS
    if unknown:
        raise BadInput(f"{where}: exec has unknown field(s) {', '.join(sorted(unknown))}")
    command = str(raw["command"])
    if os.sep in command and not Path(command).is_absolute():
        command = str(base / command)  # kubectl: a relative path is relative to the config
    args = raw.get("args") or []
    if not isinstance(args, list):
        raise BadInput(f"{where}: exec args must be a list")
    return ExecConfig(
        command,
        tuple(str(a) for a in args),
        _env_pairs(raw.get("env"), where),
        str(raw.get("apiVersion") or EXEC_API_VERSION),
        str(raw.get("installHint") or ""),
    )


def _env_pairs(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not raw:
        return ()
    if isinstance(raw, dict):
        return tuple((str(k), str(v)) for k, v in raw.items())
    if isinstance(raw, list) and all(isinstance(e, dict) and "name" in e for e in raw):
        return tuple((str(e["name"]), str(e.get("value", ""))) for e in raw)
    raise BadInput(f"{where}: exec env must be a list of {{name, value}} or a mapping")


@dataclass
class ExecToken:
    config: ExecConfig
    _cached: str = field(default="", repr=False)
    # False: the command gets no stdin (under `fleetscope mcp`, stdin is the protocol stream)
    interactive: bool = True

    def token(self) -> str | None:
        if not self._cached:
            self._cached = parse_exec_output(self._run(), self.config.command)
        return self._cached

    def _run(self) -> str:
        c = self.config
        info = {
            "apiVersion": c.api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": self.interactive and sys.stdin.isatty()},
        }
        env = {**os.environ, **dict(c.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(
                [c.command, *c.args],
                env=env,
                stdin=None if self.interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                check=False,
            )
        except OSError as e:
            hint = f" ({c.install_hint})" if c.install_hint else ""
            raise Unauthenticated(
                f"credential command {c.command!r} cannot run: {e.strerror}{hint}"
            ) from e
        if done.returncode != 0:
            raise Unauthenticated(
                f"credential command {c.command!r} failed with exit status {done.returncode}"
            )
        return done.stdout.decode(errors="replace")


def parse_exec_output(out: str, command: str = "the credential command") -> str:
    """The token in an ExecCredential document, or a bare single-line token."""
    text = out.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            raise Unauthenticated(f"{command!r} printed JSON that does not parse") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise Unauthenticated(f"{command!r} printed JSON that is not an ExecCredential")
        status = doc.get("status") if isinstance(doc.get("status"), dict) else {}
        token = status.get("token") if status else None
        if isinstance(token, str) and token.strip():
            return token.strip()
        if status and status.get("clientCertificateData"):
            raise Unauthenticated(
                f"{command!r} returned a client certificate; fleetscope needs a token"
            )
        raise Unauthenticated(f"{command!r} printed an ExecCredential without status.token")
    if not text or len(text.split()) != 1:
        raise Unauthenticated(f"{command!r} printed neither an ExecCredential nor a token")
    return text
