"""Exec credential plugins (`users[].user.exec`, client.authentication.k8s.io), run by fleetscope.

The kubernetes client's own ExecProvider hands a plugin the process's whole environment (the
Redis password, the continue-token key) and waits for it forever; this runner is the one way a
plugin runs anywhere in fleetscope: its environment is `PATH`, `HOME` and the variables its
config names (never a `FLEETSCOPE_*` one) plus `KUBERNETES_EXEC_INFO`; it is killed, with its
process group, after `timeout_s` or past `MAX_OUTPUT_BYTES` of output; and nothing here takes a
lock, so a hung plugin holds up only the cluster that needs it. Its stderr is never shown (it
may hold secrets), only how it failed.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.errors import ClusterError

MAX_OUTPUT_BYTES = 1 << 20  # an ExecCredential is a few KiB; a plugin spewing more is broken
PASSED_THROUGH = ("PATH", "HOME")
ENV_DENIED_PREFIX = "FLEETSCOPE_"
API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)


@dataclass(frozen=True)
class Credential:
    """What a plugin answered: a token, or a client certificate and key (PEM)."""

    token: str = ""
    cert_pem: str = ""
    key_pem: str = ""
    expires_at: datetime.datetime | None = None

    def expired(self, skew_s: float = 30.0) -> bool:
        if self.expires_at is None:
            return False
        now = datetime.datetime.now(datetime.UTC)
        return self.expires_at - datetime.timedelta(seconds=skew_s) <= now


def environment(spec: Mapping[str, Any], api_version: str) -> dict[str, str]:
    """The plugin's whole environment: PATH and HOME of this process (not settings: the OS's
    own lookup path and home), the config's `env` entries, and the ExecCredential request."""
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ}
    env.setdefault("PATH", os.defpath)
    for item in spec.get("env") or []:
        if not isinstance(item, Mapping):
            continue
        name, value = str(item.get("name") or ""), str(item.get("value") or "")
        if name and not name.upper().startswith(ENV_DENIED_PREFIX) and "=" not in name:
            env[name] = value
    info = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    return env


def run(spec: Mapping[str, Any], cluster: str, timeout_s: float, cwd: str = "") -> Credential:
    """Run the plugin `spec` once and parse its ExecCredential (ClusterError when it fails)."""
    command = str(spec.get("command") or "")
    api_version = str(spec.get("apiVersion") or "")
    what = f"cluster {cluster}: exec plugin {os.path.basename(command)[:60]!r}"
    if not command:
        raise ClusterError(f"cluster {cluster}: exec plugin has no command")
    if api_version not in API_VERSIONS:
        raise ClusterError(f"{what}: apiVersion {api_version[:60]!r} is not supported")
    if cwd and os.sep in command and not os.path.isabs(command):
        command = os.path.join(cwd, command)  # relative to the kubeconfig's directory
    args = [command, *(str(a) for a in spec.get("args") or [])]
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment(spec, api_version),
            cwd=cwd or None,
            start_new_session=True,  # its own process group: killed whole at the timeout
            close_fds=True,
        )
    except OSError as e:
        raise ClusterError(f"{what} cannot start: {e.strerror or type(e).__name__}") from None
    try:
        stdout = _collect(proc, timeout_s, what)
    finally:
        _kill(proc)
    if proc.returncode != 0:
        raise ClusterError(f"{what} exited with status {proc.returncode}")
    return parse(stdout, api_version, what)


def _collect(proc: subprocess.Popen[bytes], timeout_s: float, what: str) -> bytes:
    """stdout, read until both pipes close and the plugin exits; killed past the deadline
    or the output cap."""
    deadline = time.monotonic() + timeout_s
    out = bytearray()
    size = 0
    with selectors.DefaultSelector() as sel:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                sel.register(stream, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClusterError(f"{what} did not finish within {timeout_s:g}s: killed")
            for key, _ in sel.select(left):
                pipe = key.fileobj
                fd = pipe if isinstance(pipe, int) else pipe.fileno()
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(pipe)
                    continue
                size += len(chunk)
                if size > MAX_OUTPUT_BYTES:
                    raise ClusterError(f"{what} wrote more than {MAX_OUTPUT_BYTES} bytes: killed")
                if pipe is proc.stdout:
                    out += chunk
    try:
        proc.wait(max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:
        raise ClusterError(f"{what} did not finish within {timeout_s:g}s: killed") from None
    return bytes(out)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """End the plugin's process group (whatever it left running), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def parse(stdout: bytes, api_version: str, what: str) -> Credential:
    """The ExecCredential's status (client-go's checks: apiVersion, kind, a credential)."""
    try:
        data = json.loads(stdout)
    except ValueError:
        raise ClusterError(f"{what} wrote no JSON ExecCredential") from None
    if not isinstance(data, dict) or data.get("kind") != "ExecCredential":
        raise ClusterError(f"{what} wrote no ExecCredential")
    if data.get("apiVersion") != api_version:
        raise ClusterError(f"{what} answered another apiVersion than {api_version}")
    status = data.get("status")
    if not isinstance(status, dict):
        raise ClusterError(f"{what}: the ExecCredential has no status")
    token = str(status.get("token") or "")
    cert, key = (
        str(status.get("clientCertificateData") or ""),
        str(status.get("clientKeyData") or ""),
    )
    if not token and not (cert and key):
        raise ClusterError(f"{what}: the ExecCredential has neither a token nor a certificate")
    return Credential(token, cert, key, _expiry(status.get("expirationTimestamp"), what))


def _expiry(raw: Any, what: str) -> datetime.datetime | None:
    if not raw:
        return None
    try:
        when = datetime.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise ClusterError(f"{what}: expirationTimestamp is not RFC 3339") from None
    return when if when.tzinfo else when.replace(tzinfo=datetime.UTC)
