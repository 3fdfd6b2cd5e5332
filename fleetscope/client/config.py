"""Where the client connects and as whom: the config file's named contexts, then env, then flags.

The file (default `~/.config/fleetscope/config.yaml`, or `FLEETSCOPE_CONFIG` / `--config`) looks
like a kubeconfig flattened to what fleetscope needs:

    current-context: prod
    contexts:
    - name: prod
      server: https://fleetscope.example.com
      certificate-authority: ca.pem           # relative to this file; or insecure-skip-tls-verify
      exec: {command: kubectl, args: [oidc-login, get-token, ...]}   # or token / token-file

Each field is taken from the first of: flag, environment (`FLEETSCOPE_SERVER`,
`FLEETSCOPE_TOKEN`), the chosen context. Relative paths are relative to the file, as in kubectl.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetscope.client.credentials import (
    Credential,
    ExecConfig,
    ExecToken,
    NoCredential,
    StaticToken,
    TokenFile,
    parse_exec_config,
)
from fleetscope.client.errors import BadInput

DEFAULT_PATH = "~/.config/fleetscope/config.yaml"
CONTEXT_FIELDS = {
    "name",
    "server",
    "certificate-authority",
    "insecure-skip-tls-verify",
    "token",
    "token-file",
    "exec",
}


@dataclass(frozen=True)
class Context:
    name: str
    server: str = ""
    certificate_authority: str = ""
    insecure_skip_tls_verify: bool = False
    token: str = field(default="", repr=False)
    token_file: str = ""
    exec: ExecConfig | None = None

    def credential(self) -> Credential:
        if self.token:
            return StaticToken(self.token, f"context {self.name!r}")
        if self.token_file:
            return TokenFile(Path(self.token_file))
        if self.exec:
            return ExecToken(self.exec)
        return NoCredential()


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    current_context: str = ""
    contexts: tuple[Context, ...] = ()

    def context(self, name: str) -> Context:
        for c in self.contexts:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.contexts) or "none"
        raise BadInput(f"no context {name!r} in {self.path} (contexts: {known})")


@dataclass(frozen=True)
class Flags:
    """The connection flags every client command takes (None: not given)."""

    config: str | None = None
    context: str | None = None
    server: str | None = None
    certificate_authority: str | None = None
    insecure_skip_tls_verify: bool = False
    as_user: str | None = None
    as_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    """Everything a request needs: resolved, validated, credential not yet obtained."""

    server: str
    verify: bool | str  # requests' `verify`: a CA file, or whether to check the system CAs
    credential: Credential
    as_user: str = ""
    as_groups: tuple[str, ...] = ()


def config_path(flags: Flags, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The config file and whether it was named explicitly (then it must exist)."""
    chosen = flags.config or env.get("FLEETSCOPE_CONFIG", "")
    return Path(chosen or DEFAULT_PATH).expanduser(), bool(chosen)


def load_config(path: Path, explicit: bool) -> ConfigFile:
    try:
        text = path.read_text()
    except FileNotFoundError:
        if explicit:
            raise BadInput(f"config file {path} does not exist") from None
        return ConfigFile(path)
    except OSError as e:
        raise BadInput(f"cannot read config file {path}: {e.strerror}") from e
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise BadInput(f"config file {path} is not valid YAML: {_first_line(e)}") from e
    if not isinstance(doc, dict):
        raise BadInput(f"config file {path} must be a mapping with `contexts`")
    raw = doc.get("contexts") or []
    if not isinstance(raw, list):
        raise BadInput(f"config file {path}: `contexts` must be a list")
    contexts = tuple(_context(entry, i, path) for i, entry in enumerate(raw))
    return ConfigFile(path, str(doc.get("current-context") or ""), contexts)


def _context(entry: Any, index: int, path: Path) -> Context:
    where = f"config file {path}, context {index}"
    if not isinstance(entry, dict) or not entry.get("name"):
        raise BadInput(f"{where} must be a mapping with a `name`")
    unknown = set(entry) - CONTEXT_FIELDS
    if unknown:
        raise BadInput(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    ways = [k for k in ("token", "token-file", "exec") if entry.get(k)]
    if len(ways) > 1:
        raise BadInput(f"{where}: set only one of token, token-file and exec (found {ways})")
    exec_config = entry.get("exec")
    return Context(
        name=str(entry["name"]),
        server=str(entry.get("server") or ""),
        certificate_authority=_relative(entry.get("certificate-authority"), path),
        insecure_skip_tls_verify=bool(entry.get("insecure-skip-tls-verify", False)),
        token=str(entry.get("token") or ""),
        token_file=_relative(entry.get("token-file"), path),
        exec=parse_exec_config(exec_config, where, path.parent) if exec_config else None,
    )


def _relative(value: Any, path: Path) -> str:
    if not value:
        return ""
    p = Path(str(value)).expanduser()
    return str(p if p.is_absolute() else path.parent / p)


def resolve(flags: Flags, env: Mapping[str, str]) -> Target:
    """Flags > environment > context, field by field (as kubectl does)."""
    context = _chosen_context(flags, env)
    server = flags.server or env.get("FLEETSCOPE_SERVER", "") or (context and context.server)
    if not server:
        raise BadInput(
            "no server: pass --server URL, set FLEETSCOPE_SERVER, or add a context to "
            f"{config_path(flags, env)[0]} (see docs/cli.md)"
        )
    server = _check_server(server)
    token = env.get("FLEETSCOPE_TOKEN", "")
    credential: Credential = (
        StaticToken(token, "FLEETSCOPE_TOKEN")
        if token
        else (context.credential() if context else NoCredential())
    )
    ca = flags.certificate_authority or (context.certificate_authority if context else "")
    insecure = flags.insecure_skip_tls_verify or bool(context and context.insecure_skip_tls_verify)
    if ca and insecure:
        raise BadInput("set either a certificate authority or insecure-skip-tls-verify, not both")
    verify: bool | str = ca if ca else not insecure
    return Target(server, verify, credential, flags.as_user or "", flags.as_groups)


def _chosen_context(flags: Flags, env: Mapping[str, str]) -> Context | None:
    path, explicit = config_path(flags, env)
    config = load_config(path, explicit)
    name = flags.context or config.current_context
    if not name:
        return None
    if flags.context is None and not config.contexts:
        return None
    return config.context(name)


def _check_server(server: str) -> str:
    if not server.startswith(("http://", "https://")):
        raise BadInput(f"server {server[:200]!r} must be an http:// or https:// URL")
    return server.rstrip("/")


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__
