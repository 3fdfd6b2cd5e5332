"""What every answer of the query service carries, and the `Host` check.

Every answer says `X-Content-Type-Options: nosniff` and, except the web view's static assets,
`Cache-Control: no-store` (lists, objects and errors are per-user: no shared cache may keep
them). In `header` and `anonymous` modes the identity is not a credential a browser lacks, so a
page that rebinds its DNS name to the service's address could read it as its own origin: such
requests name a foreign `Host`, refused unless listed in `FLEETSCOPE_ALLOWED_HOSTS`. Probes and
scrapes (`/healthz`, `/readyz`, `/metrics`), reached by address, are not checked.
"""

from __future__ import annotations

from flask import Flask, Response, request

from common.errors import ForeignHost
from common.settings import Settings

UNCHECKED = frozenset({"/healthz", "/readyz", "/metrics"})
CHECKED_MODES = ("header", "anonymous")


def split_host(value: str) -> tuple[str, str]:
    """A `Host` header as (lower-case name, port or ""); IPv6 literals without brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest.removeprefix(":")
    name, sep, port = value.rpartition(":")
    if not sep or ":" in name:  # no port, or a bare IPv6 address
        return value, ""
    return name, port


class HostCheck:
    """Is a `Host` header one of the allowed names (`NAME` any port, `NAME:PORT` that one)?"""

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self.any = "*" in allowed
        self.names = {split_host(a) for a in allowed if a != "*"}

    def allows(self, host: str) -> bool:
        if self.any:
            return True
        name, port = split_host(host)
        return (name, "") in self.names or (name, port) in self.names


def install(app: Flask, settings: Settings) -> None:
    """The Host check (header and anonymous modes) and the response headers."""
    if settings.auth_mode in CHECKED_MODES:
        check = HostCheck(settings.allowed_hosts)

        @app.before_request
        def _host() -> None:
            if request.path in UNCHECKED:
                return
            host = request.headers.get("Host", "")
            if not check.allows(host):
                raise ForeignHost(
                    f"Host {host[:80]!r} is not a name this service answers to; an operator "
                    "adds it to FLEETSCOPE_ALLOWED_HOSTS"
                )

    @app.after_request
    def _headers(resp: Response) -> Response:
        resp.headers["X-Content-Type-Options"] = "nosniff"
        if request.endpoint != "ui.static":
            resp.headers["Cache-Control"] = "no-store"
        return resp
